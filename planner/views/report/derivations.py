"""The review report's derivations section: each derivation of the plan (and of its
fleet) under its group (``DERIVATION_GROUPS``) and a label a reader can take in
(``DERIVATION_LABELS``), with its formula, the values substituted, the result and
its origin, every value already text (``numbers``).  No Streamlit, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.sizing.plan import Plan
from planner.spec.derivation import Derivation
from planner.spec.scenario import Scenario
from planner.views.report.numbers import count, is_number, missing, quantity, readable_text
from planner.views.review import fleet_derivations

__all__ = [
    "DERIVATION_GROUPS",
    "DerivationRow",
]

DERIVATION_LABELS: dict[str, str] = {
    "roofline.ridge_flop_per_byte": "Ridge point",
    "roofline.decode_intensity_flop_per_byte": "Decode arithmetic intensity",
    "roofline.prefill_intensity_flop_per_byte": "Prefill arithmetic intensity",
    "memory.weight_bytes": "Weights, whole model",
    "memory.weight_bytes_per_gpu": "Weights per GPU",
    "memory.kv_bytes_per_token": "KV cache per token",
    "memory.kv_bytes_per_sequence": "KV cache per sequence",
    "memory.kv_budget_bytes": "KV budget per GPU",
    "memory.max_sequences": "Sequences the KV budget holds",
    "decode.step_s": "Decode step at the batch",
    "decode.tok_s_per_sequence": "Tokens/s per sequence",
    "decode.tok_s_per_replica": "Tokens/s per replica",
    "decode.mbu": "Decode memory-bandwidth utilization (MBU)",
    "decode.mfu": "Decode model-FLOPs utilization (MFU)",
    "prefill.time_s": "Prefill time of one prompt",
    "prefill.mfu": "Prefill MFU",
    "prefill.chunked_ttft_s": "Chunked-prefill TTFT, no queueing",
    "ttft_s": "Mean TTFT of the plan",
    "operating_point.goodput_req_s_per_replica": "Goodput per (decode) replica",
    "operating_point.ttft_s": "Mean TTFT, queueing included",
    "fleet.gpus_total": "GPUs total",
    "fleet.pool_ratio": "Prefill : decode replicas",
    "fleet.kv_transfer_s": "KV transfer per request",
    "fleet.cold_start_s": "Cold start of a replica",
    "cost.usd_per_hour": "$ per hour",
    "cost.usd_per_mtok_output": "$ per million output tokens",
    "cost.usd_per_mtok_input": "$ per million input tokens",
    "cost.usd_per_mtok_blended": "$ per million tokens, blended",
    "cost.usd_per_1k_requests": "$ per 1,000 requests",
    "cost.usd_per_mtok_output_full_load": "$ per million output tokens at full load",
}
DERIVATION_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Memory", ("memory",)),
    ("Decode", ("decode",)),
    ("Prefill and TTFT", ("prefill", "ttft_s", "operating_point")),
    ("Fleet and cost", ("fleet", "cost")),
    ("Roofline", ("roofline",)),
)


@dataclass(frozen=True)
class DerivationRow:
    group: str
    label: str
    formula: str
    substituted: str
    value: str
    origin: str


def _derivation_value(dv: Derivation) -> str:
    if not is_number(dv.value):
        return missing("not defined for this scenario")
    if dv.unit in ("GPUs", "sequences") and float(dv.value).is_integer():
        return f"{count(dv.value)} {dv.unit}"
    return quantity(dv.value, dv.unit)


def _derivations(s: Scenario, p: Plan) -> tuple[DerivationRow, ...]:
    merged = dict(p.derivations) | fleet_derivations(scenario=s, plan=p)
    out = []
    for group, prefixes in DERIVATION_GROUPS:
        for key, dv in merged.items():
            if key.split(".")[0] not in prefixes:
                continue
            finite = is_number(dv.value)
            out.append(DerivationRow(
                group=group, label=DERIVATION_LABELS.get(key, key.rsplit(".", 1)[-1].replace("_", " ")),
                formula=readable_text(dv.formula),
                substituted=readable_text(dv.substituted) if finite else missing("not defined for this scenario"),
                value=_derivation_value(dv), origin=dv.origin))
    return tuple(out)
