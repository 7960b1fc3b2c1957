"""A probe run saved in the scenario store: every request's sample, never the key."""

from __future__ import annotations

import json

import pytest
from servers.procs import start_script
from sqlalchemy import text

from planner.cli import main
from planner.probe import PredictedLevel
from planner.store import get_probe_run, get_scenario, list_probe_runs
from planner.store.db import make_engine
from planner.store.migrate import upgrade

SECRET = "sk-test-7f3a9c0e51"


@pytest.fixture(scope="module")
def pacer():
    srv = start_script("pacing_server", "--ttft-s", "0.01", "--tpot-s", "0.004")
    yield srv
    srv.stop()


def test_probe_save_keeps_samples_and_never_the_key(pacer, tmp_path, monkeypatch, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("PROBE_KEY", SECRET)
    argv = ["probe", "--url", pacer.url, "--model", "p", "--api-key-env", "PROBE_KEY", "--concurrency", "1,2",
            "--requests", "5", "--output-tokens", "6", "--set", "gpu=h100-sxm", "--set", "model=llama-3.1-8b",
            "--calibrate", "--save", "--save-calibrated", "probe calibrated", "--format", "json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "saved calibrated scenario as probe-calibrated" in captured.err
    engine = make_engine(url)
    (listed,) = list_probe_runs(engine=engine)
    run = get_probe_run(engine=engine, run_id=listed.id)
    assert run.endpoint_url == pacer.url
    assert len(run.samples) == 2 * 5  # two levels of five measured requests (warm-ups excluded)
    assert all(s.ttft_s is not None and s.ttft_s > 0 for s in run.samples)
    assert [lv["concurrency"] for lv in run.summary["levels"]] == [1, 2]
    # the client's own figures are stored with each level, inside the run's summary
    for lv in run.summary["levels"]:
        assert lv["client"]["requested_concurrency"] == lv["concurrency"] and lv["client"]["workers"] == 1
        assert lv["client"]["loop_lag_samples"] > 0 and 0 <= lv["client"]["cpu_share"]
    # the stored prediction loads into the typed model and dumps back to the same JSON
    preds = [PredictedLevel.model_validate(p) for p in run.summary["predicted"]]
    assert [p.model_dump(mode="json") for p in preds] == run.summary["predicted"]
    assert [p.predicted.tpot_s for p in preds] == [lv["predicted"]["tpot_s"] for lv in run.summary["levels"]]
    assert run.summary["run_id"] == out["run_id"]
    stored = get_scenario(engine=engine, ref="probe-calibrated")
    assert stored.scenario.efficiency.calibrated_from == out["run_id"]
    # The key is in no table, no export and no output.
    with engine.connect() as conn:
        for table in ("probe_runs", "probe_samples", "scenarios", "scenario_revisions"):
            dump = json.dumps([list(map(str, row)) for row in conn.execute(text(f"SELECT * FROM {table}"))])
            assert SECRET not in dump, table
    assert SECRET not in captured.out and SECRET not in captured.err


def test_a_prediction_stored_as_a_dict_loads_into_the_typed_run() -> None:
    """Runs stored before the prediction was typed hold it as a plain dict: the same JSON."""
    from planner.probe import ProbeRun

    stored = {"predicted": {"batch_size": 2.0, "prompt_tokens": 8.0, "ttft_s": 0.02, "tpot_s": 0.005,
                            "e2e_s": 0.1, "output_tok_s": 160.0, "saturated": False}, "mbu": None, "mfu": 0.01}
    run = ProbeRun.model_validate({"run_id": "r", "url": "http://h", "model": "m", "endpoint": "completions",
                                   "pattern": "concurrency", "prompt_tokens": 8, "output_tokens": 4,
                                   "started_at": "2026-01-01T00:00:00+00:00", "levels": [], "predicted": [stored]})
    assert isinstance(run.predicted[0], PredictedLevel) and run.predicted[0].predicted.ttft_s == 0.02
    assert run.model_dump(mode="json")["predicted"] == [stored]
