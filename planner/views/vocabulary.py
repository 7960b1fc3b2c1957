"""One vocabulary for every number the pages show.

* A latency always says which statistic it is (mean, p50, p90, p99) and whether
  queueing is included: :func:`latency_label` → ``"TTFT p90 · queueing included"``.
* An SLO target is shown beside the value it is checked on, with pass or fail:
  :class:`SloCheck` and :func:`plan_slo_checks` (the operating point's p90 TTFT with
  M/G/c queueing at the fleet's load, and the per-request TPOT at
  ``slo.itl_percentile``); the verdict is :func:`plan_attainment`, the share of
  requests meeting both targets against ``slo.attainment``, the criterion the plan is
  feasible by and the simulator scores (``planner.sizing.attainment``).
* The Plan page leads with the answer: :func:`plan_headline` (GPUs, replicas per
  pool, $/Mtok, the SLO check), "—" with the reason where a number does not exist.
* Internal keys never reach a reader: :func:`label_for` turns ``memory.kv_budget_bytes``
  into ``KV budget per GPU``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from planner.sizing.plan import Plan
from planner.spec.catalog import load_catalog
from planner.spec.scenario import Scenario
from planner.spec.specs import GpuSpec

__all__ = [
    "FIELD_LABELS",
    "Attainment",
    "Headline",
    "SloCheck",
    "Stat",
    "blended_note",
    "label_for",
    "latency_label",
    "plan_attainment",
    "plan_headline",
    "plan_slo_checks",
    "pools_text",
    "price_source",
]

Stat = Literal["mean", "p50", "p90", "p99"]
# Operating-point reasons that mean no batch runs at all (planner.sizing.operating).
NO_BATCH_REASONS = frozenset({"does not fit", "KV budget below batch"})

# Human names of plan outputs and scenario inputs (dotted keys).  A key that is not
# here is made readable by ``label_for`` (section dropped, unit suffix dropped, acronyms).
FIELD_LABELS: dict[str, str] = {
    "memory.weight_bytes": "Weights, whole model",
    "memory.weight_bytes_per_gpu": "Weights per GPU",
    "memory.kv_bytes_per_token": "KV cache per token",
    "memory.kv_bytes_per_token_per_gpu": "KV cache per token per GPU",
    "memory.kv_bytes_per_sequence": "KV cache per sequence",
    "memory.kv_budget_bytes": "KV budget per GPU",
    "memory.max_sequences": "Max sequences in the KV budget",
    "roofline.ridge_flop_per_byte": "Ridge point",
    "roofline.decode_intensity_flop_per_byte": "Decode arithmetic intensity",
    "roofline.prefill_intensity_flop_per_byte": "Prefill arithmetic intensity",
    "decode.step_s": "Decode step at the batch (no prefill chunks, no queueing)",
    "decode.itl_s": "Decode ITL at the batch (no prefill chunks, no queueing)",
    "operating_point.itl_s": "ITL mean (prefill chunk stalls included, = mean TPOT)",
    "operating_point.itl_percentile_s": "TPOT per request at slo.itl_percentile",
    "operating_point.itl_gap_p99_s": "Token-gap p99 (the chunk stall)",
    "operating_point.slo_attainment": "Requests meeting both targets (analytic)",
    "operating_point.ttft_p99_s": "TTFT p99, queueing included",
    "decode.tok_s_per_sequence": "Tokens/s per sequence",
    "decode.tok_s_per_replica": "Tokens/s per replica",
    "decode.mbu": "Memory-bandwidth utilization (MBU)",
    "decode.mfu": "Decode compute utilization (MFU)",
    "prefill.time_s": "Prefill time (one prompt, no queueing)",
    "prefill.mfu": "Prefill compute utilization (MFU)",
    "prefill.chunked_ttft_s": "Chunked prefill TTFT (no queueing)",
    "ttft_s": "TTFT mean",
    "operating_point.goodput_req_s_per_replica": "Goodput per replica",
    "operating_point.ttft_s": "TTFT mean, queueing included",
    "fleet.gpus_total": "GPUs total",
    "fleet.pool_ratio": "Prefill : decode replicas",
    "fleet.kv_transfer_s": "KV transfer per request",
    "fleet.cold_start_s": "Cold start (weight load)",
    "cost.usd_per_hour": "$/hour",
    "cost.usd_per_mtok_output": "$/Mtok output",
    "cost.usd_per_mtok_input": "$/Mtok input",
    "cost.usd_per_mtok_blended": "$/Mtok blended",
    "cost.usd_per_mtok_output_full_load": "$/Mtok output at full load",
    "cost.usd_per_1k_requests": "$/1k requests",
    # Scenario inputs (revision diffs, comparisons).
    "gpu": "GPU", "model": "Model", "weights_dtype": "Weights precision", "kv_dtype": "KV cache precision",
    "name": "Name", "parallel.tp": "Tensor parallel (TP)", "parallel.pp": "Pipeline parallel (PP)",
    "parallel.ep": "Expert parallel (EP)", "parallel.dp_attention": "Data-parallel attention (DP attention)",
    "parallel.redundant_experts": "Redundant experts (EPLB)", "workload.prompt_tokens": "Prompt tokens (mean)",
    "workload.output_tokens": "Output tokens (mean)", "workload.requests_per_s": "Requests/s (mean)",
    "workload.peak_requests_per_s": "Peak requests/s", "workload.prefix_tokens": "Shared prefix tokens",
    "workload.prefix_hit_rate": "Prefix hit rate", "workload.distribution": "Length distribution",
    "workload.prompt_sigma": "Prompt length σ", "workload.output_sigma": "Output length σ",
    "workload.trace": "Trace rows", "slo.ttft_s": "TTFT target", "slo.itl_s": "ITL target (per-request TPOT)",
    "slo.itl_percentile": "TPOT percentile shown", "slo.attainment": "Share of requests meeting both targets",
    "slo.itl_gap_p99_s": "Token-gap p99 target",
    "serving.mode": "Serving mode", "serving.batch_size": "Batch", "serving.context_tokens": "Context tokens",
    "serving.chunk_tokens": "Prefill chunk tokens", "serving.block_tokens": "KV block tokens",
    "serving.reserved_bytes": "Reserved memory", "serving.memory_utilization": "Memory utilization",
    "serving.engine": "Engine (memory accounting)",
    "speculative.draft_tokens": "Speculative draft tokens", "speculative.acceptance": "Speculative acceptance",
    "speculative.draft_cost": "Draft step cost", "speculative.draft_model": "Draft model",
    "speculative.draft_layers": "Draft head layers", "speculative.draft_weights_dtype": "Draft weights precision",
    "memory.draft_weight_bytes_per_gpu": "Draft weights per GPU",
    "memory.draft_kv_bytes_per_token_per_gpu": "Draft KV cache per token per GPU",
    "memory.cache_bytes_per_token_per_gpu": "KV cache per token per GPU, target + draft",
    "fleet.target_utilization": "Target utilization",
    "fleet.min_replicas": "Minimum replicas", "fleet.link": "KV link", "fleet.link_bytes_per_s": "KV link bandwidth",
    "fleet.kv_transfer_setup_s": "KV transfer setup", "fleet.load_bytes_per_s": "Weight load bandwidth per GPU",
    "cost.usd_per_gpu_hour": "$/GPU-hour", "cost.usd_per_kwh": "$/kWh", "cost.pue": "PUE",
}

_ACRONYMS = {"kv": "KV", "ttft": "TTFT", "itl": "ITL", "mbu": "MBU", "mfu": "MFU", "gpu": "GPU", "gpus": "GPUs",
             "tp": "TP", "pp": "PP", "ep": "EP", "slo": "SLO", "e2e": "E2E", "tpot": "TPOT", "hbm": "HBM",
             "usd": "$", "mtok": "Mtok", "req": "req", "tok": "tok"}
_UNIT_SUFFIXES = ("_bytes_per_s", "_flops_per_s", "_flop_per_byte", "_bytes", "_s")


def label_for(key: str) -> str:
    """A reader's name for a dotted key: the table above, else the last part made
    readable (``decode.compute_s`` → ``Compute``, ``fleet.kv_transfer_s`` → ``KV transfer``)."""
    if key in FIELD_LABELS:
        return FIELD_LABELS[key]
    last = key.rsplit(".", 1)[-1]
    for suffix in _UNIT_SUFFIXES:
        if last.endswith(suffix) and len(last) > len(suffix):
            last = last[: -len(suffix)]
            break
    words = [_ACRONYMS.get(w, w) for w in last.split("_") if w]
    text = " ".join(words)
    return text[:1].upper() + text[1:] if text else key


def latency_label(metric: str, stat: Stat | str, *, queueing: bool) -> str:
    """``"TTFT p90 · queueing included"``, ``"ITL mean · no queueing"``."""
    return f"{metric} {stat} · {'queueing included' if queueing else 'no queueing'}"


@dataclass(frozen=True)
class SloCheck:
    """One SLO target beside the value it is checked on."""

    metric: str  # "TTFT" or "ITL"
    stat: Stat | str  # "p95" for an ITL percentile outside Stat
    queueing: bool
    value_s: float  # NaN when the number does not exist
    target_s: float
    basis: str  # where the value comes from, in words
    why_missing: str = ""  # why there is no value (NaN), e.g. "the model does not fit"

    @property
    def label(self) -> str:
        return latency_label(self.metric, self.stat, queueing=self.queueing)

    @property
    def passed(self) -> bool | None:
        """True/False, or None when there is no value to check."""
        if not math.isfinite(self.value_s):
            return None
        return self.value_s <= self.target_s


def plan_slo_checks(plan: Plan, scenario: Scenario) -> tuple[SloCheck, SloCheck]:
    """The two latencies the SLO's targets apply to, at the operating point: p90 TTFT
    with M/G/c queueing over the fleet's prefill servers at the peak rate (KV transfer
    included when disaggregated), and the per-request TPOT (a request's mean
    inter-token time) at ``slo.itl_percentile`` at the operating batch (prefill chunk
    stalls averaged over its output when colocated).  The verdict is
    :func:`plan_attainment`: the share of requests meeting both."""
    op = plan.operating_point
    transfer = " + KV transfer" if op.mode == "disaggregated" else ""
    # A layout whose KV budget holds no batch has no latency to check against the targets.
    unfit = not op.feasible and op.reason in NO_BATCH_REASONS
    why = f"no batch: {op.reason}" if unfit else ""
    ttft = SloCheck(metric="TTFT", stat="p90", queueing=True, value_s=math.nan if unfit else op.ttft_p90_s,
                    target_s=scenario.slo.ttft_s, why_missing=why,
                    basis=f"analytic: M/G/c queue over the fleet's prefill servers at the peak rate + prefill{transfer}")
    chunks = ", prefill chunk stalls averaged over its output" if op.mode == "colocated" else ""
    itl = SloCheck(metric="TPOT", stat=f"p{scenario.slo.itl_percentile * 100:g}", queueing=False,
                   value_s=math.nan if unfit else op.itl_percentile_s, target_s=scenario.slo.itl_s, why_missing=why,
                   basis=f"analytic: per-request mean inter-token time at batch {op.batch_size}{chunks}")
    return ttft, itl


@dataclass(frozen=True)
class Attainment:
    """The SLO's verdict: the share of requests meeting both targets against ``slo.attainment``."""

    value: float  # analytic (NaN: no operating point)
    target: float
    ttft_share: float
    tpot_share: float
    gap_p99_s: float  # p99 of all token gaps (the stall), shown beside it
    gap_target_s: float | None

    @property
    def passed(self) -> bool | None:
        if not math.isfinite(self.value):
            return None
        gap_ok = self.gap_target_s is None or self.gap_p99_s <= self.gap_target_s
        return self.value + 1e-12 >= self.target and gap_ok

    def sentence(self) -> str:
        if not math.isfinite(self.value):
            return f"Requests meeting both targets: — (no operating point) · target ≥ {self.target:.0%}"
        sign = "≥" if self.value + 1e-12 >= self.target else "<"
        return (f"Requests meeting both targets (analytic): {self.value:.1%} {sign} {self.target:.0%} target "
                f"(TTFT within target for {self.ttft_share:.1%}, TPOT for {self.tpot_share:.1%})")


def plan_attainment(plan: Plan, scenario: Scenario) -> Attainment:
    """The plan's share of requests meeting both targets at its operating point."""
    op = plan.operating_point
    unfit = not op.feasible and op.reason in NO_BATCH_REASONS
    return Attainment(value=math.nan if unfit else op.slo_attainment, target=scenario.slo.attainment,
                      ttft_share=op.ttft_attainment, tpot_share=op.tpot_attainment, gap_p99_s=op.itl_gap_p99_s,
                      gap_target_s=scenario.slo.itl_gap_p99_s)


def pools_text(plan: Plan) -> str:
    """Replicas per pool: ``"22 replicas"`` or ``"12 prefill + 4 decode"``; "—" when none."""
    f = plan.fleet
    if f.mode == "disaggregated":
        if math.isfinite(f.prefill_replicas) and math.isfinite(f.decode_replicas):
            return f"{f.prefill_replicas:,.0f} prefill + {f.decode_replicas:,.0f} decode"
        return "—"
    return f"{f.replicas:,.0f} replicas" if math.isfinite(f.replicas) else "—"


@dataclass(frozen=True)
class Headline:
    """The answer a reviewer asks for first."""

    feasible: bool
    reason: str  # why there is no fleet ("" when feasible)
    mode: str
    gpus_total: float
    gpus_per_replica: int
    pools: str
    usd_per_mtok_output: float
    usd_per_mtok_blended: float
    usd_per_hour: float
    checks: tuple[SloCheck, SloCheck]
    attainment: Attainment | None = None

    @property
    def slo_met(self) -> bool:
        """The plan's verdict: the share of requests meeting both targets (and KV fit, prefill keeping up)."""
        return self.feasible and (self.attainment is None or bool(self.attainment.passed))


def plan_headline(plan: Plan, scenario: Scenario) -> Headline:
    """GPUs, replicas per pool, $/Mtok and the SLO check for one plan."""
    op, f, c = plan.operating_point, plan.fleet, plan.cost
    return Headline(
        feasible=op.feasible, reason="" if op.feasible else f"no operating point meets the SLO: {op.reason}",
        mode=f.mode, gpus_total=f.gpus_total, gpus_per_replica=f.gpus_per_replica, pools=pools_text(plan),
        usd_per_mtok_output=c.usd_per_mtok_output, usd_per_mtok_blended=c.usd_per_mtok_blended,
        usd_per_hour=c.usd_per_hour, checks=plan_slo_checks(plan, scenario),
        attainment=plan_attainment(plan, scenario),
    )


def blended_note(plan: Plan) -> str:
    """Why blended $/Mtok can sit below input $/Mtok (it divides by input + output tokens)."""
    c = plan.cost
    if not (math.isfinite(c.usd_per_mtok_blended) and math.isfinite(c.usd_per_mtok_input)):
        return ""
    return ("Blended $/Mtok divides the fleet's cost by input and output tokens together, so it is below both "
            "the input and the output figure (each of which charges the whole fleet to one kind of token).")


def price_source(*, gpu: str | GpuSpec, usd_per_gpu_hour: float | None) -> str:
    """Where the $/GPU-hour comes from: the input, or the catalog's default with its quotes."""
    if usd_per_gpu_hour is not None:
        return f"${usd_per_gpu_hour:,.2f}/GPU-hour: your input"
    cat = load_catalog()
    spec = gpu if isinstance(gpu, GpuSpec) else cat.gpus.get(gpu)
    if spec is None:
        return "catalog default"
    quotes = [q for q in cat.prices if q.gpu == spec.id]
    seen = "; ".join(f"{q.provider} ${q.usd_per_gpu_hour:,.2f} ({q.pricing_type.replace('_', '-')}, {q.as_of})"
                     for q in quotes[:4])
    return (f"catalog default ${spec.usd_per_gpu_hour:,.2f}/GPU-hour for {spec.id}"
            + (f", chosen from quotes: {seen} (catalog/prices.yaml)" if seen else " (catalog/gpus.yaml)"))
