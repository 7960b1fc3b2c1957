"""Reading a JSON file for the user: one message naming the file on failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from planner.errors import PlannerError, ScenarioError

__all__ = ["read_json"]


def read_json(path: str | Path, *, error: type[PlannerError] = ScenarioError, want_object: bool = True) -> Any:
    """Parse ``path``; an unreadable file, invalid JSON or (with ``want_object``)
    a non-object raises ``error`` with the file name and the reason."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as exc:
        raise error(f"cannot read {p}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if want_object and not isinstance(data, dict):
        raise error(f"{p}: expected a JSON object")
    return data
