"""The decode pool's running-batch cap of a disaggregated run.

A closed loop of N clients over a disaggregated deployment whose decode workers hold
at most S sequences keeps N − S of them waiting for a decode slot after their prompt:
they wait before their first token (``planner.validate.disagg``: users beyond what the
decode grid holds queue, TTFT += N/X − E2E).  S is the engine's running-batch cap
(TensorRT-LLM ``max_batch_size``, per attention-DP rank), not the KV budget, in the
recipes that publish these runs, and InferenceX's rows do not carry it.

A row states it as ``disaggregated.decode_max_batch`` (per decode worker, all its
attention-DP ranks).  Where it is silent, InferenceX's Dynamo + TensorRT-LLM points are
looked up in ``inferencex_recipes.json``: the ``batch<B>`` of the srt-slurm recipe each
point names in InferenceX's sweep config (``bench/inferencex_recipes.py`` reads it).
Nothing here is fitted.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from planner.validate.names import INFERENCEX_SOURCE, dynamo_stack, engine_family
from planner.validate.rows import MeasurementRow

__all__ = ["RECIPES_PATH", "decode_max_batch", "inferencex_recipe", "inferencex_recipes"]

RECIPES_PATH = Path(__file__).with_name("inferencex_recipes.json")
_MAX_BATCH = 65536


class _Pool(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    workers: Annotated[int, Field(ge=1, le=1024)]
    tp: Annotated[int, Field(ge=1, le=1024)]
    ep: Annotated[int, Field(ge=1, le=1024)]
    dp_attention: bool


class _Recipe(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    gpu: str
    precision: str
    framework: str
    isl: Annotated[int, Field(ge=1)]
    osl: Annotated[int, Field(ge=1)]
    speculative: str
    prefill: _Pool
    decode: _Pool
    concurrency: list[Annotated[int, Field(ge=1)]]
    decode_batch_per_rank: Annotated[int, Field(ge=1, le=_MAX_BATCH)]
    # the context servers' max_num_tokens: a prefill pass's budget on each attention-DP rank
    prefill_tokens_per_rank: Annotated[int, Field(ge=16, le=1_000_000)] | None = None
    recipe: Annotated[str, Field(min_length=1)]


class _Recipes(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    about: str
    source: str
    recipes: list[_Recipe]


def _key(gpu: str, precision: str, framework: str, isl: int, osl: int, spec: str, p: _Pool, d: _Pool,
         conc: int) -> tuple[object, ...]:
    return (gpu.lower(), precision.lower(), framework, isl, osl, spec,
            p.workers, p.tp, p.ep, p.dp_attention, d.workers, d.tp, d.ep, d.dp_attention, conc)


@cache
def inferencex_recipes() -> dict[tuple[object, ...], _Recipe]:
    """The shipped table, validated on load, keyed by point and client concurrency."""
    doc = _Recipes.model_validate_json(RECIPES_PATH.read_text())
    return {_key(r.gpu, r.precision, r.framework, r.isl, r.osl, r.speculative, r.prefill, r.decode, c): r
            for r in doc.recipes for c in r.concurrency}


def inferencex_recipe(row: MeasurementRow) -> _Recipe | None:
    """The InferenceX Dynamo + TensorRT-LLM recipe point a disaggregated row ran, else None."""
    d = row.disaggregated
    if (d is None or INFERENCEX_SOURCE not in (row.source or "").lower() or not dynamo_stack(row.engine)
            or engine_family(row.engine) != "trtllm" or row.concurrency is None or row.isl is None
            or row.osl is None or not d.decode_workers or not d.prefill_workers):
        return None
    p = _Pool(workers=d.prefill_workers, tp=d.prefill_tp, ep=d.prefill_ep, dp_attention=d.prefill_dp_attention)
    q = _Pool(workers=d.decode_workers, tp=d.decode_tp, ep=d.decode_ep, dp_attention=d.decode_dp_attention)
    return inferencex_recipes().get(_key(row.gpu, row.precision, "dynamo-trt", row.isl, row.osl,
                                         row.speculative or "none", p, q, round(row.concurrency)))


def decode_max_batch(row: MeasurementRow) -> tuple[int | None, str | None]:
    """(running sequences per decode worker, a note saying where it came from) for a
    disaggregated row: its own ``decode_max_batch``, else its InferenceX recipe's, else
    (None, None): the engine's default and the KV budget decide."""
    d = row.disaggregated
    if d is None:
        return None, None
    if d.decode_max_batch is not None:
        return d.decode_max_batch, None
    found = inferencex_recipe(row)
    if found is None or row.concurrency is None:
        return None, None
    ranks = d.decode_tp if d.decode_dp_attention else 1
    per_worker = found.decode_batch_per_rank * ranks
    how = f"{found.decode_batch_per_rank} per attention-DP rank × {ranks} ranks" if ranks > 1 else "per worker"
    return per_worker, (f"decode running-batch cap not stated: {per_worker} sequences per decode worker ({how}, "
                        f"max_batch_size of InferenceX's recipe {found.recipe}); "
                        f"{d.decode_workers} workers hold {per_worker * d.decode_workers} of "
                        f"{row.concurrency:g} clients")
