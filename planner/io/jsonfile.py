"""Reading a file a local user names, and parsing JSON from anywhere, with bounds.

Every read here is bounded: only a regular file is opened (a FIFO, a device
such as ``/dev/zero`` or a directory is refused before a byte is read), and
never more than a named cap of bytes.  Every parse failure, including the ones
the ``json`` module raises as ``RecursionError`` (deep nesting) or a plain
``ValueError`` (an integer past Python's digit limit), becomes one
:class:`~planner.errors.PlannerError` that names the file (or source).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from planner.errors import PlannerError, ScenarioError

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_JSON_FILE_BYTES",
    "SURROGATE_MESSAGE",
    "lone_surrogate_path",
    "parse_json",
    "read_json",
    "read_text_file",
]

# The largest JSON file a user names: a scenario carrying the most trace rows a
# Workload allows (100,000 rows of ~15 characters) is about 1.5 MB; the
# published measurement file is about 60 KB and an HF config.json a few KB.
MAX_JSON_FILE_BYTES = 8_000_000
# Deepest nesting accepted: a scenario nests 4 levels (workload.trace rows), an
# HF config.json about 4 (rope_scaling, quantization_config); 64 is far above
# any real document and far below the interpreter's recursion limit.
MAX_JSON_DEPTH = 64

_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def read_text_file(path: str | Path, *, max_bytes: int, error: type[PlannerError] = ScenarioError,
                   what: str = "") -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` bytes.

    A missing or unreadable file, anything that is not a regular file, a file
    over the cap or bytes that are not UTF-8 raise ``error`` naming the file."""
    p = Path(path)
    pre = f"{what}: " if what else ""
    try:
        fd = os.open(p, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC)
    except OSError as exc:
        raise error(f"{pre}cannot read {p}: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL in the path
        raise error(f"{pre}cannot read {str(p)!r}: the path contains a NUL character") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a pipe, device or socket)"
            raise error(f"{pre}cannot read {p}: it is {kind}")
        if st.st_size > max_bytes:
            raise error(f"{pre}{p}: {st.st_size:,} bytes is over the limit of {max_bytes:,} bytes")
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{pre}cannot read {p}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > max_bytes:  # the file grew while it was read
        raise error(f"{pre}{p}: over the limit of {max_bytes:,} bytes")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{pre}{p}: not valid UTF-8 (byte {exc.start})") from None


def _depth_ok(data: Any, limit: int) -> bool:
    """True when ``data`` nests at most ``limit`` containers deep (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return False
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return True


# A JSON ``"\ud800"`` escape decodes to a lone UTF-16 surrogate: a Python str that no
# UTF-8 writer (the database, a token, a page, stdout) can encode.
SURROGATE_MESSAGE = "holds a lone surrogate (\\ud800-\\udfff), which is not text; remove that character"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def lone_surrogate_path(data: Any, path: str = "") -> str | None:
    """The dotted path (``model.name``, ``tags.0``) of the first key or string in
    ``data`` that holds a lone surrogate, ``path`` itself for a bare string, else
    None.  Iterative: no recursion on deep input."""
    stack: list[tuple[Any, str]] = [(data, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return where or "text"
        elif isinstance(node, dict):
            for key, value in node.items():
                child = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _SURROGATE.search(key):
                    return (where + "." if where else "") + repr(key)[1:-1]
                stack.append((value, child))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, f"{where}.{i}" if where else str(i)) for i, v in enumerate(node))
    return None


def parse_json(text: str | bytes, *, source: str, error: type[PlannerError] = ScenarioError,
               max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text from ``source`` (a file name, "share link", ...); every
    failure is one ``error`` naming the source and the reason."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise error(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise error(f"{source}: JSON nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # an integer with more digits than int() converts
        reason = "an integer has too many digits" if "digits" in str(exc) else "not valid JSON"
        raise error(f"{source}: {reason}") from None
    if not _depth_ok(data, max_depth):
        raise error(f"{source}: JSON nested deeper than {max_depth} levels")
    if (where := lone_surrogate_path(data)) is not None:
        raise error(f"{source}: {where} {SURROGATE_MESSAGE}")
    return data


def read_json(path: str | Path, *, error: type[PlannerError] = ScenarioError, want_object: bool = True,
              max_bytes: int = MAX_JSON_FILE_BYTES) -> Any:
    """Parse the regular file ``path`` (at most ``max_bytes``); an unreadable
    file, invalid JSON or (with ``want_object``) a non-object raises ``error``
    with the file name and the reason."""
    p = Path(path)
    data = parse_json(read_text_file(p, max_bytes=max_bytes, error=error), source=str(p), error=error)
    if want_object and not isinstance(data, dict):
        raise error(f"{p}: expected a JSON object")
    return data
