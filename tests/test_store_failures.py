"""A store that cannot be used is one line, never a traceback, never the password:
a garbage file, a directory, an unreachable server, a database at a newer
revision than the app knows, ``migrate upgrade zzz``.  On a real SQLite file and
the real PostgreSQL (and a loopback port nothing listens on)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import sqlalchemy as sa

from planner import PlannerError, Scenario
from planner.cli import main as cli_main
from planner.errors import StoreError
from planner.store import repository as repo
from planner.store.db import display_url, make_engine, store_errors
from planner.store.migrate import current, head, known_revisions, require_current, upgrade
from planner.store.migrate import main as migrate_main
from tests.store_support import db_url  # noqa: F401  (fixture)

PASSWORD = "Tr0ub4dor-s3cret"
FUTURE = "9999_from_a_newer_app"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_line(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    out = capsys.readouterr()
    assert rc == 2 and out.out == "", (rc, out)
    assert out.err.startswith("error: ") and out.err.count("\n") == 1 and "Traceback" not in out.err, out.err
    return out.err


def _both_clis(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """``scenarios list``, ``migrate upgrade`` and ``migrate current``: each one line, exit 2."""
    return [_one_line(capsys, cli_main(["scenarios", "list"])), _one_line(capsys, migrate_main(["upgrade"])),
            _one_line(capsys, migrate_main(["current"]))]


@pytest.fixture()
def sqlite_at(monkeypatch: pytest.MonkeyPatch):
    def point(path: Path) -> None:
        monkeypatch.delenv("DATABASE_URL", raising=False)
        monkeypatch.setenv("RIDGELINE_DB", str(path))
    return point


def test_a_garbage_file_is_not_a_database(tmp_path: Path, sqlite_at, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "ridgeline.db"
    junk.write_bytes(b"this is not SQLite at all\x00\xff" * 200)
    sqlite_at(junk)
    for err in _both_clis(capsys):
        assert "is not a SQLite database (the file holds something else)" in err and str(junk) in err
    assert junk.read_bytes().startswith(b"this is not SQLite")  # nothing overwrote it
    engine = make_engine(f"sqlite:///{junk}")
    with pytest.raises(StoreError, match="is not a SQLite database"):
        repo.list_scenarios(engine=engine)  # the repository says the same, not sqlite3.DatabaseError
    with pytest.raises(StoreError, match="is not a SQLite database"):
        repo.save_scenario(engine=engine, scenario=Scenario())
    engine.dispose()


@pytest.mark.parametrize("where", ["directory", "missing folder"])
def test_a_directory_or_missing_folder_cannot_be_opened(tmp_path: Path, sqlite_at, where: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path if where == "directory" else tmp_path / "no" / "such" / "ridgeline.db"
    sqlite_at(path)
    for err in _both_clis(capsys):
        assert "cannot be opened (is it a directory, or in a folder that does not exist?)" in err
    assert not (tmp_path / "no").exists()


def test_an_unreachable_server_is_one_line_without_the_password(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql+psycopg://ridgeline:{PASSWORD}@127.0.0.1:{_closed_port()}/test"
    monkeypatch.setenv("DATABASE_URL", url)
    for err in _both_clis(capsys):
        assert "cannot be reached" in err and "Connection refused" in err
        assert PASSWORD not in err and "ridgeline:***@127.0.0.1" in err
    engine = make_engine(url)
    with pytest.raises(StoreError) as exc:
        repo.get_scenario(engine=engine, ref="anything")
    assert PASSWORD not in str(exc.value) and "***" in str(exc.value)
    engine.dispose()


@pytest.mark.parametrize("text", [
    f"postgresql+psycopg://u:{PASSWORD}@db.example:notaport/x",  # make_url raises ValueError on the port
    f"::not a url::{PASSWORD}",
])
def test_a_malformed_url_is_never_echoed(text: str) -> None:
    with pytest.raises(StoreError) as exc:
        make_engine(text)
    assert PASSWORD not in str(exc.value) and "DATABASE_URL: not a database URL" in str(exc.value)
    assert PASSWORD not in display_url(text)
    assert display_url(f"postgresql+psycopg://u:{PASSWORD}@h/db") == "postgresql+psycopg://u:***@h/db"


def test_a_newer_database_names_its_revision_and_says_the_app_is_older(db_url: str,  # noqa: F811
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    upgrade(db_url)
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = :v"), {"v": FUTURE})
    assert FUTURE not in known_revisions()
    monkeypatch.setenv("DATABASE_URL", db_url)
    for run in (lambda: cli_main(["scenarios", "list"]), lambda: migrate_main(["upgrade"]),
                lambda: migrate_main(["downgrade", "base"])):
        err = _one_line(capsys, run())
        assert f"is at revision '{FUTURE}', which this app does not know" in err
        assert f"the app is older than the database (it knows revisions up to {head()})" in err
    with pytest.raises(StoreError, match="older than the database"):
        require_current(engine)
    assert current(engine) == FUTURE  # neither upgrade nor downgrade touched it
    assert {"scenarios", "probe_runs"} <= set(sa.inspect(engine).get_table_names())
    engine.dispose()


def test_migrate_to_an_unknown_revision_is_one_line_and_changes_nothing(db_url: str,  # noqa: F811
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    for argv in (["upgrade", "zzz"], ["downgrade", "zzz"], ["upgrade", "00"]):
        err = _one_line(capsys, migrate_main(argv))
        assert f"migrate: unknown revision {argv[1]!r} (known: {', '.join(known_revisions())}, head, base)" in err
    engine = make_engine(db_url)
    assert current(engine) is None
    assert migrate_main(["upgrade", "+1"]) == 0 and current(engine) == known_revisions()[0]  # relative still works
    assert migrate_main(["upgrade"]) == 0 and current(engine) == head()
    engine.dispose()


def test_database_errors_never_quote_sql_or_parameters(db_url: str) -> None:  # noqa: F811
    upgrade(db_url)
    engine = make_engine(db_url)
    with pytest.raises(StoreError) as exc, store_errors(engine.url), engine.connect() as conn:
        conn.execute(sa.text("SELECT secret_column FROM no_such_table WHERE x = :p"), {"p": "param-value"})
    message = str(exc.value)
    assert "SELECT" not in message and "param-value" not in message and "[SQL" not in message
    assert message.startswith(f"database {display_url(engine.url)}") and "\n" not in message
    if engine.dialect.name == "postgresql":  # a NUL that got past validation: DataError, still one line
        with pytest.raises(StoreError) as exc, store_errors(engine.url), engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO probe_runs (endpoint_url, settings, summary, started_at) "
                                 "VALUES (:u, '{}', '{}', now())"), {"u": "http://h/\x00"})
        assert "NUL" in str(exc.value) and "INSERT" not in str(exc.value)
    engine.dispose()


def test_store_errors_are_planner_errors() -> None:
    assert issubclass(StoreError, PlannerError)  # pages and the CLI catch PlannerError
