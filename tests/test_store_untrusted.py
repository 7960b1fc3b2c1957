"""Imports, stored payloads and ``?scenario=`` links are untrusted: a path-shaped
``model`` in them is refused with one message whatever is at that path (no
file-existence oracle), and no file is opened.  SQLite file and PostgreSQL."""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import pathlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from planner import ScenarioError, store
from planner.store import repository as repo
from planner.store.limits import parse_import_bytes
from planner.store.models import ScenarioRevisionRow, ScenarioRow
from tests.store_support import db_url, engine  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]
HF_CONFIG = ROOT / "tests" / "data" / "hf" / "llama-3.1-8b.json"


class FileTouched(BaseException):
    """A BaseException, so no ``except Exception`` on the way can swallow it."""


@contextlib.contextmanager
def no_python_file_access() -> Iterator[list[Any]]:
    """Fail if Python code opens a file inside the block.  (SQLite opens its
    database in C, below these functions, so the store itself still works.)"""
    calls: list[Any] = []

    def boom(*args: Any, **_kwargs: Any) -> Any:
        calls.append(args[:1])
        raise FileTouched(f"a file was opened: {args[:1]!r}")

    with pytest.MonkeyPatch.context() as mp:
        for owner, name in [(builtins, "open"), (io, "open"), (os, "open"), (os, "fdopen"),
                            (pathlib.Path, "open"), (pathlib.Path, "read_text"), (pathlib.Path, "read_bytes")]:
            mp.setattr(owner, name, boom)
        yield calls


@pytest.fixture()
def paths(tmp_path: Path) -> list[str]:
    """An existing valid config.json, a system file, a device, a FIFO, a directory, missing ones."""
    cfg = tmp_path / "config.json"
    cfg.write_text(HF_CONFIG.read_text())
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    return [str(cfg), "/etc/passwd", "/dev/zero", str(fifo), str(tmp_path), str(tmp_path / "missing.json"),
            "../../etc/shadow", "x.json"]


def _counts(engine: sa.Engine) -> tuple[int, int]:  # noqa: F811
    with engine.connect() as conn:
        return tuple(int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())  # type: ignore[return-value]
                     for t in (ScenarioRow, ScenarioRevisionRow))


def test_an_import_naming_a_file_gives_one_message_and_opens_nothing(engine: sa.Engine,  # noqa: F811
                                                                     paths: list[str]) -> None:
    repo.list_scenarios(engine=engine)  # connect before files are forbidden
    messages = set()
    with no_python_file_access() as calls:
        for p in paths:
            for doc in ({"model": p}, {"kind": store.EXPORT_KIND, "schema_version": 1, "name": "x",
                                       "scenario": {"model": p}}):
                data = json.dumps(doc).encode()
                with pytest.raises(ScenarioError) as exc:
                    store.import_scenario(engine=engine, document=parse_import_bytes(data, source="'upload.json'"))
                messages.add(str(exc.value))
    assert calls == []
    assert len(messages) == 1, messages  # the same words whether or not a file is there
    (message,) = messages
    assert message.startswith("import: model:") and "import the config.json first" in message
    assert _counts(engine) == (0, 0)


def test_a_stored_payload_naming_a_file_is_refused_without_opening_it(engine: sa.Engine,  # noqa: F811
                                                                      paths: list[str]) -> None:
    """A row written before this check (or by hand) that names a file."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with engine.begin() as conn:
        for i, p in enumerate(paths):
            conn.execute(sa.insert(ScenarioRow).values(
                slug=f"legacy-{i}", name="legacy", description="", tags=[], payload={"model": p}, schema_version=1,
                frozen_catalog=None, created_at=now, updated_at=now, version=1))
    messages = set()
    with no_python_file_access() as calls:
        for i in range(len(paths)):
            with pytest.raises(ScenarioError) as exc:
                repo.get_scenario(engine=engine, ref=f"legacy-{i}")
            messages.add(str(exc.value).replace(f"'legacy-{i}'", "'legacy-N'"))
    assert calls == []
    assert len(messages) == 1, messages
    assert "import the config.json first" in messages.pop()
