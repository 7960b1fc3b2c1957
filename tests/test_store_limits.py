"""Store limits on a real SQLite file and the real PostgreSQL: every hostile value
(an overlong or NUL-bearing name, 100k tags, a slug with a trailing newline, an id
past 2^63) is one ScenarioError naming the field and its limit, and nothing is written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import overload

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from planner import Scenario, ScenarioError, store
from planner.cli import main
from planner.store import repository as repo
from planner.store.limits import (
    DESCRIPTION_MAX_CHARS,
    ID_MAX,
    IMPORT_MAX_BYTES,
    IMPORT_MAX_DEPTH,
    NAME_MAX_CHARS,
    REF_MAX_CHARS,
    SLUG_MAX_CHARS,
    TAG_MAX_CHARS,
    TAGS_MAX,
    check_tags,
    parse_import_bytes,
)
from planner.store.migrate import upgrade
from planner.store.models import ScenarioRevisionRow, ScenarioRow
from tests.store_support import db_url, engine  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]
BASE = Scenario(name="limits", gpu="h100-sxm", model="llama-3.1-8b")


def _counts(engine: sa.Engine) -> tuple[int, int]:  # noqa: F811
    with engine.connect() as conn:
        return tuple(int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())  # type: ignore[return-value]
                     for t in (ScenarioRow, ScenarioRevisionRow))


def _export(**fields: object) -> dict[str, object]:
    return {"kind": store.EXPORT_KIND, "schema_version": 1, "name": "imported", "scenario": {}, **fields}


HOSTILE_SAVES = [
    ({"name": "x" * (NAME_MAX_CHARS + 1)}, f"name: must be 1 to {NAME_MAX_CHARS} characters (got {NAME_MAX_CHARS + 1})"),
    ({"name": "a\x00b"}, "name: control character '\\x00' at position 1"),  # PostgreSQL refuses NUL in text
    ({"name": "two\nlines"}, "name: control character '\\n'"),
    ({"description": "d\x00"}, "description: control character '\\x00'"),
    ({"description": "x" * (DESCRIPTION_MAX_CHARS + 1)},
     f"description: {DESCRIPTION_MAX_CHARS + 1:,} characters; at most {DESCRIPTION_MAX_CHARS:,}"),
    ({"tags": [f"t{i}" for i in range(TAGS_MAX + 1)]}, f"tags: {TAGS_MAX + 1} given; at most {TAGS_MAX}"),
    ({"tags": ["x" * (TAG_MAX_CHARS + 1)]}, f"must be 1 to {TAG_MAX_CHARS} characters"),
    ({"tags": ["a\x00"]}, "tags: control character '\\x00'"),
    ({"slug": "abc\n"}, "slug: 'abc\\n' must be"),  # `^…$` with match() let this in
    ({"slug": "a" * (SLUG_MAX_CHARS + 1)}, f"must be 1-{SLUG_MAX_CHARS} lowercase"),
]


@pytest.mark.parametrize(("kwargs", "message"), HOSTILE_SAVES)
def test_save_refuses_with_the_field_and_limit_and_writes_nothing(engine: sa.Engine, kwargs: dict[str, object],  # noqa: F811
                                                                  message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        repo.save_scenario(engine=engine, scenario=BASE, **{"name": "ok", **kwargs})  # type: ignore[arg-type]
    assert _counts(engine) == (0, 0)


@pytest.mark.parametrize(("kwargs", "message"), HOSTILE_SAVES)
def test_import_refuses_the_same_and_writes_nothing(engine: sa.Engine, kwargs: dict[str, object],  # noqa: F811
                                                    message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        store.import_scenario(engine=engine, document=_export(**kwargs))
    assert _counts(engine) == (0, 0)


def test_a_nul_in_the_scenario_name_is_refused_not_a_database_error(engine: sa.Engine) -> None:  # noqa: F811
    with pytest.raises(ScenarioError, match="name: control character"):
        repo.save_scenario(engine=engine, scenario=Scenario(name="evil\x00name"))  # the name defaults to it
    stored = repo.save_scenario(engine=engine, scenario=BASE, name="fine")
    with pytest.raises(ScenarioError, match="name: control character"):
        repo.rename_scenario(engine=engine, ref=stored.slug, name="bad\x00", expected_version=1)
    with pytest.raises(ScenarioError, match="tags: control character"):
        repo.update_scenario(engine=engine, ref=stored.id, expected_version=1, tags=["x\x00"])
    assert repo.get_scenario(engine=engine, ref=stored.id).version == 1 and _counts(engine) == (1, 1)


def test_a_slug_with_a_newline_cannot_be_saved_shown_or_deleted(engine: sa.Engine) -> None:  # noqa: F811
    stored = repo.save_scenario(engine=engine, scenario=BASE, slug="abc")
    for ref in ("abc\n", "abc\r\n", " abc", "ABC"):
        with pytest.raises(ScenarioError, match="neither an id"):
            repo.get_scenario(engine=engine, ref=ref)
        with pytest.raises(ScenarioError, match="neither an id"):
            repo.delete_scenario(engine=engine, ref=ref)
    # A document carrying such a slug is refused whole (the old check accepted it, then no command could reach it).
    with pytest.raises(ScenarioError, match=re.escape("slug: 'abc\\n'")):
        store.import_scenario(engine=engine, document=_export(slug="abc\n"))
    assert repo.get_scenario(engine=engine, ref="abc") == stored and _counts(engine) == (1, 1)


@pytest.mark.parametrize(("ref", "message"), [
    ("²", "neither an id (digits 0-9) nor a slug"),  # "²".isdigit() is True; int("²") raised ValueError
    ("١٢", "neither an id"),  # Arabic-Indic digits: int() reads them, the store does not
    ("9" * 30, f"scenario id: {'9' * 30} is out of range (1 to {ID_MAX:,})"),
    (str(2**63), f"scenario id: {2**63} is out of range"),  # NumericValueOutOfRange / OverflowError before
    (2**63, f"scenario id: {2**63} is out of range"),
    pytest.param(2**20000, "an integer of about 6,021 digits is out of range", id="int-6021-digits"),  # str() raises
    ("0", "scenario id: 0 is out of range"),
    (-1, "scenario id: -1 is out of range"),
    ("x" * (REF_MAX_CHARS + 1), f"{REF_MAX_CHARS + 1:,} characters; a slug or id is at most {REF_MAX_CHARS}"),
    (True, "expected an id or a slug, got bool"),
])
def test_refs_out_of_range_or_malformed_are_one_error(engine: sa.Engine, ref: object, message: str) -> None:  # noqa: F811
    repo.save_scenario(engine=engine, scenario=BASE)
    for call in (repo.get_scenario, repo.list_revisions, store.export_scenario, repo.delete_scenario):
        with pytest.raises(ScenarioError, match=re.escape(message)):
            call(engine=engine, ref=ref)  # type: ignore[operator]
    assert _counts(engine) == (1, 1)


def test_versions_and_run_ids_out_of_range_are_one_error(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=BASE)
    huge = 2**63
    with pytest.raises(ScenarioError, match=f"expected_version: {huge} is out of range"):
        repo.update_scenario(engine=engine, ref=s.id, expected_version=huge, name="x")
    with pytest.raises(ScenarioError, match=f"expected_version: {huge} is out of range"):
        repo.delete_scenario(engine=engine, ref=s.id, expected_version=huge)
    with pytest.raises(ScenarioError, match=f"version: {huge} is out of range"):
        repo.restore_revision(engine=engine, ref=s.id, version=huge, expected_version=1)
    with pytest.raises(ScenarioError, match=f"version: {huge} is out of range"):
        repo.get_revision(engine=engine, ref=s.id, version=huge)
    with pytest.raises(ScenarioError, match=f"run id: {huge} is out of range"):
        store.get_probe_run(engine=engine, run_id=huge)
    with pytest.raises(ScenarioError, match="scenario id"):
        store.save_probe_run(engine=engine, endpoint_url="http://127.0.0.1:1/v1", settings={}, summary={},
                            started_at=datetime(2026, 1, 1, tzinfo=UTC), scenario_ref=huge)
    assert repo.get_scenario(engine=engine, ref=s.id).version == 1 and _counts(engine) == (1, 1)
    assert store.list_probe_runs(engine=engine) == []


def test_search_and_tag_filter_are_capped(engine: sa.Engine) -> None:  # noqa: F811
    repo.save_scenario(engine=engine, scenario=BASE, tags=["prod"])
    with pytest.raises(ScenarioError, match="query: control character"):
        repo.list_scenarios(engine=engine, query="a\x00")  # PostgreSQL would refuse the NUL in LIKE
    with pytest.raises(ScenarioError, match="query: 201 characters; at most 200"):
        repo.list_scenarios(engine=engine, query="q" * 201)
    with pytest.raises(ScenarioError, match="tag: control character"):
        repo.list_scenarios(engine=engine, tag="p\x00")
    assert [s.tags for s in repo.list_scenarios(engine=engine, tag="PROD")] == [("prod",)]


# ---------------------------------------------------------------- the tag check is linear


class CountingTags(Sequence[str]):
    """``n`` distinct tags that count how many were read."""

    def __init__(self, n: int) -> None:
        self.n, self.reads = n, 0

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        raise AssertionError("tags are iterated, never indexed")

    def __iter__(self) -> Iterator[str]:
        for i in range(self.n):
            self.reads += 1
            yield f"t{i}"


def test_a_hundred_thousand_tags_are_refused_before_one_is_read() -> None:
    tags = CountingTags(100_000)  # the old check compared every pair: minutes
    with pytest.raises(ScenarioError, match=f"tags: 100,000 given; at most {TAGS_MAX}"):
        check_tags(tags)
    assert tags.reads == 0


def test_tags_within_the_cap_are_read_once_each() -> None:
    tags = CountingTags(TAGS_MAX)
    assert len(check_tags(tags)) == TAGS_MAX and tags.reads == TAGS_MAX


TAG = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp"),
                                     exclude_characters=","), min_size=1, max_size=TAG_MAX_CHARS)


@given(st.lists(TAG, max_size=TAGS_MAX))
def test_tags_are_normalised_and_deduplicated_in_order(tags: list[str]) -> None:
    expected = list(dict.fromkeys(t.strip().lower() for t in tags))
    if any(not t or len(t) > TAG_MAX_CHARS for t in expected):  # lower() can lengthen a tag (e.g. "İ")
        with pytest.raises(ScenarioError, match="tags:"):
            check_tags(tags)
    else:
        assert check_tags(tags) == expected


def test_import_of_a_hundred_thousand_tags_writes_nothing(engine: sa.Engine) -> None:  # noqa: F811
    doc = _export(tags=[f"t{i}" for i in range(100_000)])
    with pytest.raises(ScenarioError, match="tags: 100,000 given"):
        store.import_scenario(engine=engine, document=doc)
    assert _counts(engine) == (0, 0)


# ---------------------------------------------------------------- import bytes


@pytest.mark.parametrize(("data", "message"), [
    (b" " * (IMPORT_MAX_BYTES + 1), f"over the {IMPORT_MAX_BYTES:,}-byte limit"),
    (b'{"name": "\xff\xfe"}', "not valid UTF-8 (byte 10)"),
    (b"[" * 100_000 + b"]" * 100_000, f"nested deeper than {IMPORT_MAX_DEPTH} levels"),
    (b"[" * (IMPORT_MAX_DEPTH + 1) + b"]" * (IMPORT_MAX_DEPTH + 1), f"nested deeper than {IMPORT_MAX_DEPTH} levels"),
    (b'{"name": ' + b"9" * 5000 + b"}", "an integer has too many digits"),
    (b"{not json", "not valid JSON (Expecting property name"),
])
def test_import_bytes_fail_as_one_error_naming_the_source(data: bytes, message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)) as exc:
        parse_import_bytes(data, source="'upload.json'")
    assert str(exc.value).startswith("import: 'upload.json'") and "\n" not in str(exc.value)


def test_import_bytes_at_the_limits_parse() -> None:
    doc = b'{"a": ' + b" " * (IMPORT_MAX_BYTES - 9) + b"1}"
    assert len(doc) == IMPORT_MAX_BYTES - 1 and parse_import_bytes(doc, source="x") == {"a": 1}
    nested = b"[" * IMPORT_MAX_DEPTH + b"]" * IMPORT_MAX_DEPTH
    assert parse_import_bytes(b"\xef\xbb\xbf" + nested, source="x") is not None  # a UTF-8 BOM is fine


# ---------------------------------------------------------------- the CLI: one line, exit 2


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["scenarios", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_hostile_refs_and_versions_are_one_line(db_url: str, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    upgrade(db_url)
    assert _cli(capsys, "save", "--name", "cli limits")[0] == 0
    for argv, needle in [
        (("show", "²"), "'²' is neither an id"),
        (("show", str(2**64)), f"scenario id: {2**64} is out of range"),
        (("delete", "cli-limits\n"), "neither an id"),
        (("restore", "cli-limits", str(2**63)), f"version: {2**63} is out of range"),
        (("update", "cli-limits", "--name", "x", "--expected-version", str(2**63)), "expected_version"),
        (("save", "--name", "nul\x01here"), "name: control character '\\x01'"),
        (("save", "--name", "ok", "--slug", "ok\n"), "slug: 'ok\\n'"),
        (("save", "--name", "ok", *[a for i in range(TAGS_MAX + 1) for a in ("--tag", f"t{i}")]),
         f"tags: {TAGS_MAX + 1} given"),
    ]:
        rc, out, err = _cli(capsys, *argv)
        assert (rc, out) == (2, ""), (argv, rc, out, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and needle in err, (argv, err)
    rc, out, _ = _cli(capsys, "list")
    assert rc == 0 and '"slug": "cli-limits"' in out and out.count('"slug"') == 1


def test_cli_import_refuses_devices_fifos_and_oversize_files_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    upgrade(f"sqlite:///{db}")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(IMPORT_MAX_BYTES * 4)  # sparse: nothing on disk
    env = {**os.environ, "RIDGELINE_DB": str(db)}
    env.pop("DATABASE_URL", None)
    for path, needle in [(fifo, "is not a regular file"), ("/dev/zero", "is not a regular file"),
                         (tmp_path, "is not a regular file"), (big, f"over the {IMPORT_MAX_BYTES:,}-byte limit"),
                         (tmp_path / "missing.json", "No such file or directory")]:
        # A read of the FIFO or /dev/zero would never end: the timeout makes that a failure, not a hang.
        proc = subprocess.run([sys.executable, "-m", "planner", "scenarios", "import", str(path)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stdout == "", (path, proc.stderr)
        assert proc.stderr.count("\n") == 1 and needle in proc.stderr and "Traceback" not in proc.stderr
