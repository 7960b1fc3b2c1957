"""Imported rows mapped onto the planner with the user's scenario, and predicted.

Unlike ``validate`` (whose rows name catalog entries), an imported row runs on the
scenario the user gives, which may carry an inline GPU or model spec: each row
becomes a :class:`~planner.validate.RowSetup` over that scenario with the row's own
lengths and load, so ``validate``'s one prediction (:func:`~planner.validate.predict_row`)
and its fit (:func:`~planner.validate.fit_efficiency`) run on it unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from planner.benchimport.setup import BenchSetup
from planner.sizing.replica import memory_section
from planner.spec.context import resolve
from planner.spec.scenario import Scenario
from planner.validate import (
    ENGINE_MAX_BATCH,
    METRICS,
    EfficiencySet,
    MeasurementRow,
    RowResult,
    RowSetup,
    row_result,
    shared_runs,
)
from planner.validate.predict import Load

__all__ = ["compare_rows", "row_setup", "scenario_efficiency"]


def scenario_efficiency(scenario: Scenario) -> EfficiencySet:
    """The efficiencies a plan of ``scenario`` runs at (its own, else the fitted defaults)."""
    r = resolve(scenario)
    return EfficiencySet(bandwidth=r.bandwidth_efficiency, compute=r.compute_efficiency,
                         step_overhead_s=r.step_overhead_s, layer_overhead_s=r.layer_overhead_s)


def row_setup(row: MeasurementRow, setup: BenchSetup) -> RowSetup | str:
    """The row on the setup's scenario at its own lengths and load, or why it cannot be predicted."""
    if row.metric not in METRICS:
        return f"metric '{row.metric}' not predictable"
    if row.isl is None or row.osl is None:
        return "input/output lengths not given: set workload.prompt_tokens and workload.output_tokens"
    if row.concurrency is not None and row.request_rate is not None:
        return "both a concurrency cap and a request rate: the load is ambiguous (the planner models one)"
    load: Load = ("concurrency" if row.concurrency is not None else "request_rate" if row.request_rate
                  else "max_throughput")
    if load == "max_throughput" and row.metric in {"ttft_ms", "e2e_s"}:
        return "TTFT/E2E at max throughput depend on the benchmark's queue depth, which the file does not give"
    replicas = setup.replicas
    per = (row.concurrency if row.concurrency is not None else row.request_rate)
    per = None if per is None else per / replicas
    base = setup.scenario
    data = base.model_dump(mode="json")
    data["workload"] = {**data["workload"], "prompt_tokens": row.isl, "output_tokens": row.osl,
                        "trace": None, "profile": None}
    if load == "request_rate" and per:
        data["workload"]["requests_per_s"] = per
    scenario = Scenario.model_validate(data)
    mem = memory_section(resolve(scenario), {}, context_tokens=row.isl + row.osl)
    if mem.max_sequences < 1:
        return (f"does not fit: KV budget {mem.kv_budget_bytes / 1e9:.1f} GB per GPU holds "
                f"{mem.max_sequences:.2f} sequences of {row.isl + row.osl} tokens")
    cap = base.serving.batch_size or ENGINE_MAX_BATCH.get(setup.family, ENGINE_MAX_BATCH["vllm"])
    max_batch = max(1, min(int(math.floor(mem.max_sequences)), cap))
    return RowSetup(row=row, family=setup.family, scenario=scenario, replicas=replicas, load=load,
                    load_per_replica=per, max_batch=max_batch, prompt_tokens=float(row.isl),
                    output_tokens=float(row.osl), notes=())


def compare_rows(rows: Sequence[MeasurementRow], setups: Sequence[BenchSetup],
                 eff: EfficiencySet | None = None) -> list[RowResult]:
    """Each row measured beside predicted (at ``eff``, default the scenario's own efficiencies)."""
    out = []
    with shared_runs():
        for row, setup in zip(rows, setups, strict=True):
            mapped = row_setup(row, setup)
            out.append(row_result(row, mapped, eff or scenario_efficiency(setup.scenario)))
    return out
