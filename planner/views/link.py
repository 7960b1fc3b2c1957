"""A link is the state: the sidebar's widget values ↔ a scenario ↔ URL query parameters.

Each sidebar widget has a stable key that is also its link parameter (``gpu``,
``rps``, ``ttft_ms`` ...) and a dotted scenario field.  ``link_params`` writes
only the values that differ from the defaults (a short, readable address);
``parse_link`` reads a stranger's parameters back, each checked on its own, and
returns one sentence per value it refused or key it does not know: nothing is
ignored silently.  Pure functions: the page layer owns ``st.query_params``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from planner.io.formatting import markdown_code
from planner.spec.scenario import Scenario

__all__ = [
    "LINK_FIELDS",
    "LINK_RESERVED",
    "QUERY_ECHO_MAX_CHARS",
    "QUERY_NUMBER_MAX_CHARS",
    "QUERY_TEXT_MAX_CHARS",
    "WIDGET_INT_MAX",
    "LinkField",
    "link_params",
    "parse_link",
    "scenario_data",
    "widget_values",
]

# A number's text in a link: 17 significant digits, a sign, a point and an exponent fit in 32;
# anything longer is not a number a person typed.
QUERY_NUMBER_MAX_CHARS = 32
# JavaScript's Number.MAX_SAFE_INTEGER: the browser's number input holds no larger whole number.
WIDGET_INT_MAX = 2**53 - 1
QUERY_ECHO_MAX_CHARS = 40  # how much of a rejected link value a message repeats
QUERY_TEXT_MAX_CHARS = 200  # a scenario name (Scenario.name's own limit)
# Parameters that are not widgets: a saved scenario's slug, a stateless token, Streamlit's own.
LINK_RESERVED = frozenset({"scenario", "s", "embed", "embed_options"})

Kind = Literal["choice", "int", "float", "text"]


@dataclass(frozen=True)
class LinkField:
    """One sidebar widget: its link key, the scenario field it sets, and how."""

    key: str
    path: str  # dotted Scenario field
    kind: Kind
    scale: float = 1.0  # widget value = field value × scale (ms for s, % for fractions)
    zero_is_none: bool = False  # widget 0 means the field's None ("largest that fits", "catalog")
    optional: bool = False  # the widget may be empty (None)
    minimum: float | None = None


LINK_FIELDS: tuple[LinkField, ...] = (
    LinkField("name", "name", "text"),
    LinkField("gpu", "gpu", "choice"),
    LinkField("model", "model", "choice"),
    LinkField("wd", "weights_dtype", "choice"),
    LinkField("kd", "kv_dtype", "choice"),
    LinkField("tp", "parallel.tp", "choice"),
    LinkField("pp", "parallel.pp", "choice"),
    LinkField("ep", "parallel.ep", "choice"),
    LinkField("dpa", "parallel.dp_attention", "choice"),
    LinkField("mode", "serving.mode", "choice"),
    LinkField("prompt", "workload.prompt_tokens", "int", minimum=1),
    LinkField("output", "workload.output_tokens", "int", minimum=1),
    LinkField("rps", "workload.requests_per_s", "float"),
    LinkField("peak", "workload.peak_requests_per_s", "float", optional=True),
    LinkField("prefix", "workload.prefix_tokens", "int", minimum=0),
    LinkField("hit", "workload.prefix_hit_rate", "float"),
    LinkField("dist", "workload.distribution", "choice"),
    LinkField("psig", "workload.prompt_sigma", "float", minimum=0),
    LinkField("osig", "workload.output_sigma", "float", minimum=0),
    LinkField("ttft_ms", "slo.ttft_s", "float", scale=1e3),
    LinkField("itl_ms", "slo.itl_s", "float", scale=1e3),
    LinkField("batch", "serving.batch_size", "int", zero_is_none=True, minimum=0),
    LinkField("ctx", "serving.context_tokens", "int", zero_is_none=True, minimum=0),
    LinkField("chunk", "serving.chunk_tokens", "int"),
    LinkField("util", "serving.memory_utilization", "float", zero_is_none=True),
    LinkField("engine", "serving.engine", "choice"),
    LinkField("recv", "serving.scheduler_recv_interval", "int", minimum=1),
    LinkField("adpbal", "serving.attention_dp_balance_iters", "int", minimum=0),
    LinkField("price", "cost.usd_per_gpu_hour", "float", optional=True),
    LinkField("target", "fleet.target_utilization", "float", scale=100.0),
    LinkField("minrep", "fleet.min_replicas", "int", minimum=1),
    LinkField("link", "fleet.link", "choice"),
    LinkField("draft", "speculative.draft_tokens", "int", minimum=0),
    LinkField("smethod", "speculative.method", "choice"),
    LinkField("accept", "speculative.acceptance", "float", optional=True),
    LinkField("dcost", "speculative.draft_cost", "float", optional=True, minimum=0),
)
_BY_KEY = {f.key: f for f in LINK_FIELDS}


def _get(data: Mapping[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _to_widget(field: LinkField, value: Any) -> Any:
    if value is None:
        return 0 if field.zero_is_none and field.kind == "int" else (0.0 if field.zero_is_none else None)
    if field.kind == "int":
        return int(value)
    if field.kind == "float":
        x = float(value) * field.scale
        # 15 significant digits: 0.05 s × 1000 is 50 ms, not 50.00000000000001.
        return float(f"{x:.15g}") if field.scale != 1.0 else x
    if isinstance(value, Mapping):  # an inline GPU or model spec: its id
        return str(value.get("id", ""))
    return value


def widget_values(scenario: Scenario) -> dict[str, Any]:
    """The sidebar widget values (by key) that reproduce ``scenario``'s inputs."""
    data = scenario.model_dump(mode="json")
    return {f.key: _to_widget(f, _get(data, f.path)) for f in LINK_FIELDS}


def scenario_data(values: Mapping[str, Any], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A scenario dict from widget values (unscaled; 0 → None where that is the
    widget's meaning), over ``base`` (a loaded scenario's inputs without widgets)."""
    data: dict[str, Any] = _deep_copy(base) if base else {}
    for f in LINK_FIELDS:
        if f.key not in values:
            continue
        v = values[f.key]
        if v is not None and f.kind in ("int", "float"):
            if f.zero_is_none and v == 0:
                v = None
            elif f.kind == "int":
                v = int(v)
            else:
                v = float(v) / f.scale
        _set(data, f.path, v)
    return data


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def _text(value: Any) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def link_params(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, str]:
    """The widget values that differ from ``defaults``, as link text (``{"rps": "50"}``)."""
    out: dict[str, str] = {}
    for f in LINK_FIELDS:
        v = values.get(f.key)
        if f.key in values and v != defaults.get(f.key):
            out[f.key] = "" if v is None else _text(v)
    return out


def _echo(raw: str) -> str:
    """A rejected link value for a message: shortened, one line, inside a code span
    (``%0A%0A`` cannot end the span: no markdown, no links, no images)."""
    text = raw if len(raw) <= QUERY_ECHO_MAX_CHARS else raw[:QUERY_ECHO_MAX_CHARS] + "…"
    return markdown_code(text)


def _number(field: LinkField, raw: str) -> tuple[Any, str | None]:
    if len(raw) > QUERY_NUMBER_MAX_CHARS:
        return None, f"{len(raw):,} characters is not a number (at most {QUERY_NUMBER_MAX_CHARS})"
    try:
        x = float(raw)
    except ValueError:
        return None, f"{_echo(raw)} is not a number"
    if not math.isfinite(x):
        return None, f"{_echo(raw)} is not a finite number"
    if field.kind == "int":
        if not x.is_integer() or abs(x) > WIDGET_INT_MAX:
            return None, f"{_echo(raw)} is not a whole number up to {WIDGET_INT_MAX:,}"
    if field.minimum is not None and x < field.minimum:
        return None, f"{_echo(raw)} is below the minimum {field.minimum:g}"
    return (int(x) if field.kind == "int" else x), None


def parse_link(params: Mapping[str, Sequence[str]], choices: Mapping[str, Sequence[Any]]) -> tuple[dict[str, Any], list[str]]:
    """Widget values from link parameters (each key's last value), and one sentence
    per refused value or unknown key.  ``choices`` lists each choice widget's options."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, raws in params.items():
        if key in LINK_RESERVED:
            continue
        field = _BY_KEY.get(key)
        if field is None:
            problems.append(f"Link parameter {_echo(key)} is not a Ridgeline setting; it is ignored.")
            continue
        raw = raws[-1] if raws else ""
        if field.kind == "text":
            if len(raw) > QUERY_TEXT_MAX_CHARS:
                problems.append(f"Link parameter `{key}`: longer than {QUERY_TEXT_MAX_CHARS} characters; "
                                "the default is used instead.")
            else:
                values[key] = raw
            continue
        if field.kind == "choice":
            options = {str(o): o for o in choices.get(key, ())}
            if raw in options:
                values[key] = options[raw]
            else:
                shown = ", ".join(list(options)[:8]) + (" …" if len(options) > 8 else "")
                problems.append(f"Link parameter `{key}`: {_echo(raw)} is not one of the choices ({shown}); "
                                "the default is used instead.")
            continue
        if raw == "" and (field.optional or field.zero_is_none):
            values[key] = None if field.optional else 0
            continue
        value, why = _number(field, raw)
        if why is None:
            values[key] = value
        else:
            problems.append(f"Link parameter `{key}`: {why}; the default is used instead.")
    return values, problems
