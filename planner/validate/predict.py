"""Predict a published measurement from its setup, with the planner's one physics
and its one load model.

A row becomes a :class:`~planner.spec.scenario.Scenario` (GPU, model, number
formats, TP, ISL/OSL, the family's efficiencies) and a load on one replica; the
replica's state comes from :func:`planner.sizing.load.replica_load` (the load
model of :mod:`planner.physics.queueing`, which ``plan`` and ``sweep`` use too):

* no concurrency and no rate (offline max throughput): a closed loop at the
  batch cap B = min(KV budget sequences at ISL + OSL, the engine's max batch);
  TTFT there is set by the benchmark's queue depth, which such a row does not
  state, so TTFT/E2E rows without a load are skipped.  A run that reports a
  latency metric without a load was an online benchmark whose client load is
  unstated (:func:`~planner.validate.rows.unstated_load_runs`): every metric of
  it is skipped (:func:`setup_rows`).
* concurrency c per replica: a closed loop of c users (beyond the batch cap the
  extra users queue).
* request rate λ per replica: an open loop; the batch solves Little's law.

Totals over several GPUs are replicas × per replica, replicas = GPUs / (TP × PP).
A GPU named without its variant runs on the common one, noted in ``notes``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import validation_message
from planner.physics.terms import TERM_NAMES, physics_terms
from planner.sizing.load import LoadPoint, replica_load
from planner.sizing.replica import memory_section
from planner.spec.catalog import get_gpu, get_model
from planner.spec.context import moe_step_overhead_share, resolve
from planner.spec.scenario import Efficiency, Parallel, Scenario, Serving, Workload, resolve_model
from planner.validate.disagg import disaggregated_point
from planner.validate.layout import (
    PoolSetup,
    multi_node_problem,
    pool_setup,
    row_layout,
    row_speculative,
    unmodelled,
)
from planner.validate.names import (
    assumed_gpu_variant,
    attention_dp_balance_iters,
    engine_family,
    length_range_ratio,
    precision_dtypes,
    resolve_gpu_name,
    resolve_model_name,
    row_kv_dtype,
    scheduler_recv_interval,
)
from planner.validate.recipes import decode_max_batch
from planner.validate.rows import METRICS, MeasurementRow, run_key, unstated_load_runs

__all__ = [
    "ENGINE_CHUNK_TOKENS",
    "ENGINE_MAX_BATCH",
    "ENGINE_MEMORY_UTILIZATION",
    "EfficiencySet",
    "LoadPoint",
    "RowSetup",
    "UNSTATED_LOAD_REASON",
    "efficiency_for",
    "operating_point",
    "predict_row",
    "setup_row",
    "setup_rows",
    "shared_runs",
]

UNSTATED_LOAD_REASON = ("client concurrency / request rate not stated for this online run (it reports latencies, "
                        "so a client with an unknown load drove it): every metric of the run is skipped")

# Engine caps on the running batch: TensorRT-LLM's default max_batch_size
# (2048 in trtllm-bench engines), vLLM's max_num_seqs default (256), SGLang's
# max_running_requests default: half its KV pool's tokens, within its request-slot pool
# (a few thousand; the KV budget binds first for long sequences), so 4096 here; InferenceX's
# SGLang recipes set --max-running-requests to the client concurrency (up to 512).  At 256,
# SGLang's 512-client runs queued half their clients in the model (TTFT 20-25 s predicted,
# 1.6-3.0 s measured; TPOT 40-51% fast) where they decoded at batch 512.
ENGINE_MAX_BATCH: dict[str, int] = {"trtllm": 2048, "vllm": 256, "sglang": 4096}
# KV budget accounting per engine (planner.physics.memory.kv_budget_bytes, of the
# CUDA-visible bytes): TensorRT-LLM hands kv_cache_free_gpu_mem_fraction of the memory
# free after weights and activations to the KV cache (0.95 in trtllm-bench's
# published runs, 0.9 its library default); vLLM's gpu_memory_utilization covers
# everything (default 0.9); SGLang's mem_fraction_static covers weights and the KV
# pool (0.88 for one 80 GB GPU in its defaults).
ENGINE_MEMORY_UTILIZATION: dict[str, float | None] = {"trtllm": 0.95, "vllm": 0.9, "sglang": 0.88}
# Per-iteration token budget (serving.chunk_tokens) the engines default to on an
# 80 GB-class GPU: TensorRT-LLM max_num_tokens 8192, vLLM V1 max_num_batched_tokens
# 8192 (its API server on >= 70 GiB GPUs), SGLang chunked_prefill_size 8192.
ENGINE_CHUNK_TOKENS: dict[str, int] = {"trtllm": 8192, "vllm": 8192, "sglang": 8192}

Load = Literal["max_throughput", "concurrency", "request_rate"]


class EfficiencySet(BaseModel):
    """The fitted factors one engine family runs at."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    bandwidth: float = Field(gt=0, le=1)
    compute: float = Field(gt=0, le=1)
    step_overhead_s: float = Field(ge=0)
    layer_overhead_s: float = Field(default=0.0, ge=0)
    # Fitted physics terms (planner.physics.terms); None: the fitted default.
    collective_hop_s: float | None = Field(default=None, ge=0)
    sequence_overhead_s: float | None = Field(default=None, ge=0)
    gemm_half_width: float | None = Field(default=None, ge=0)
    graph_layer_overhead_s: float | None = Field(default=None, ge=0)
    collective_call_s: float | None = Field(default=None, ge=0)
    moe_layer_overhead_s: float | None = Field(default=None, ge=0)
    moe_token_overhead_s: float | None = Field(default=None, ge=0)
    mtp_acceptance: float | None = Field(default=None, ge=0, lt=1)
    moe_prefill_layer_overhead_s: float | None = Field(default=None, ge=0)
    moe_prefill_token_overhead_s: float | None = Field(default=None, ge=0)
    all_to_all_call_s: float | None = Field(default=None, ge=0)
    mtp_acceptance_trtllm: float | None = Field(default=None, ge=0, lt=1)
    moe_prefill_slot_passes: float | None = Field(default=None, ge=0)
    moe_step_overhead_share: float | None = Field(default=None, ge=0)
    disagg_handoff_s: float | None = Field(default=None, ge=0)
    moe_prefill_host_layer_s: float | None = Field(default=None, ge=0)
    disagg_handoff_iterations: float | None = Field(default=None, ge=0)

    def terms(self) -> dict[str, float]:
        """The physics terms this set states."""
        return {k: v for k in TERM_NAMES if (v := getattr(self, k)) is not None}


def efficiency_for(family: str, table: dict[str, dict[str, float]]) -> EfficiencySet:
    """The family's entry of a fitted table, else its ``generic`` entry."""
    return EfficiencySet(**table.get(family, table["generic"]))


@dataclass(frozen=True)
class RowSetup:
    """A row mapped onto the planner: everything but the efficiencies."""

    row: MeasurementRow
    family: str
    scenario: Scenario
    replicas: int
    load: Load
    load_per_replica: float | None  # users or requests/s on one replica
    max_batch: int
    # The mean prompt and output lengths the client sent (isl, osl unless it drew them at random).
    prompt_tokens: float
    output_tokens: float
    notes: tuple[str, ...]
    pools: PoolSetup | None = None  # a disaggregated run: ``scenario`` is its decode workers'

    def with_efficiency(self, eff: EfficiencySet, scenario: Scenario | None = None) -> Scenario:
        """The scenario at ``eff``: its step overhead is the family's × the MoE share (the
        scenario states it, so planner.spec.context.resolve applies none of its own)."""
        s = scenario or self.scenario
        share = moe_step_overhead_share(resolve_model(s), eff.moe_step_overhead_share)
        return s.model_copy(update={"efficiency": Efficiency(
            bandwidth=eff.bandwidth, compute=eff.compute, step_overhead_s=eff.step_overhead_s * share,
            layer_overhead_s=eff.layer_overhead_s)})


def setup_row(row: MeasurementRow, eff: EfficiencySet) -> RowSetup | str:
    """Map a row to a scenario and load, or return why it cannot be predicted."""
    if row.metric not in METRICS:
        return f"metric '{row.metric}' not predictable (known: {', '.join(METRICS)})"
    if row.isl is None or row.osl is None:
        return "input/output lengths (isl/osl) not given: the step times depend on them"
    if row.concurrency is not None and row.request_rate is not None:
        return "both concurrency and request_rate given: the load is ambiguous"
    load: Load = ("concurrency" if row.concurrency is not None
                  else "request_rate" if row.request_rate is not None else "max_throughput")
    if load == "max_throughput" and row.metric in {"ttft_ms", "e2e_s"}:
        return "TTFT/E2E at offline max throughput depend on the benchmark's queue depth, which the row does not give"
    why_not = unmodelled(row)
    if why_not is not None:
        return why_not
    family = engine_family(row.engine)
    model_id, why = resolve_model_name(row.model)
    if model_id is None:
        return why or "unknown model"
    notes: list[str] = []
    ratio, why = length_range_ratio(row.length_range_ratio, row.source)
    if why:
        notes.append(why)
    share = (1.0 + ratio) / 2.0 if ratio is not None else 1.0
    n_mean, o_mean = row.isl * share, row.osl * share
    gpu_id, why = resolve_gpu_name(row.gpu)
    if gpu_id is None:
        assumed = assumed_gpu_variant(row.gpu)
        if assumed is None:
            return why or "unknown gpu"
        gpu_id = assumed[0]
        notes.append(assumed[1])
    dtypes, why = precision_dtypes(row.precision, family=family)
    if dtypes is None:
        return why or "unknown precision"
    kv, why = row_kv_dtype(stated=row.kv_dtype, notes=row.notes, architecture=get_gpu(gpu_id).architecture,
                           label=dtypes[1])
    notes.extend([why] if why else [])
    pp = row.pp or 1
    tp = row.tp
    if tp is None:
        tp = row.n_gpus // pp
        notes.append(f"tp not given: assumed tp = n_gpus / pp = {tp}")
    if row.disaggregated is not None:
        if load != "concurrency":
            return "disaggregated: only a closed-loop client (concurrency over the deployment) is modelled"
        notes.append("disaggregated: the pools' own layouts are used (the row's tp/ep describe a decode worker)")
        replicas = 1
    elif row.n_gpus % (tp * pp):
        return f"n_gpus ({row.n_gpus}) is not a multiple of tp × pp ({tp} × {pp})"
    else:
        replicas = row.n_gpus // (tp * pp)
    layout = (Parallel() if row.disaggregated is not None  # each pool's own layout, set below
              else row_layout(row, tp=tp, pp=pp, ep=row.ep, dp_attention=row.dp_attention, where="parallel",
                              family=family, notes=notes, experts=get_model(model_id).experts))
    if isinstance(layout, str):
        return layout
    spec = row_speculative(row, family, notes)
    if isinstance(spec, str):
        return spec
    per = None
    if row.concurrency is not None:
        per = row.concurrency / replicas
    elif row.request_rate is not None:
        per = row.request_rate / replicas
    memory_engine = "sglang" if "sglang" in row.engine.lower() else family
    util = ENGINE_MEMORY_UTILIZATION.get(memory_engine)
    recv, why = scheduler_recv_interval(stated=row.scheduler_recv_interval, engine=row.engine, source=row.source,
                                        gpu=gpu_id, tp=tp, precision=row.precision, concurrency=row.concurrency,
                                        dp_attention=row.dp_attention, disaggregated=row.disaggregated is not None)
    if why:
        notes.append(why)
    balance, why = attention_dp_balance_iters(stated=row.attention_dp_balance_iters, engine=row.engine,
                                              source=row.source, dp_attention=layout.dp_attention,
                                              disaggregated=row.disaggregated is not None)
    if why:
        notes.append(why)
    try:
        scenario = Scenario(
            name=row.id, gpu=gpu_id, model=model_id, weights_dtype=dtypes[0], kv_dtype=kv,
            parallel=layout, speculative=spec,
            workload=Workload(prompt_tokens=max(1, round(n_mean)), output_tokens=max(1, round(o_mean)),
                              requests_per_s=per if load == "request_rate" and per else 1.0),
            serving=Serving(memory_utilization=util, engine=memory_engine,
                            chunk_tokens=ENGINE_CHUNK_TOKENS.get(memory_engine, 8192),
                            scheduler_recv_interval=recv, attention_dp_balance_iters=balance),
            efficiency=Efficiency(bandwidth=eff.bandwidth, compute=eff.compute,
                                  step_overhead_s=eff.step_overhead_s),
        )
    except ValidationError as exc:
        return f"scenario rejected: {validation_message(exc)}"
    pools = None
    if row.disaggregated is not None:
        g = resolve(scenario).gpu
        split = pool_setup(row, scenario, gpus_per_domain=g.scaleup_domain_gpus, gpus_per_node=g.gpus_per_node,
                           family=family, notes=notes)
        if isinstance(split, str):
            return split
        scenario, pools = split
    else:
        mn = multi_node_problem(row, gpus_per_replica=layout.gpus, gpus_per_node=resolve(scenario).gpu.gpus_per_node,
                                notes=notes)
        if mn is not None:
            return mn
    mem = memory_section(resolve(scenario), {}, context_tokens=round(n_mean + o_mean))
    if mem.max_sequences < 1 and util is not None and util < _MAX_MEMORY_UTILIZATION:
        # The run happened, so it fit: the engine ran with a larger memory fraction than its default.
        roomier = _with_utilization(scenario, _MAX_MEMORY_UTILIZATION)
        pools = pools if pools is None else replace(pools, prefill=_with_utilization(pools.prefill,
                                                                                     _MAX_MEMORY_UTILIZATION))
        mem2 = memory_section(resolve(roomier), {}, context_tokens=round(n_mean + o_mean))
        if mem2.max_sequences >= 1:
            notes.append(f"does not fit at the engine's default memory fraction {util}: predicted at "
                         f"{_MAX_MEMORY_UTILIZATION} (the run fit, so the engine was given more)")
            scenario, mem = roomier, mem2
    if mem.max_sequences < 1:
        return (f"does not fit: KV budget {mem.kv_budget_bytes / 1e9:.1f} GB per GPU holds "
                f"{mem.max_sequences:.2f} sequences of {n_mean + o_mean:g} tokens")
    cap = ENGINE_MAX_BATCH[memory_engine]
    ranks = scenario.parallel.attention_dp
    if ranks > 1:
        # Attention data parallelism: each rank runs its own scheduler with the engine's cap
        # (TensorRT-LLM's max_batch_size and SGLang's cuda-graph batch are per rank).
        cap *= ranks
        notes.append(f"running-batch cap: the engine's {cap // ranks} per attention-DP rank × {ranks} ranks")
    max_batch = max(1, min(int(math.floor(mem.max_sequences)), cap))
    held, why = decode_max_batch(row)  # a disaggregated run's decode cap (planner.validate.recipes)
    if held is not None:
        max_batch = min(max_batch, held)
        notes.append(why or f"decode running-batch cap: {held} sequences per decode worker (stated)")
    return RowSetup(row=row, family=family, scenario=scenario, replicas=replicas, load=load,
                    load_per_replica=per, max_batch=max_batch, notes=tuple(notes), pools=pools,
                    prompt_tokens=n_mean, output_tokens=o_mean)


# The largest memory fraction an engine is run at (TensorRT-LLM's 0.95 in trtllm-bench).
_MAX_MEMORY_UTILIZATION = 0.95


def _with_utilization(s: Scenario, util: float) -> Scenario:
    return s.model_copy(update={"serving": s.serving.model_copy(update={"memory_utilization": util})})


def setup_rows(rows: Sequence[MeasurementRow], eff: EfficiencySet | Sequence[EfficiencySet],
               context: Sequence[MeasurementRow] | None = None) -> list[RowSetup | str]:
    """:func:`setup_row` for each row (``eff``: one set, or one per row), and the
    run rule: a row of a run whose client load is unstated (judged over
    ``context``, default ``rows``: pass the whole file when predicting a part of
    it) is skipped with that reason."""
    unstated = unstated_load_runs(rows if context is None else context)
    effs = [eff] * len(rows) if isinstance(eff, EfficiencySet) else list(eff)
    return [UNSTATED_LOAD_REASON if run_key(r) in unstated else setup_row(r, e)
            for r, e in zip(rows, effs, strict=True)]


def operating_point(setup: RowSetup, eff: EfficiencySet) -> LoadPoint:
    """The replica's state at the row's load.  Inside :func:`shared_runs`, rows of one run
    (the same setup and load, another metric) share it: computed once per run and
    efficiency set."""
    cache = _RUNS.get()
    if cache is None:
        return _operating_point(setup, eff)
    key = (run_key(setup.row), eff)
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = _operating_point(setup, eff)
    return hit


_RUNS: ContextVar[dict[tuple[object, ...], LoadPoint] | None] = ContextVar("validate_runs", default=None)


@contextmanager
def shared_runs() -> Iterator[None]:
    """Within it, :func:`operating_point` computes each run's state once per efficiency set
    (a fit evaluates the four metrics of a run at one set); outside it, nothing is kept,
    so a changed catalog or physics term is never answered from an old state."""
    token = _RUNS.set({} if _RUNS.get() is None else _RUNS.get())
    try:
        yield
    finally:
        _RUNS.reset(token)


def _operating_point(setup: RowSetup, eff: EfficiencySet) -> LoadPoint:
    r = resolve(setup.with_efficiency(eff))
    if setup.pools is not None:
        pools = setup.pools
        with physics_terms(**eff.terms()):
            return disaggregated_point(resolve(setup.with_efficiency(eff, pools.prefill)), r,
                                       prompt_tokens=setup.prompt_tokens, output_tokens=setup.output_tokens,
                                       users=float(setup.load_per_replica or 1.0),
                                       prefill_workers=pools.prefill_workers, decode_workers=pools.decode_workers,
                                       max_batch=setup.max_batch, link=pools.link)
    with physics_terms(**eff.terms()):
        return replica_load(r, load=setup.load, prompt_tokens=setup.prompt_tokens,
                            output_tokens=setup.output_tokens, max_batch=setup.max_batch,
                            level=setup.load_per_replica, replicas=setup.replicas)


def predict_row(setup: RowSetup, eff: EfficiencySet) -> tuple[float, LoadPoint]:
    """(predicted value in the row's own unit, operating point)."""
    op = operating_point(setup, eff)
    m = setup.row.metric
    total = op.output_tok_s_per_replica * setup.replicas
    # input tokens/s: the request rate the output rate implies (output / mean OSL) × mean ISL
    input_total = total / setup.output_tokens * setup.prompt_tokens
    out_gpus = in_gpus = setup.row.n_gpus
    d = setup.row.disaggregated
    if setup.pools is not None and d is not None:
        # A disaggregated run's per-GPU rates are per pool (InferenceX: output per decode GPU,
        # input per prefill GPU): its own rows say so (one client at 137 tok/s reports 16.3 tok/s
        # per GPU over 8 decode GPUs; over all 16 GPUs that would be 260 tok/s, more than it made).
        out_gpus, in_gpus = d.decode_gpus, d.prefill_gpus
    value = {
        "output_tok_s_total": total,
        "output_tok_s_per_gpu": total / out_gpus,
        # one user's decode rate: tokens/s between its first and last token (1 / TPOT)
        "output_tok_s_per_user": 1.0 / op.itl_s if op.itl_s > 0 else 0.0,
        "input_tok_s_total": input_total,
        "input_tok_s_per_gpu": input_total / in_gpus,
        "ttft_ms": op.ttft_s * 1e3,
        "itl_ms": op.itl_s * 1e3,
        "tpot_ms": op.itl_s * 1e3,
        "e2e_s": op.e2e_s,
    }[m]
    return float(value), op
