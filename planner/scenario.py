"""The Scenario: the one input schema for UI, store, share links, CLI and export.

Fields are addressed by dotted keys (``parallel.tp``, ``workload.prompt_tokens``)
in ``--set KEY=VALUE`` overrides and in error messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.catalog import get_gpu, get_model
from planner.errors import PlannerError, ScenarioError
from planner.precision import KvDtype, WeightsDtype
from planner.specs import GpuSpec, ModelSpec

__all__ = [
    "SCHEMA_VERSION",
    "Cost",
    "Efficiency",
    "Parallel",
    "Scenario",
    "Serving",
    "Slo",
    "Speculative",
    "Workload",
    "apply_overrides",
    "load_scenario_file",
    "resolve_gpu",
    "resolve_model",
    "scenario_from_dict",
    "validation_message",
]

SCHEMA_VERSION = 1

PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
PosFraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Parallel(BaseModel):
    """Layout of one replica: TP × PP × EP GPUs."""

    model_config = _FROZEN
    tp: Annotated[int, Field(ge=1, le=64)] = 1
    pp: Annotated[int, Field(ge=1, le=64)] = 1
    ep: Annotated[int, Field(ge=1, le=256)] = 1


class Workload(BaseModel):
    """What the users send."""

    model_config = _FROZEN
    prompt_tokens: Annotated[int, Field(ge=1, le=10_000_000)] = 2000
    output_tokens: Annotated[int, Field(ge=1, le=10_000_000)] = 250
    requests_per_s: PosFloat = 10.0
    prefix_tokens: NonNegInt = 0
    prefix_hit_rate: Fraction = 0.0

    @model_validator(mode="after")
    def _prefix(self) -> Workload:
        if self.prefix_tokens > self.prompt_tokens:
            raise ValueError("prefix_tokens cannot exceed prompt_tokens")
        return self


class Slo(BaseModel):
    """Latency targets."""

    model_config = _FROZEN
    ttft_s: PosFloat = 1.0
    itl_s: PosFloat = 0.05


class Serving(BaseModel):
    """Engine settings."""

    model_config = _FROZEN
    mode: Literal["colocated", "disaggregated"] = "colocated"
    batch_size: Annotated[int, Field(ge=1, le=65536)] | None = None
    context_tokens: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    chunk_tokens: Annotated[int, Field(ge=16, le=1_000_000)] = 512
    block_tokens: Annotated[int, Field(ge=1, le=4096)] = 16
    reserved_bytes: NonNegFloat = 4.0e9
    memory_utilization: PosFraction | None = 0.9


class Speculative(BaseModel):
    """Speculative decoding (draft_tokens = 0: off)."""

    model_config = _FROZEN
    draft_tokens: Annotated[int, Field(ge=0, le=16)] = 0
    acceptance: Fraction = 0.7
    draft_cost: NonNegFloat = 0.05


class Efficiency(BaseModel):
    """Sustained fractions of the datasheet peaks and fixed costs (None: default)."""

    model_config = _FROZEN
    bandwidth: PosFraction | None = None
    compute: PosFraction | None = None
    step_overhead_s: NonNegFloat | None = None
    collective_latency_s: NonNegFloat | None = None
    calibrated_from: str | None = None  # probe run these values were fitted on


class Cost(BaseModel):
    """Prices (None: the catalog default)."""

    model_config = _FROZEN
    usd_per_gpu_hour: PosFloat | None = None


class Scenario(BaseModel):
    """Everything a plan depends on."""

    model_config = _FROZEN
    schema_version: Literal[1] = 1
    name: Annotated[str, Field(max_length=200)] = "untitled"
    gpu: str | GpuSpec = "h100-sxm"
    model: str | ModelSpec = "llama-3.1-8b"
    weights_dtype: WeightsDtype = "bf16"
    kv_dtype: KvDtype = "bf16"
    parallel: Parallel = Parallel()
    workload: Workload = Workload()
    slo: Slo = Slo()
    serving: Serving = Serving()
    speculative: Speculative = Speculative()
    efficiency: Efficiency = Efficiency()
    cost: Cost = Cost()

    @field_validator("model", mode="before")
    @classmethod
    def _model_from_path(cls, value: Any) -> Any:
        if isinstance(value, str) and (value.endswith(".json") or "/" in value):
            from planner.hf_import import load_hf_config

            try:
                return ModelSpec.from_hf_config(load_hf_config(value))
            except PlannerError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("gpu", "model", mode="after")
    @classmethod
    def _known_id(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str):
            try:
                (get_gpu if info.field_name == "gpu" else get_model)(value)
            except PlannerError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _cross(self) -> Scenario:
        gpu = resolve_gpu(self)
        model = resolve_model(self)
        tp, ep = self.parallel.tp, self.parallel.ep
        if tp > gpu.gpus_per_node:
            raise ValueError(
                f"parallel.tp ({tp}) exceeds the {gpu.gpus_per_node} GPUs in a {gpu.id} node; "
                "use parallel.pp across nodes"
            )
        if model.heads % tp:
            raise ValueError(f"parallel.tp ({tp}) must divide the model's {model.heads} attention heads")
        if ep > 1 and not model.is_moe:
            raise ValueError(f"parallel.ep ({ep}) needs a mixture-of-experts model; {model.id} is dense")
        if model.is_moe and model.experts % ep:
            raise ValueError(f"parallel.ep ({ep}) must divide the model's {model.experts} experts")
        if self.parallel.pp > model.layers:
            raise ValueError(f"parallel.pp ({self.parallel.pp}) exceeds the model's {model.layers} layers")
        return self


def resolve_gpu(scenario: Scenario) -> GpuSpec:
    """The GpuSpec a scenario names (catalog id) or carries inline."""
    return scenario.gpu if isinstance(scenario.gpu, GpuSpec) else get_gpu(scenario.gpu)


def resolve_model(scenario: Scenario) -> ModelSpec:
    """The ModelSpec a scenario names (catalog id) or carries inline."""
    return scenario.model if isinstance(scenario.model, ModelSpec) else get_model(scenario.model)


def validation_message(exc: ValidationError, *, prefix: str = "") -> str:
    """One line naming the dotted field: ``parallel.tp: must be >= 1``."""
    parts = []
    for err in exc.errors()[:3]:
        loc = [str(p) for p in err["loc"] if not str(p).startswith(("str", "function-"))]
        # Drop union-branch names pydantic inserts (GpuSpec, ModelSpec ...).
        loc = [p for p in loc if not p[:1].isupper()]
        key = ".".join(([prefix] if prefix else []) + loc)
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        if err["type"] == "literal_error" or err["type"] == "enum":
            msg = f"{msg}, got {err.get('input')!r}"
        parts.append(f"{key}: {msg}" if key else msg)
    return "; ".join(dict.fromkeys(parts))


def scenario_from_dict(data: dict[str, Any]) -> Scenario:
    """Validate a plain dict; errors become one ScenarioError naming the field."""
    if not isinstance(data, dict):
        raise ScenarioError("scenario: expected a JSON object")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(validation_message(exc)) from None


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


_FIELDS: dict[str, type[BaseModel]] = {
    "parallel": Parallel, "workload": Workload, "slo": Slo, "serving": Serving,
    "speculative": Speculative, "efficiency": Efficiency, "cost": Cost,
}


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``KEY=VALUE`` strings to a scenario dict (values parsed as JSON when
    they parse, else kept as strings; ``null`` clears a field)."""
    out = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ScenarioError(f"--set expects KEY=VALUE, got {item!r}")
        parts = key.split(".")
        if parts[0] not in Scenario.model_fields:
            raise ScenarioError(f"{key}: unknown key")
        if len(parts) > 1:
            sub = _FIELDS.get(parts[0])
            if sub is None or len(parts) != 2 or parts[1] not in sub.model_fields:
                raise ScenarioError(f"{key}: unknown key")
        value = _parse_value(raw)
        if parts[0] in {"name", "gpu", "model"} and not isinstance(value, dict):
            value = raw  # ids and names stay strings ("1" is a name, not a number)
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def load_scenario_file(path: str | Path) -> dict[str, Any]:
    """Read a scenario JSON file into a dict (validated later)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise ScenarioError(f"cannot read {p}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: expected a JSON object")
    return data
