"""Named limits on what the store accepts, and the checks that enforce them.

Everything a stranger can send the store (a name, tags, a slug or id in a link,
an imported file) is checked here before it reaches a query: one
:class:`ScenarioError` naming the field and the limit, never a database error.
Every check is linear in its input and stops at the cap.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planner.errors import ScenarioError
from planner.io.jsonfile import SURROGATE_MESSAGE, lone_surrogate_path, parse_json

__all__ = [
    "DESCRIPTION_MAX_CHARS",
    "ID_MAX",
    "IMPORT_MAX_BYTES",
    "IMPORT_MAX_DEPTH",
    "NAME_MAX_CHARS",
    "QUERY_MAX_CHARS",
    "REF_MAX_CHARS",
    "SLUG_MAX_CHARS",
    "TAGS_MAX",
    "TAG_MAX_CHARS",
    "check_description",
    "check_id",
    "check_name",
    "check_query",
    "check_slug",
    "check_tags",
    "parse_import_bytes",
    "parse_json_bytes",
    "parse_ref",
    "read_import_file",
]

# Column widths (models.py / migrations): a longer value would be cut or refused by PostgreSQL.
NAME_MAX_CHARS = 200  # scenarios.name is VARCHAR(200)
SLUG_MAX_CHARS = 120  # scenarios.slug is VARCHAR(120)
# ids and versions are INTEGER columns: PostgreSQL's integer is 32-bit signed, so
# a larger number can name no row (and would fail the query instead of missing).
ID_MAX = 2**31 - 1
# Caps chosen for what a person writes; they keep lists, exports and the tag check small.
DESCRIPTION_MAX_CHARS = 2_000  # a paragraph (the column is TEXT; the cap keeps pages and exports small)
TAG_MAX_CHARS = 50  # a label, not a sentence
TAGS_MAX = 32  # more than any review uses; bounds the (linear) check and the list filter
QUERY_MAX_CHARS = 200  # a search box: at most a name (200 characters)
REF_MAX_CHARS = SLUG_MAX_CHARS  # a slug, or an id (at most 10 digits)
# An export is a few KB (the scenario plus two frozen catalog entries); 1 MiB is far
# more than any real one and small enough to read, decode and parse at once.
IMPORT_MAX_BYTES = 1_048_576
# A scenario export is at most 5 levels deep (document > frozen_catalog > model > flops_per_s > value);
# 32 leaves room for any inline spec and stops a deep document before a validator recurses into it.
IMPORT_MAX_DEPTH = 32

_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,118}[a-z0-9])?")  # used with fullmatch only
_DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: "²".isdigit() is True, int("²") fails
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # C0 controls and DEL (NUL: PostgreSQL refuses it in text)
_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # the same, newlines and tabs allowed


def _int_text(value: int) -> str:
    """A huge int's str() raises past 4300 digits (and is noise long before): say its size instead."""
    if value.bit_length() <= 128:
        return str(value)
    return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"


def _control(field: str, text: str, pattern: re.Pattern[str]) -> None:
    if lone_surrogate_path(text) is not None:  # the database cannot encode it
        raise ScenarioError(f"{field}: {SURROGATE_MESSAGE}")
    bad = pattern.search(text)
    if bad is not None:
        raise ScenarioError(f"{field}: control character {bad.group()!r} at position {bad.start()} is not allowed")


def check_id(value: object, field: str = "id") -> int:
    """A row id or version: an int in 1..ID_MAX (bool is not an int here)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ScenarioError(f"{field}: must be an integer, got {type(value).__name__}")
    if not 1 <= value <= ID_MAX:
        raise ScenarioError(f"{field}: {_int_text(value)} is out of range (1 to {ID_MAX:,})")
    return value


def check_slug(slug: object) -> str:
    """A slug: 1-120 lowercase letters, digits and inner dashes, not only digits (whole-string match)."""
    if not isinstance(slug, str) or len(slug) > SLUG_MAX_CHARS or not _SLUG.fullmatch(slug) or slug.isdigit():
        shown = repr(slug)[:SLUG_MAX_CHARS + 2]
        raise ScenarioError(f"slug: {shown} must be 1-{SLUG_MAX_CHARS} lowercase letters, digits and inner dashes, "
                            "not only digits")
    return slug


def parse_ref(ref: object) -> int | str:
    """A scenario reference from a link or the command line: an id (ASCII digits,
    1..ID_MAX) or a well-formed slug; anything else is a ScenarioError naming it."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        return check_id(ref, "scenario id")
    if not isinstance(ref, str):
        raise ScenarioError(f"scenario: expected an id or a slug, got {type(ref).__name__}")
    if len(ref) > REF_MAX_CHARS:
        raise ScenarioError(f"scenario: {len(ref):,} characters; a slug or id is at most {REF_MAX_CHARS}")
    if _DIGITS.fullmatch(ref):
        return check_id(int(ref), "scenario id")
    if not _SLUG.fullmatch(ref):
        raise ScenarioError(f"scenario: {ref!r} is neither an id (digits 0-9) nor a slug "
                            "(lowercase letters, digits and inner dashes)")
    return ref


def check_name(name: object) -> str:
    if not isinstance(name, str):
        raise ScenarioError(f"name: must be text, got {type(name).__name__}")
    name = name.strip()
    if not name or len(name) > NAME_MAX_CHARS:
        raise ScenarioError(f"name: must be 1 to {NAME_MAX_CHARS} characters (got {len(name):,})")
    _control("name", name, _CONTROL)
    return name


def check_description(text: object) -> str:
    if not isinstance(text, str):
        raise ScenarioError(f"description: must be text, got {type(text).__name__}")
    if len(text) > DESCRIPTION_MAX_CHARS:
        raise ScenarioError(f"description: {len(text):,} characters; at most {DESCRIPTION_MAX_CHARS:,}")
    _control("description", text, _CONTROL_BUT_LINES)
    return text


def check_tags(tags: Sequence[object]) -> list[str]:
    """Normalised (stripped, lower-case), de-duplicated in order; linear, and the
    count is checked before any tag is looked at."""
    if isinstance(tags, str) or not isinstance(tags, Sequence):
        raise ScenarioError("tags: must be a list of strings")
    if len(tags) > TAGS_MAX:
        raise ScenarioError(f"tags: {len(tags):,} given; at most {TAGS_MAX}")
    out: dict[str, None] = {}  # insertion-ordered set: the membership test is O(1)
    for raw in tags:
        if not isinstance(raw, str):
            raise ScenarioError(f"tags: each tag must be text, got {type(raw).__name__}")
        tag = raw.strip().lower()
        if not tag or len(tag) > TAG_MAX_CHARS or "," in tag:
            raise ScenarioError(f"tags: {tag[:TAG_MAX_CHARS + 1]!r} must be 1 to {TAG_MAX_CHARS} characters "
                                "without commas")
        _control("tags", tag, _CONTROL)
        out[tag] = None
    return list(out)


def check_query(text: str, field: str = "query") -> str:
    """A search string (name or slug substring)."""
    if len(text) > QUERY_MAX_CHARS:
        raise ScenarioError(f"{field}: {len(text):,} characters; at most {QUERY_MAX_CHARS}")
    _control(field, text, _CONTROL)
    return text


def parse_json_bytes(data: bytes, *, label: str, max_bytes: int = IMPORT_MAX_BYTES,
                     max_depth: int = IMPORT_MAX_DEPTH) -> Any:
    """Untrusted JSON bytes -> the parsed value: at most ``max_bytes``, then the one
    JSON reader (``planner.io.jsonfile.parse_json``: strict UTF-8, a BOM allowed,
    at most ``max_depth`` levels); every failure one ScenarioError starting with ``label``."""
    if len(data) > max_bytes:
        raise ScenarioError(f"{label} is over the {max_bytes:,}-byte limit")
    return parse_json(data, source=label, error=ScenarioError, max_depth=max_depth)


def parse_import_bytes(data: bytes, *, source: str) -> Any:
    """An import document's bytes (a file or an upload named ``source``) -> its JSON value."""
    return parse_json_bytes(data, label=f"import: {source}")


def read_import_file(path: str | Path) -> bytes:
    """The bytes of a regular file named on the command line, at most
    IMPORT_MAX_BYTES (+1, so an oversize file is seen); a FIFO, device or
    directory is refused without blocking on it."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ScenarioError(f"import: cannot read {p}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ScenarioError(f"import: {p} is not a regular file")
        chunks: list[bytes] = []
        left = IMPORT_MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ScenarioError(f"import: cannot read {p}: {exc.strerror}") from None
    finally:
        os.close(fd)
