"""What changed between two saved revisions of a scenario, field by field, in the
words and units a reviewer reads (``Requests/s (mean): 50 req/s → 60 req/s``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.io.export import flatten
from planner.io.formatting import human
from planner.views.vocabulary import label_for

__all__ = ["FIELD_UNITS", "FieldChange", "field_text", "revision_changes"]

# Scenario fields whose value has a unit ("human" names: s, bytes, bytes/s, fraction, USD, or a suffix).
FIELD_UNITS: dict[str, str] = {
    "workload.requests_per_s": "req/s", "workload.peak_requests_per_s": "req/s", "slo.ttft_s": "s", "slo.itl_s": "s",
    "serving.reserved_bytes": "bytes", "serving.memory_utilization": "fraction",
    "workload.prefix_hit_rate": "fraction", "fleet.target_utilization": "fraction", "speculative.acceptance": "fraction",
    "fleet.link_bytes_per_s": "bytes/s", "fleet.load_bytes_per_s": "bytes/s", "fleet.kv_transfer_setup_s": "s",
    "cost.usd_per_gpu_hour": "USD", "cost.usd_per_kwh": "USD", "workload.prompt_tokens": "tokens",
    "workload.output_tokens": "tokens", "workload.prefix_tokens": "tokens", "serving.context_tokens": "tokens",
    "serving.chunk_tokens": "tokens", "serving.block_tokens": "tokens", "speculative.draft_tokens": "tokens",
    "efficiency.step_overhead_s": "s", "efficiency.layer_overhead_s": "s", "efficiency.collective_latency_s": "s",
    "efficiency.bandwidth": "fraction", "efficiency.compute": "fraction",
}
_EMPTY = {"serving.batch_size": "largest that fits", "serving.context_tokens": "prompt + output",
          "cost.usd_per_gpu_hour": "catalog price", "workload.peak_requests_per_s": "the mean",
          "serving.memory_utilization": "HBM − weights − reserved", "fleet.link_bytes_per_s": "the link's default"}


def field_text(key: str, value: Any) -> str:
    """One scenario field's value as a reviewer reads it."""
    if value is None:
        return _EMPTY.get(key, "default")
    if key == "workload.trace":
        return f"{value.count('[') - 1:,} rows" if isinstance(value, str) else "rows"
    if isinstance(value, dict):  # an inline GPU or model spec
        return f"inline {value.get('id', 'spec')}"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "none"
    unit = FIELD_UNITS.get(key, "")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return human(value, unit)


@dataclass(frozen=True)
class FieldChange:
    key: str  # dotted field ("workload.requests_per_s", "name", "tags")
    label: str
    old: str
    new: str


def _flat(rev: Mapping[str, Any]) -> dict[str, Any]:
    payload = dict(rev.get("payload") or {})
    for key in ("gpu", "model"):
        if isinstance(payload.get(key), dict):
            payload[key] = f"inline:{payload[key].get('id', 'spec')}"
    payload.pop("name", None)  # the revision's own name below is the one shown
    out = flatten(payload)
    out["name"] = rev.get("name")
    out["description"] = rev.get("description")
    out["tags"] = list(rev.get("tags") or ())
    return out


def revision_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """The fields that differ between two revisions ({name, description, tags,
    payload} mappings, e.g. ``Revision.model_dump()``), in the order the scenario lists them."""
    a, b = _flat(old), _flat(new)
    out = []
    for key in dict.fromkeys([*b, *a]):
        va, vb = a.get(key), b.get(key)
        if va != vb:
            label = {"description": "Description", "tags": "Tags"}.get(key) or label_for(key)
            out.append(FieldChange(key=key, label=label, old=field_text(key, va), new=field_text(key, vb)))
    return out
