"""The catalog entries a saved scenario used, frozen beside its inputs.

Reopening a scenario after the catalog changed can reproduce the plan it was
saved with (:func:`frozen_scenario`), and :func:`catalog_drift` says what
changed so the app can offer to re-plan on the current catalog.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.errors import ScenarioError, validation_message
from planner.spec.scenario import Scenario, resolve_gpu, resolve_model, scenario_from_dict
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = ["FrozenCatalog", "catalog_drift", "freeze_catalog", "frozen_from_json", "frozen_scenario"]


class FrozenCatalog(BaseModel):
    """GPU and model specs and the GPU-hour price a scenario was planned with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: GpuSpec
    model: ModelSpec
    usd_per_gpu_hour: float = Field(gt=0, allow_inf_nan=False)


def freeze_catalog(scenario: Scenario) -> FrozenCatalog:
    """The entries ``scenario`` resolves to now (inline specs are frozen as given)."""
    gpu = resolve_gpu(scenario)
    price = scenario.cost.usd_per_gpu_hour
    return FrozenCatalog(
        gpu=gpu, model=resolve_model(scenario), usd_per_gpu_hour=price if price is not None else gpu.usd_per_gpu_hour
    )


def frozen_from_json(data: dict[str, Any] | None) -> FrozenCatalog | None:
    """Validate a stored ``frozen_catalog`` (None: saved before freezing existed)."""
    if data is None:
        return None
    try:
        return FrozenCatalog.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(validation_message(exc, prefix="frozen_catalog")) from None


def _diff(prefix: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [
        f"{prefix}.{key}: {old.get(key)!r} -> {new.get(key)!r}"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]


def catalog_drift(*, scenario: Scenario, frozen: FrozenCatalog | None) -> tuple[str, ...]:
    """What differs between the frozen entries and what ``scenario`` resolves to
    today, one ``field: old -> new`` line each (empty: nothing changed).  A
    scenario whose GPU or model id left the catalog reports that."""
    if frozen is None:
        return ()
    try:
        now = freeze_catalog(scenario)
    except Exception as exc:  # an id removed from the catalog
        return (f"catalog: {exc}",)
    lines = _diff("gpu", frozen.gpu.model_dump(mode="json"), now.gpu.model_dump(mode="json"))
    lines += _diff("model", frozen.model.model_dump(mode="json"), now.model.model_dump(mode="json"))
    if frozen.usd_per_gpu_hour != now.usd_per_gpu_hour:
        lines.append(f"usd_per_gpu_hour: {frozen.usd_per_gpu_hour!r} -> {now.usd_per_gpu_hour!r}")
    return tuple(lines)


def frozen_scenario(*, payload: dict[str, Any], frozen: FrozenCatalog) -> Scenario:
    """The scenario with its frozen specs and price inline: plans exactly as saved,
    whatever the catalog says today."""
    data = dict(payload)
    data["gpu"] = frozen.gpu.model_dump(mode="json")
    data["model"] = frozen.model.model_dump(mode="json")
    pool_gpus = any(isinstance(data.get(role), dict) and data[role].get("gpu") is not None
                    for role in ("prefill", "decode"))
    if not pool_gpus:  # pools on their own GPUs keep each GPU's own price (planner.sizing.pools)
        data["cost"] = {**dict(data.get("cost") or {}), "usd_per_gpu_hour": frozen.usd_per_gpu_hour}
    return scenario_from_dict(data)
