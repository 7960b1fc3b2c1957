"""What a row says ran it, as planner layouts: TP × PP with EP and attention data
parallelism, speculative decoding, and the pools of a disaggregated run.  Every field a
row carries is used here or the row is skipped naming it (issue 25: never silently
dropped)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from planner.errors import validation_message
from planner.spec.scenario import Parallel, Scenario
from planner.validate.rows import MeasurementRow

__all__ = ["PoolSetup", "pool_setup", "row_layout", "unmodelled"]


@dataclass(frozen=True)
class PoolSetup:
    """A disaggregated run: the prefill workers' scenario (the row's scenario is the decode
    workers'), the worker counts, and the link the KV crosses."""

    prefill: Scenario
    prefill_workers: int
    decode_workers: int
    link: str


def unmodelled(row: MeasurementRow) -> str | None:
    """Why a field the row carries cannot be honoured (None: every field is used)."""
    if row.ep is not None and row.ep > 1:
        return f"ep: expert parallelism ({row.ep}) over the replica's GPUs is not modelled yet"
    if row.dp_attention:
        return "dp_attention: attention data parallelism is not modelled yet"
    if row.speculative not in (None, "none"):
        return f"speculative: {row.speculative} is not modelled yet"
    d = row.disaggregated
    if d is not None and (d.prefill_ep > 1 or d.decode_ep > 1 or d.prefill_dp_attention or d.decode_dp_attention):
        return "disaggregated: pools with expert parallelism or attention data parallelism are not modelled yet"
    return None


def row_layout(*, tp: int, pp: int, ep: int | None, dp_attention: bool | None, where: str) -> Parallel | str:
    """The layout of one replica (or worker), or why it cannot be run."""
    try:
        return Parallel(tp=tp, pp=pp)
    except ValidationError as exc:
        return f"{where}: {validation_message(exc)}"


def pool_setup(row: MeasurementRow, scenario: Scenario, *, gpus_per_domain: int) -> tuple[Scenario, PoolSetup] | str:
    """(decode workers' scenario, the pools) of a disaggregated row, or why not."""
    d = row.disaggregated
    assert d is not None
    for pool in ("prefill", "decode"):
        gpus, workers = getattr(d, f"{pool}_gpus"), getattr(d, f"{pool}_workers")
        if workers < 1:
            return f"disaggregated: {pool}_workers is {workers}: a pool of {gpus} GPUs without a worker"
        if gpus % workers:
            return f"disaggregated: {pool}_gpus ({gpus}) is not a whole number of GPUs per {pool} worker ({workers})"
    if d.prefill_gpus + d.decode_gpus != row.n_gpus:
        return (f"disaggregated: prefill_gpus + decode_gpus ({d.prefill_gpus} + {d.decode_gpus}) is not "
                f"n_gpus ({row.n_gpus})")
    layouts: dict[str, Parallel] = {}
    for pool in ("prefill", "decode"):
        gpus, workers = getattr(d, f"{pool}_gpus"), getattr(d, f"{pool}_workers")
        tp = getattr(d, f"{pool}_tp")
        per_worker = gpus // workers
        if per_worker != tp:
            return (f"disaggregated: a {pool} worker has {per_worker} GPUs ({pool}_gpus / {pool}_workers) but "
                    f"{pool}_tp is {tp}")
        lay = row_layout(tp=tp, pp=1, ep=getattr(d, f"{pool}_ep"), dp_attention=getattr(d, f"{pool}_dp_attention"),
                         where=f"disaggregated.{pool}")
        if isinstance(lay, str):
            return lay
        layouts[pool] = lay
    link = "nvlink" if row.n_gpus <= gpus_per_domain else "rdma"
    prefill = scenario.model_copy(update={"parallel": layouts["prefill"], "name": f"{scenario.name} (prefill)"})
    decode = scenario.model_copy(update={"parallel": layouts["decode"]})
    return decode, PoolSetup(prefill=prefill, prefill_workers=d.prefill_workers, decode_workers=d.decode_workers,
                             link=link)
