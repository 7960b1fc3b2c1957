"""A ``model`` given as a file path: refused in every scenario validated from
untrusted data, read (a Hugging Face config.json) only for a file a local user
names (the CLI).
"""

from __future__ import annotations

from typing import Any

from planner.errors import PlannerError, ScenarioError
from planner.spec.specs import ModelSpec

__all__ = [
    "MODEL_PATH_MESSAGE",
    "is_model_path",
    "resolve_local_model_file",
]

# The one message for a path-shaped ``model`` outside the CLI.  It never depends
# on the path (whether a file exists there must not be observable).
MODEL_PATH_MESSAGE = (
    "looks like a file path; a scenario from a share link, import, upload or stored payload cannot "
    "read files: import the config.json first (Catalog page, or the CLI: "
    "python -m planner plan --set model=PATH) and use the model's id or its inline spec"
)


def is_model_path(value: Any) -> bool:
    """True for a ``model`` string shaped like a file path (contains "/" or "\\",
    or ends in ".json"); catalog ids never are."""
    return isinstance(value, str) and (value.endswith(".json") or "/" in value or "\\" in value)


def resolve_local_model_file(data: dict[str, Any]) -> dict[str, Any]:
    """For a file a local user names (the CLI): a path-shaped ``model`` becomes the
    inline spec its Hugging Face config.json describes (read with the size cap).
    Never call this on data from a link, import, upload or store."""
    value = data.get("model")
    if not is_model_path(value):
        return data
    from planner.spec.hf_import import load_hf_config

    try:
        spec = ModelSpec.from_hf_config(load_hf_config(str(value)))
    except PlannerError as exc:
        raise ScenarioError(f"model: {exc}") from None
    return {**data, "model": spec.model_dump(mode="json")}
