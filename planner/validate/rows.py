"""Published measurement rows: the file schema and its loader.

A file is either ``{"measurements": [row, ...], ...}`` (the shape of
``shared/data/published_calibration.json``) or a bare list of rows.  Every row
is validated into a frozen :class:`MeasurementRow`; a malformed row raises
:class:`~planner.errors.ScenarioError` naming the row (its id, else its index)
and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from planner.errors import ScenarioError
from planner.io.jsonfile import read_json
from planner.spec.bounds import MAX_BALANCE_ITERS, MAX_RECV_INTERVAL
from planner.spec.precision import KvDtype

__all__ = [
    "LATENCY_METRICS",
    "MAX_MEASUREMENT_ROWS",
    "METRICS",
    "DisaggregatedSetup",
    "MeasurementRow",
    "SPECULATIVE_METHODS",
    "load_measurements",
    "parse_measurements",
    "publication",
    "run_key",
    "unstated_load_runs",
]

# Rows one validation run predicts: the published file has 164 and takes ~1 s;
# 5,000 rows take well under a minute on a 2-core machine.
MAX_MEASUREMENT_ROWS = 5_000
_SHOWN_CHARS = 60  # how much of a bad value a message repeats

# Metrics a row may carry and their units (SI inside the planner; the file's
# own units are milliseconds for TTFT/ITL/TPOT and seconds for E2E).
METRICS: dict[str, str] = {
    "output_tok_s_total": "tok/s",
    "output_tok_s_per_gpu": "tok/s",
    "output_tok_s_per_user": "tok/s",
    "input_tok_s_total": "tok/s",
    "input_tok_s_per_gpu": "tok/s",
    "ttft_ms": "ms",
    "itl_ms": "ms",
    "tpot_ms": "ms",
    "e2e_s": "s",
}

PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


# Metrics that only exist under a client load: a run that reports one of them
# but states neither concurrency nor rate was driven by a client whose load the
# row does not give (an online benchmark), not by an offline max-throughput tool.
LATENCY_METRICS: frozenset[str] = frozenset({"ttft_ms", "itl_ms", "tpot_ms", "e2e_s"})


# What a row may say drafted its tokens (``speculative``): none, or a method the planner runs.
SPECULATIVE_METHODS: tuple[str, ...] = ("none", "mtp", "eagle", "draft_model")


class DisaggregatedSetup(BaseModel):
    """The pools of a disaggregated run: GPUs over all workers of a pool, each worker's
    layout (TP, EP, attention data parallelism) and the number of workers.  Whether the
    numbers make whole workers is judged when the row is predicted (a row whose pools do
    not add up is skipped with that reason, not refused with the file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    prefill_gpus: PosInt
    decode_gpus: PosInt
    prefill_tp: PosInt
    prefill_ep: PosInt = 1
    prefill_dp_attention: bool = False
    prefill_workers: NonNegInt
    decode_tp: PosInt
    decode_ep: PosInt = 1
    decode_dp_attention: bool = False
    decode_workers: NonNegInt
    # The engine's running-batch cap of one decode worker, all its attention-DP ranks
    # (TensorRT-LLM max_batch_size × ranks); None: not stated (planner.validate.recipes).
    decode_max_batch: Annotated[int, Field(ge=1, le=65536)] | None = None
    # A prefill worker's token budget per pass on each attention rank (TensorRT-LLM
    # max_num_tokens, SGLang chunked_prefill_size / dp_size); None: not stated
    # (planner.validate.layout.prefill_pass_tokens).
    prefill_chunk_tokens: Annotated[int, Field(ge=16, le=1_000_000)] | None = None


class MeasurementRow(BaseModel):
    """One published measurement with its setup (extra keys such as
    ``params_b`` are kept out; they do not change a prediction).  ``source``
    and ``engine_version`` do not change a prediction either; they group rows
    into publications (leave-one-source-out) and runs."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: Annotated[str, Field(min_length=1)]
    engine: Annotated[str, Field(min_length=1)]
    model: Annotated[str, Field(min_length=1)]
    precision: Annotated[str, Field(min_length=1)]
    gpu: Annotated[str, Field(min_length=1)]
    n_gpus: PosInt
    tp: PosInt | None = None
    pp: PosInt | None = None
    # What ran it (issue 25): expert parallelism over the replica's GPUs, attention data
    # parallelism, speculative decoding, a group spanning nodes, disaggregated pools.
    # None: not stated (a row predicted without it says so in its notes).
    ep: PosInt | None = None
    dp_attention: bool | None = None
    speculative: Literal["none", "mtp", "eagle", "draft_model"] | None = None
    speculative_draft_tokens: PosInt | None = None
    multi_node: bool | None = None
    disaggregated: DisaggregatedSetup | None = None
    # SGLang's --scheduler-recv-interval (serving.scheduler_recv_interval); None: not stated
    # (planner.validate.names.scheduler_recv_interval: the recipe's, where it is known).
    scheduler_recv_interval: Annotated[int, Field(ge=1, le=MAX_RECV_INTERVAL)] | None = None
    # TensorRT-LLM's attention-DP balance timeout (serving.attention_dp_balance_iters; 0: off);
    # None: not stated (planner.validate.names.attention_dp_balance_iters: the recipe's, where known).
    attention_dp_balance_iters: Annotated[int, Field(ge=0, le=MAX_BALANCE_ITERS)] | None = None
    # The KV cache's precision the run used; None: the precision label's
    # (planner.validate.names.precision_dtypes, row_kv_dtype).
    kv_dtype: KvDtype | None = None
    isl: PosInt | None = None
    osl: PosInt | None = None
    # The client drew each request's lengths uniformly in [r·isl, isl] and [r·osl, osl]
    # (benchmark_serving's --random-range-ratio r): their means are (1 + r)/2 × the stated ones.
    # None: fixed lengths, unless the source's benchmark is known to draw them
    # (planner.validate.names.length_range_ratio).
    length_range_ratio: Annotated[float, Field(gt=0, le=1)] | None = None
    concurrency: PosFloat | None = None
    request_rate: PosFloat | None = None
    metric: Annotated[str, Field(min_length=1)]
    value: PosFloat
    trust: str | None = None
    notes: str | None = None
    source: str | None = None
    engine_version: str | None = None


def publication(source: str | None) -> str:
    """The publication a row's ``source`` belongs to, for leave-one-source-out:
    the text before any parenthetical remark (``... (read from mirror ...)``),
    without a URL fragment or query; every file of one MLPerf results round
    (``github.com/mlcommons/inference_results_v4.1/...``) is one publication."""
    if not source:
        return "(no source)"
    text = source.split(" (", 1)[0].strip().split("#", 1)[0].split("?", 1)[0]
    m = re.search(r"github\.com/mlcommons/(inference_results_v[\d.]+)", text)
    return f"mlcommons/{m.group(1)}" if m else text


def run_key(row: MeasurementRow) -> tuple[object, ...]:
    """Rows of one benchmark run: the same setup and load, differing only in
    the metric (and id, value, notes)."""
    return (publication(row.source), row.engine, row.engine_version, row.model, row.precision, row.gpu, row.n_gpus,
            row.tp, row.pp, row.ep, row.dp_attention, row.speculative, row.speculative_draft_tokens, row.multi_node,
            row.disaggregated, row.isl, row.osl, row.length_range_ratio, row.concurrency, row.request_rate)


def unstated_load_runs(rows: Iterable[MeasurementRow]) -> frozenset[tuple[object, ...]]:
    """Runs whose client load is truly unstated: no concurrency and no rate, yet
    a latency metric (TTFT, ITL, TPOT, E2E) reported, so a client with some
    unknown number of requests in flight drove it.  Every metric of such a run
    is skipped (an offline max-throughput run reports throughput only)."""
    return frozenset(run_key(r) for r in rows
                     if r.concurrency is None and r.request_rate is None and r.metric in LATENCY_METRICS)


_ROW = TypeAdapter(MeasurementRow)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


def _label(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"]:
        return f"row {index} (id {_shown(raw['id'])})"
    return f"row {index}"


def parse_measurements(data: Any) -> tuple[MeasurementRow, ...]:
    """Validate every row; the first bad one raises naming row and field."""
    rows = data.get("measurements") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise ScenarioError("measurements: expected a list of rows (or an object with a 'measurements' list)")
    if len(rows) > MAX_MEASUREMENT_ROWS:
        raise ScenarioError(f"measurements: {len(rows):,} rows is over the limit of {MAX_MEASUREMENT_ROWS:,}")
    out: list[MeasurementRow] = []
    seen: set[str] = set()
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict):
            raise ScenarioError(f"measurements {_label(raw, i)}: expected an object")
        try:
            row = _ROW.validate_python(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "row"
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "missing":
                msg = "missing"
            raise ScenarioError(f"measurements {_label(raw, i)}: {field}: {msg} (got {_shown(err.get('input'))})"
                                if err["type"] != "missing" else
                                f"measurements {_label(raw, i)}: {field}: missing") from None
        if row.id in seen:
            raise ScenarioError(f"measurements {_label(raw, i)}: id: duplicate id {_shown(row.id)}")
        seen.add(row.id)
        out.append(row)
    return tuple(out)


def load_measurements(path: str | Path) -> tuple[MeasurementRow, ...]:
    """Read and validate a measurement file (JSON)."""
    return parse_measurements(read_json(path, want_object=False))
