"""A scenario resolved against the catalog: specs, efficiencies and their origins.

Every plan, sweep and simulation starts here, so a default or a calibrated
value is chosen in exactly one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from numpy.typing import ArrayLike

from planner.spec.defaults import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_COMPUTE_EFFICIENCY,
    DEFAULT_EFFICIENCY_ORIGIN,
    DEFAULT_LAYER_OVERHEAD_S,
    DEFAULT_STEP_OVERHEAD_S,
)
from planner.spec.derivation import Origin
from planner.spec.params import ParamCounts, param_counts
from planner.spec.scenario import Scenario, resolve_gpu, resolve_model
from planner.spec.specs import GpuSpec, ModelSpec
from planner.spec.terms import term

__all__ = ["Resolved", "StepKwargs", "kv_transfer_setup_s", "moe_step_overhead_share", "resolve"]


class StepKwargs(TypedDict):
    """The keyword arguments every step-time call shares (``decode_step``,
    ``prefill_step``): spread with ``**`` so mypy checks each against the
    function's own parameter.  The layout entries take arrays where a caller
    evaluates many candidate layouts at once."""

    model: ModelSpec
    gpu: GpuSpec
    weights_dtype: str
    kv_dtype: str
    tp: ArrayLike
    pp: ArrayLike
    ep: ArrayLike
    dp_attention: ArrayLike
    redundant_experts: int
    bandwidth_efficiency: float
    compute_efficiency: float
    step_overhead_s: float
    layer_overhead_s: float
    collective_latency_s: float | None


@dataclass(frozen=True)
class Resolved:
    """Specs and effective factors for one scenario."""

    scenario: Scenario
    gpu: GpuSpec
    model: ModelSpec
    params: ParamCounts
    bandwidth_efficiency: float
    compute_efficiency: float
    step_overhead_s: float
    layer_overhead_s: float
    collective_latency_s: float | None
    usd_per_gpu_hour: float
    origins: dict[str, Origin]

    @property
    def gpus_per_replica(self) -> int:
        """TP × PP: EP lays the experts over those GPUs, never adds any."""
        return self.scenario.parallel.gpus

    def step_kwargs(
        self, *, tp: ArrayLike | None = None, pp: ArrayLike | None = None, ep: ArrayLike | None = None,
        dp_attention: ArrayLike | None = None,
    ) -> StepKwargs:
        """The keyword arguments every step-time call shares; ``tp``/``pp``/``ep``/``dp_attention``
        replace the scenario's layout (arrays of candidate layouts in the sweep)."""
        s = self.scenario
        return StepKwargs(
            model=self.model,
            gpu=self.gpu,
            weights_dtype=s.weights_dtype,
            kv_dtype=s.kv_dtype,
            tp=s.parallel.tp if tp is None else tp,
            pp=s.parallel.pp if pp is None else pp,
            ep=s.parallel.ep if ep is None else ep,
            dp_attention=s.parallel.dp_attention if dp_attention is None else dp_attention,
            redundant_experts=s.parallel.redundant_experts,
            bandwidth_efficiency=self.bandwidth_efficiency,
            compute_efficiency=self.compute_efficiency,
            step_overhead_s=self.step_overhead_s,
            layer_overhead_s=self.layer_overhead_s,
            collective_latency_s=self.collective_latency_s,
        )


def moe_step_overhead_share(model: ModelSpec, share: float | None = None) -> float:
    """The share of the fitted per-iteration overhead (``step_overhead_s``) a model's
    iteration pays where the scenario states none: 1 for a dense model; for a MoE model the
    fitted term ``moe_step_overhead_share`` (``share`` where given: a fit trying values).

        t_overhead = step_overhead_s × s_moe

    The dense rows that fix ``step_overhead_s`` come from older builds; the MoE rows come from
    the 2025-26 builds DeepSeek-class models are served with (SGLang 0.5, TensorRT-LLM 1.x,
    ATOM), whose scheduler prepares the next iteration while the GPU runs this one and whose
    CUDA graphs cover the decode step: fitted on them, the per-iteration cost all but leaves
    the step and reappears per MoE layer (``moe_layer_overhead_s``, README "How accurate is
    it on MoE?").  A scenario that states ``efficiency.step_overhead_s`` (a probe calibration)
    states the whole overhead: no share is applied to it."""
    if not model.is_moe:
        return 1.0
    if share is not None:
        return share
    return term("moe_step_overhead_share")


def kv_transfer_setup_s(scenario: Scenario) -> float:
    """The fixed time a disaggregated request's hand-off from its prefill worker to its decode
    worker takes beyond the KV bytes' own transfer: ``fleet.kv_transfer_setup_s`` where the
    scenario states it, else the fitted term ``disagg_handoff_s``.

    It stands for the round trips a disaggregated stack makes around the transfer (the decode
    worker reserving KV blocks and handing its address to the prefill worker before the prompt
    runs, the transfer's completion polled by the decode worker's scheduler, the request joining
    its batch, the router's extra hop) that no step time carries.  Fitted on the TTFT of the
    disaggregated InferenceX runs (Dynamo + SGLang, Dynamo + TensorRT-LLM, SGLang + MoRI on five
    GPU types): at one to four clients they measure 100-200 ms above a lone prompt's prefill
    (README "How accurate is it on MoE?")."""
    v = scenario.fleet.kv_transfer_setup_s
    return float(v) if v is not None else term("disagg_handoff_s")


def resolve(scenario: Scenario) -> Resolved:
    """Resolve catalog ids and fill empty efficiency fields with defaults."""
    eff = scenario.efficiency
    given: Origin = "calibrated" if eff.calibrated_from else "input"
    origins: dict[str, Origin] = {}

    def pick(name: str, value: float | None, default: float) -> float:
        origins[name] = given if value is not None else DEFAULT_EFFICIENCY_ORIGIN
        return default if value is None else value

    bw = pick("efficiency.bandwidth", eff.bandwidth, DEFAULT_BANDWIDTH_EFFICIENCY)
    comp = pick("efficiency.compute", eff.compute, DEFAULT_COMPUTE_EFFICIENCY)
    ovh = pick("efficiency.step_overhead_s", eff.step_overhead_s, DEFAULT_STEP_OVERHEAD_S)
    # A scenario that states its step overhead (a probe calibration, an older
    # saved scenario) states the whole overhead: no per-layer default on top.
    lovh = pick("efficiency.layer_overhead_s", eff.layer_overhead_s,
                0.0 if eff.step_overhead_s is not None else DEFAULT_LAYER_OVERHEAD_S)
    if eff.layer_overhead_s is None and eff.step_overhead_s is not None:
        origins["efficiency.layer_overhead_s"] = given
    origins["efficiency.collective_latency_s"] = given if eff.collective_latency_s is not None else "default"
    origins["efficiency"] = given if eff.calibrated_from else DEFAULT_EFFICIENCY_ORIGIN
    gpu = resolve_gpu(scenario)
    model = resolve_model(scenario)
    if eff.step_overhead_s is None:
        ovh *= moe_step_overhead_share(model)
    price = scenario.cost.usd_per_gpu_hour
    origins["cost.usd_per_gpu_hour"] = "input" if price is not None else "default"
    origins["fleet.kv_transfer_setup_s"] = "input" if scenario.fleet.kv_transfer_setup_s is not None else "calibrated"
    origins["gpu"] = "input" if isinstance(scenario.gpu, GpuSpec) else "datasheet"
    return Resolved(
        scenario=scenario,
        gpu=gpu,
        model=model,
        params=param_counts(model),
        bandwidth_efficiency=bw,
        compute_efficiency=comp,
        step_overhead_s=ovh,
        layer_overhead_s=lovh,
        collective_latency_s=eff.collective_latency_s,
        usd_per_gpu_hour=price if price is not None else gpu.usd_per_gpu_hour,
        origins=origins,
    )
