"""The Scenario: the one input schema for UI, store, share links, CLI and export.

Fields are addressed by dotted keys (``parallel.tp``, ``workload.prompt_tokens``)
in ``--set KEY=VALUE`` overrides and in error messages.  The plain sections
(workload, slo, serving, efficiency, fleet, cost) live in planner.spec.sections,
the named bounds in planner.spec.bounds and the path-shaped ``model`` rule in
planner.spec.model_path; their names are re-exported here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from planner.errors import PlannerError, ScenarioError, validation_message
from planner.io.jsonfile import MAX_JSON_DEPTH, SURROGATE_MESSAGE, lone_surrogate_path, parse_json, read_json
from planner.spec.bounds import (
    MAX_ID_CHARS,
    MAX_LENGTH_SIGMA,
    MAX_LINK_BYTES_PER_S,
    MAX_SEQUENCE_TOKENS,
    MAX_TRACE_ROWS,
    MAX_USD_PER_GPU_HOUR,
    MAX_USD_PER_KWH,
    MAX_WARM_POOL_REPLICAS,
    MIN_LINK_BYTES_PER_S,
    MIN_SCALE_INTERVAL_S,
)
from planner.spec.catalog import get_gpu, get_model
from planner.spec.model_path import MODEL_PATH_MESSAGE, is_model_path, resolve_local_model_file
from planner.spec.parallel import MAX_EP, MAX_PP, MAX_TP, OLD_EP_MEANING, Parallel
from planner.spec.precision import KvDtype, WeightsDtype
from planner.spec.sections import (
    _FROZEN,
    CatalogId,
    Cost,
    Efficiency,
    Fleet,
    Fraction,
    NonNegFloat,
    Serving,
    Slo,
    Workload,
)
from planner.spec.specs import GpuSpec, ModelSpec

__all__ = [
    "MAX_EP",
    "MAX_ID_CHARS",
    "MAX_LENGTH_SIGMA",
    "MAX_LINK_BYTES_PER_S",
    "MAX_PP",
    "MAX_SEQUENCE_TOKENS",
    "MAX_TP",
    "MAX_TRACE_ROWS",
    "MAX_USD_PER_GPU_HOUR",
    "MAX_USD_PER_KWH",
    "MAX_WARM_POOL_REPLICAS",
    "MIN_LINK_BYTES_PER_S",
    "MIN_SCALE_INTERVAL_S",
    "MODEL_PATH_MESSAGE",
    "SCHEMA_VERSION",
    "Cost",
    "Efficiency",
    "Fleet",
    "POOL_ROLES",
    "Parallel",
    "Pool",
    "Scenario",
    "Serving",
    "Slo",
    "Speculative",
    "Workload",
    "apply_overrides",
    "is_model_path",
    "load_scenario_file",
    "resolve_local_model_file",
    "resolve_gpu",
    "resolve_model",
    "scenario_from_dict",
]

SCHEMA_VERSION = 1


class Pool(BaseModel):
    """One disaggregated pool's own GPU and layout (``prefill``, ``decode``); None: the
    scenario's ``gpu`` / ``parallel``.  Used only with ``serving.mode = "disaggregated"``
    (planner.sizing.pools); checked like the scenario's own layout (``Scenario._pools``)."""

    model_config = _FROZEN
    gpu: CatalogId | GpuSpec | None = None
    parallel: Parallel | None = None

    @field_validator("gpu", mode="after")
    @classmethod
    def _known_gpu(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                get_gpu(value)
            except PlannerError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def is_set(self) -> bool:
        return self.gpu is not None or self.parallel is not None


POOL_ROLES = ("prefill", "decode")


class Speculative(BaseModel):
    """Speculative decoding (draft_tokens = 0: off).

    ``method`` (planner.physics.speculative): ``draft_model`` (a separate catalog model),
    ``eagle`` (an EAGLE-3 head of ``draft_layers`` target-shaped layers) or ``mtp`` (the
    model's own multi-token-prediction module).  Left out: ``draft_model`` when a draft
    model is named, else ``eagle`` (what these fields meant before ``method`` existed)."""

    model_config = _FROZEN
    draft_tokens: Annotated[int, Field(ge=0, le=16)] = 0
    method: Literal["draft_model", "eagle", "mtp"] = "eagle"
    # P(draft token accepted | all before it were): one number for every position, or
    # a_1 … a_K (a shorter tuple repeats its last entry).  None: the method's sourced
    # default (MTP: DeepSeek-V3 report; EAGLE-3: its paper; draft model: 0.7, assumed).
    acceptance: Fraction | None = None
    acceptance_per_position: Annotated[tuple[Fraction, ...], Field(min_length=1, max_length=16)] | None = None
    # One draft step as a fixed fraction of a target step; None: the drafter's own
    # decode step from the step model (the draft model's, the head's or the MTP block's).
    draft_cost: NonNegFloat | None = None
    # What drafts, charged in the memory ledger (planner.physics.draft): a catalog
    # model id (method draft_model: its own weights and KV cache); for eagle an
    # EAGLE-style head of ``draft_layers`` decoder layers of the target's shape (it
    # shares the target's embedding and LM head).
    draft_model: CatalogId | None = None
    draft_layers: Annotated[int, Field(ge=1, le=8)] = 1
    draft_weights_dtype: WeightsDtype | None = None  # None: the target's weights_dtype

    @model_validator(mode="before")
    @classmethod
    def _default_method(cls, data: Any) -> Any:
        """No method given: draft_model when a draft model is named, else eagle."""
        if isinstance(data, dict) and data.get("method") is None:
            data = {**data, "method": "draft_model" if data.get("draft_model") is not None else "eagle"}
        return data

    @field_validator("draft_model", mode="after")
    @classmethod
    def _known_draft(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                get_model(value)
            except PlannerError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _method_fits(self) -> Speculative:
        if self.method == "draft_model" and self.draft_model is None:
            raise ValueError("speculative.method 'draft_model' needs speculative.draft_model (a catalog model id)")
        if self.method != "draft_model" and self.draft_model is not None:
            raise ValueError(f"speculative.method '{self.method}' drafts without a separate model: clear "
                             f"speculative.draft_model ({self.draft_model}) or set speculative.method to 'draft_model'")
        return self


class Scenario(BaseModel):
    """Everything a plan depends on."""

    model_config = _FROZEN
    schema_version: Literal[1] = 1
    name: Annotated[str, Field(max_length=200)] = "untitled"
    gpu: CatalogId | GpuSpec = "h100-sxm"
    model: CatalogId | ModelSpec = "llama-3.1-8b"
    weights_dtype: WeightsDtype = "bf16"
    kv_dtype: KvDtype = "bf16"
    parallel: Parallel = Parallel()
    workload: Workload = Workload()
    slo: Slo = Slo()
    serving: Serving = Serving()
    speculative: Speculative = Speculative()
    efficiency: Efficiency = Efficiency()
    fleet: Fleet = Fleet()
    cost: Cost = Cost()
    # Disaggregated pools with their own GPU and layout (planner.sizing.pools); None: the scenario's.
    prefill: Pool | None = None
    decode: Pool | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        # A lone surrogate (a JSON "\ud800" escape, an undecodable argv byte) cannot be
        # encoded by the store, a share token or a page: refused here, naming the field.
        if isinstance(data, dict) and (where := lone_surrogate_path(data)) is not None:
            raise ValueError(f"{where}: {SURROGATE_MESSAGE}")
        return data

    @field_validator("model", mode="before")
    @classmethod
    def _no_model_path(cls, value: Any) -> Any:
        # Validation never opens a file: only the CLI, for a file its user names,
        # turns a path into an inline spec first (resolve_local_model_file).
        if is_model_path(value):
            raise ValueError(MODEL_PATH_MESSAGE)
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
        model = resolve_model(self)
        par = self.parallel
        tp, ep = par.tp, par.ep
        if model.heads % par.attention_tp:
            raise ValueError(f"parallel.tp ({tp}) must divide the model's {model.heads} attention heads "
                             "(or set parallel.dp_attention=true: attention then runs unsharded on each rank)")
        if ep > 1 and not model.is_moe:
            raise ValueError(f"parallel.ep ({ep}) needs a mixture-of-experts model; {model.id} is dense "
                             f"({OLD_EP_MEANING})")
        if model.is_moe and model.experts % ep and not par.redundant_experts:
            raise ValueError(f"parallel.ep ({ep}) must divide the model's {model.experts} experts "
                             "(or add parallel.redundant_experts copies so that they spread evenly)")
        if par.redundant_experts and not model.is_moe:
            raise ValueError(f"parallel.redundant_experts needs a mixture-of-experts model; {model.id} is dense")
        if model.is_moe and (model.experts + par.redundant_experts) % ep:
            raise ValueError(f"parallel.redundant_experts ({par.redundant_experts}): the {model.experts} experts "
                             f"plus their copies must spread evenly over parallel.ep ({ep}) GPUs")
        if self.parallel.pp > model.layers:
            raise ValueError(f"parallel.pp ({self.parallel.pp}) exceeds the model's {model.layers} layers")
        if self.serving.attention_dp_balance_iters > 0 and not par.dp_attention:
            raise ValueError(f"serving.attention_dp_balance_iters ({self.serving.attention_dp_balance_iters}) "
                             "balances prompts over attention-DP ranks: it needs parallel.dp_attention=true "
                             "(or set it to 0)")
        if self.serving.attention_dp_balance_iters > 0 and self.serving.mode == "disaggregated":
            raise ValueError("serving.attention_dp_balance_iters is modelled for colocated replicas; a "
                             "disaggregated scenario leaves it 0")
        sp = self.speculative
        if sp.draft_tokens > 0 and sp.method == "mtp" and model.mtp_layers <= 0:
            raise ValueError(f"speculative.method 'mtp': {model.id} has no multi-token-prediction module "
                             "(its mtp_layers is 0; DeepSeek-V3-class checkpoints ship one); use 'eagle' or "
                             "'draft_model'")
        if sp.draft_tokens > 0 and sp.draft_model is not None and get_model(sp.draft_model).heads % tp:
            # the drafter runs at the target's TP (vLLM V1, SGLang): its heads split the same way
            raise ValueError(f"speculative.draft_model: parallel.tp ({tp}) must divide the draft's "
                             f"{get_model(sp.draft_model).heads} attention heads")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_pools(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A scenario without pools serializes as before they existed: the same JSON, share token and store payload.
        out = handler(self)
        if isinstance(out, dict):
            for role in POOL_ROLES:
                if role in out and out[role] is None:
                    del out[role]
        return out

    @model_validator(mode="after")
    def _pools(self) -> Scenario:
        # Each pool's layout gets the scenario's own cross-checks (every after-validator but this one),
        # run on a copy with the pool's gpu and parallel, the message renamed to the pool's fields.
        for role in POOL_ROLES:
            pool: Pool | None = getattr(self, role)
            if pool is None or not pool.is_set:
                continue
            copy = self.model_copy(update={"gpu": pool.gpu if pool.gpu is not None else self.gpu,
                                           "parallel": pool.parallel if pool.parallel is not None else self.parallel,
                                           "prefill": None, "decode": None})
            for dec in type(self).__pydantic_decorators__.model_validators.values():
                if dec.info.mode != "after" or dec.func.__name__ == "_pools":
                    continue
                try:
                    dec.func(copy)
                except ValueError as exc:
                    raise ValueError(_pool_message(role, str(exc))) from None
        return self


def _pool_message(role: str, message: str) -> str:
    """A layout check's message for a pool: ``parallel.tp`` → ``prefill.parallel.tp``."""
    out = re.sub(r"(?<![\w.])parallel\.", f"{role}.parallel.", message)
    return out if out != message else f"{role}: {message}"


def resolve_gpu(scenario: Scenario) -> GpuSpec:
    """The GpuSpec a scenario names (catalog id) or carries inline."""
    return scenario.gpu if isinstance(scenario.gpu, GpuSpec) else get_gpu(scenario.gpu)


def resolve_model(scenario: Scenario) -> ModelSpec:
    """The ModelSpec a scenario names (catalog id) or carries inline."""
    return scenario.model if isinstance(scenario.model, ModelSpec) else get_model(scenario.model)


def scenario_from_dict(data: dict[str, Any], *, allow_local_files: bool = False) -> Scenario:
    """Validate a plain dict; errors become one ScenarioError naming the field.

    By default (data from a share link, import, upload, query parameter or the
    store) nothing is read from disk: a path-shaped ``model`` is refused with
    :data:`MODEL_PATH_MESSAGE`, the same whether or not the file exists.  Only
    a local user naming a file (the CLI's scenario file and ``--set model=PATH``)
    passes ``allow_local_files=True`` to read that config.json."""
    if not isinstance(data, dict):
        raise ScenarioError("scenario: expected a JSON object")
    if allow_local_files:
        data = resolve_local_model_file(data)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(validation_message(exc)) from None
    except RecursionError:  # a pathologically nested inline spec
        raise ScenarioError(f"scenario: nested deeper than {MAX_JSON_DEPTH} levels") from None


def _parse_value(text: str, key: str) -> Any:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return text
    except (RecursionError, ValueError):
        pass  # parse_json names the problem below
    return parse_json(text, source=f"--set {key}")


_FIELDS: dict[str, type[BaseModel]] = {
    "parallel": Parallel, "workload": Workload, "slo": Slo, "serving": Serving,
    "speculative": Speculative, "efficiency": Efficiency, "fleet": Fleet, "cost": Cost,
}


def _check_pool_key(key: str, parts: list[str]) -> None:
    """``prefill.gpu``, ``prefill.parallel`` or ``prefill.parallel.<Parallel field>`` (decode likewise)."""
    ok = (len(parts) == 2 and parts[1] in Pool.model_fields) or (
        len(parts) == 3 and parts[1] == "parallel" and parts[2] in Parallel.model_fields)
    if not ok:
        raise ScenarioError(f"{key}: unknown key")


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``KEY=VALUE`` strings to a scenario dict (values parsed as JSON when
    they parse, else kept as strings; ``null`` clears a field)."""
    out: dict[str, Any] = json.loads(json.dumps(data))
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ScenarioError(f"--set expects KEY=VALUE, got {item!r}")
        parts = key.split(".")
        if parts[0] not in Scenario.model_fields:
            raise ScenarioError(f"{key}: unknown key")
        if parts[0] in POOL_ROLES:
            _check_pool_key(key, parts)
        elif len(parts) > 1:
            sub = _FIELDS.get(parts[0])
            if sub is None or len(parts) != 2 or parts[1] not in sub.model_fields:
                raise ScenarioError(f"{key}: unknown key")
        value = _parse_value(raw, key)
        if (parts[0] in {"name", "gpu", "model"} or parts[1:] == ["gpu"]) and not isinstance(value, dict):
            value = raw  # ids and names stay strings ("1" is a name, not a number)
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def load_scenario_file(path: str | Path) -> dict[str, Any]:
    """Read a scenario JSON file a local user names into a dict (validated
    later); only a regular file, at most MAX_JSON_FILE_BYTES."""
    data: dict[str, Any] = read_json(path)
    return data
