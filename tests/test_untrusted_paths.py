"""No untrusted scenario ever touches the filesystem; local files are read bounded.

A share token, an import, a query parameter or a stored payload whose ``model``
looks like a path gets one fixed message, whatever is (or is not) at that path,
and no file is opened while it is parsed.  Only the CLI, for a file its user
names, reads a config.json, and then only a regular file under the size cap.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import hashlib
import io
import json
import os
import pathlib
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from planner import Scenario
from planner.errors import CatalogError, ScenarioError
from planner.io.jsonfile import MAX_JSON_DEPTH, parse_json, read_json, read_text_file
from planner.spec.scenario import MODEL_PATH_MESSAGE, apply_overrides, scenario_from_dict
from planner.spec.share import scenario_from_token, share_token

ROOT = Path(__file__).resolve().parents[1]
HF_CONFIG = ROOT / "tests" / "data" / "hf" / "qwen3-30b-a3b.json"


class FileTouched(BaseException):
    """Raised by the patched file functions; a BaseException so no ``except
    Exception`` (nor pydantic, which turns AssertionError into a validation
    error) can swallow it."""


@contextlib.contextmanager
def no_file_access() -> Iterator[list[Any]]:
    """Fail with FileTouched if anything opens a file inside the block (every way
    Python opens one: builtins/io.open, os.open/fdopen, pathlib's readers)."""
    calls: list[Any] = []

    def boom(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[:1])
        raise FileTouched(f"a file was touched: {args[:1]!r}")

    with pytest.MonkeyPatch.context() as mp:
        for owner, name in [(builtins, "open"), (io, "open"), (os, "open"), (os, "fdopen"),
                            (pathlib.Path, "open"), (pathlib.Path, "read_text"), (pathlib.Path, "read_bytes")]:
            mp.setattr(owner, name, boom)
        yield calls


def forged_token(data: Any) -> str:
    """A token anyone can build: the format is checksummed, not keyed."""
    raw = json.dumps(data).encode()
    blob = b"R1" + hashlib.sha256(raw).digest()[:8] + zlib.compress(raw, 9)
    return base64.urlsafe_b64encode(blob).rstrip(b"=").decode("ascii")


@pytest.fixture()
def paths(tmp_path: Path) -> list[str]:
    """Paths of every kind: an existing valid config.json, a text file, a device,
    a FIFO, a directory, and ones that do not exist."""
    cfg = tmp_path / "config.json"
    cfg.write_text(HF_CONFIG.read_text())
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    return [str(cfg), "/etc/passwd", "/dev/zero", str(fifo), str(tmp_path), str(tmp_path / "missing.json"),
            "/nonexistent/config.json", "config.json", "../../etc/shadow", "C:\\models\\x", "x.json"]


def _warm_up() -> None:
    # Load the catalog and any lazily imported module before files are forbidden.
    scenario_from_token(share_token(Scenario()))
    with pytest.raises(ScenarioError):
        scenario_from_dict({"model": "/warm/up"})


def test_share_token_naming_a_file_gives_one_message_and_opens_nothing(paths: list[str]) -> None:
    _warm_up()
    messages = set()
    with no_file_access() as calls:
        for p in paths:
            with pytest.raises(ScenarioError) as exc:
                scenario_from_token(forged_token({"model": p}))
            messages.add(str(exc.value))
    assert calls == []
    assert messages == {f"share link: model: {MODEL_PATH_MESSAGE}"}
    assert "import the config.json first" in MODEL_PATH_MESSAGE


def test_untrusted_dicts_and_overrides_never_read_a_file(paths: list[str]) -> None:
    _warm_up()
    messages = set()
    with no_file_access() as calls:
        for p in paths:
            for data in ({"model": p}, apply_overrides({}, [f"model={p}"]), {"name": "x", "model": p}):
                with pytest.raises(ScenarioError) as exc:
                    scenario_from_dict(data)
                messages.add(str(exc.value))
            with pytest.raises(ValidationError):  # direct construction is just as safe
                Scenario(model=p)
            with pytest.raises(ValidationError):
                Scenario.model_validate_json(json.dumps({"model": p}))
    assert calls == []
    assert messages == {f"model: {MODEL_PATH_MESSAGE}"}


def test_inline_specs_and_catalog_ids_stay_allowed() -> None:
    local = scenario_from_dict({"model": str(HF_CONFIG)}, allow_local_files=True)
    assert not isinstance(local.model, str)  # the config became an inline spec
    _warm_up()
    with no_file_access() as calls:
        again = scenario_from_token(share_token(local))
        by_id = scenario_from_dict({"model": "llama-3.1-8b"})
    assert calls == []
    assert again == local and by_id.model == "llama-3.1-8b"


def test_a_local_user_may_name_a_config(tmp_path: Path) -> None:
    s = scenario_from_dict({"model": str(HF_CONFIG)}, allow_local_files=True)
    assert s.model.experts == 128  # type: ignore[union-attr]
    with pytest.raises(ScenarioError, match="No such file"):
        scenario_from_dict({"model": str(tmp_path / "nope.json")}, allow_local_files=True)
    with pytest.raises(ScenarioError, match="not a regular file"):
        scenario_from_dict({"model": "/dev/zero"}, allow_local_files=True)


# Bounded local reads ---------------------------------------------------------------------------

def test_read_refuses_devices_fifos_and_directories_before_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reads: list[Any] = []
    with pytest.MonkeyPatch.context() as mp:
        real = os.fdopen
        mp.setattr(os, "fdopen", lambda *a, **k: reads.append(a) or real(*a, **k))
        for path, needle in [("/dev/zero", "not a regular file"), (fifo, "not a regular file"),
                             (tmp_path, "a directory"), (tmp_path / "none", "No such file")]:
            with pytest.raises(ScenarioError, match=needle) as exc:
                read_json(path)
            assert str(path) in str(exc.value)
    assert reads == []  # no byte was read from any of them


def test_read_is_capped_by_size(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as fh:  # sparse: 9 MB on paper, nothing on disk
        fh.truncate(9_000_000)
    with pytest.raises(ScenarioError, match="over the limit of 8,000,000 bytes"):
        read_json(big)
    small = tmp_path / "small.txt"
    small.write_text("x" * 11)
    with pytest.raises(CatalogError, match="over the limit of 10 bytes"):
        read_text_file(small, max_bytes=10, error=CatalogError)
    assert read_text_file(small, max_bytes=11) == "x" * 11


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"name": "\xff\xfe"}', "not valid UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
        (b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1), "nested deeper"),
        (b'{"name": ' + b"9" * 5000 + b"}", "too many digits"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "expected a JSON object"),
    ],
)
def test_bad_json_is_one_error_naming_the_file(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(content)
    with pytest.raises(ScenarioError, match=needle) as exc:
        read_json(path)
    assert str(path) in str(exc.value)
    if needle != "expected a JSON object":  # parse_json takes any JSON value
        with pytest.raises(CatalogError, match=needle) as exc:
            parse_json(content, source="upload", error=CatalogError)
        assert str(exc.value).startswith("upload: ")


# Through the CLI, in a real process ---------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    # A read of /dev/zero or a FIFO would never end: the timeout turns that into a failure.
    return subprocess.run([sys.executable, "-m", "planner", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_cli_refuses_devices_fifos_and_directories(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, needle in [("/dev/zero", "not a regular file"), (str(fifo), "not a regular file"),
                           (str(tmp_path), "a directory")]:
        for args in (["plan", target], ["plan", "--set", f"model={target}"], ["simulate", "--trace", target],
                     ["validate", "--data", target]):
            out = run_cli(*args)
            assert out.returncode == 2, (args, out.stderr)
            assert needle in out.stderr and target in out.stderr, (args, out.stderr)
            assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr


def test_cli_reads_a_config_its_user_names() -> None:
    out = run_cli("plan", "--set", f"model={HF_CONFIG}")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["memory"]["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2


def test_cli_scenario_file_may_name_a_config(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"model": str(HF_CONFIG)}))
    out = run_cli("plan", str(path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["memory"]["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2
