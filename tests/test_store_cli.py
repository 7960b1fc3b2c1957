"""``python -m planner scenarios ...`` against SQLite and PostgreSQL (DATABASE_URL)."""

from __future__ import annotations

import json

import pytest

from planner.cli import main
from planner.store.migrate import upgrade
from tests.store_support import db_url  # noqa: F401  (fixture)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["scenarios", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_scenarios_cli_end_to_end(db_url: str, tmp_path, monkeypatch,  # noqa: F811
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    rc, out, err = _run(capsys, "list")
    assert rc == 2 and err.count("\n") == 1 and "not migrated: run `make migrate`" in err
    upgrade(db_url)

    rc, out, err = _run(capsys, "save", "--set", "parallel.tp=2", "--set", "model=llama-3.1-8b",
                        "--name", "CLI test", "--tag", "ci", "--description", "from the CLI")
    assert rc == 0, err
    saved = json.loads(out)
    assert (saved["slug"], saved["version"], saved["scenario"]["parallel"]["tp"]) == ("cli-test", 1, 2)
    assert saved["frozen_catalog"]["model"]["id"] == "llama-3.1-8b" and saved["catalog_drift"] == []

    rc, out, _ = _run(capsys, "update", "cli-test", "--set", "parallel.tp=4")
    assert rc == 0 and json.loads(out)["version"] == 2 and json.loads(out)["scenario"]["parallel"]["tp"] == 4
    rc, out, err = _run(capsys, "update", "cli-test", "--set", "parallel.tp=1", "--expected-version", "1")
    assert rc == 2 and "you had version 1; the store has version 2" in err and err.count("\n") == 1
    rc, out, err = _run(capsys, "update", "cli-test", "--set", "parallel.tp=0")
    assert rc == 2 and "parallel.tp" in err

    rc, out, _ = _run(capsys, "history", "cli-test")
    assert [h["version"] for h in json.loads(out)] == [2, 1]
    rc, out, _ = _run(capsys, "restore", "cli-test", "1", "--expected-version", "2")
    assert rc == 0 and json.loads(out)["version"] == 3 and json.loads(out)["scenario"]["parallel"]["tp"] == 2

    rc, out, _ = _run(capsys, "show", "cli-test", "--format", "table")
    assert rc == 0 and "cli-test" in out and "catalog_drift" in out
    rc, out, _ = _run(capsys, "list", "--format", "csv", "--tag", "ci")
    assert rc == 0 and out.splitlines()[0] == "id,slug,name,version,tags,updated_at" and ",cli-test," in out

    path = tmp_path / "exported.json"
    rc, _, _ = _run(capsys, "export", "cli-test", "-o", str(path))
    assert rc == 0 and json.loads(path.read_text())["kind"] == "ridgeline.scenario"
    rc, out, _ = _run(capsys, "import", str(path), "--slug", "cli-copy")
    assert rc == 0 and json.loads(out)["slug"] == "cli-copy"
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "ridgeline.scenario", "schema_version": 99, "name": "x", "scenario": {}}')
    rc, _, err = _run(capsys, "import", str(bad))
    assert rc == 2 and "schema_version 99" in err
    bad.write_text("{not json")
    rc, _, err = _run(capsys, "import", str(bad))
    assert rc == 2 and "not valid JSON" in err

    rc, _, _ = _run(capsys, "delete", "cli-copy")
    assert rc == 0
    rc, out, _ = _run(capsys, "list")
    assert [x["slug"] for x in json.loads(out)] == ["cli-test"]
    rc, _, err = _run(capsys, "show", "cli-copy")
    assert rc == 2 and "no saved scenario 'cli-copy'" in err
