"""Repository operations against a real SQLite file and the real PostgreSQL."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
import yaml

from planner import ConflictError, ProbeError, Scenario, ScenarioError, get_gpu, get_model, plan, store
from planner.spec.catalog import catalog_dir
from planner.store import repository as repo
from planner.store.models import ScenarioRevisionRow, ScenarioRow
from tests.store_support import db_url, engine  # noqa: F401  (fixtures)

BASE = Scenario(name="Llama 8B on H100", gpu="h100-sxm", model="llama-3.1-8b")


def _tp(n: int) -> Scenario:
    return BASE.model_copy(update={"parallel": BASE.parallel.model_copy(update={"tp": n})})


def _count(engine: sa.Engine, table: type) -> int:  # noqa: F811
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_save_get_by_id_and_slug(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=BASE, description="baseline", tags=["Prod", "8b"])
    assert s.slug == "llama-8b-on-h100"
    assert s.version == 1 and s.schema_version == 1
    assert s.tags == ("prod", "8b")
    by_id = repo.get_scenario(engine=engine, ref=s.id)
    by_slug = repo.get_scenario(engine=engine, ref="llama-8b-on-h100")
    assert by_id == by_slug
    assert by_slug.scenario == BASE
    assert by_slug.description == "baseline"
    assert by_slug.created_at.tzinfo is not None
    # The catalog entries it used are frozen beside the inputs.
    assert by_slug.frozen_catalog is not None
    assert by_slug.frozen_catalog.gpu == get_gpu("h100-sxm")
    assert by_slug.frozen_catalog.model == get_model("llama-3.1-8b")
    assert by_slug.frozen_catalog.usd_per_gpu_hour == get_gpu("h100-sxm").usd_per_gpu_hour
    assert by_slug.catalog_drift() == ()
    with pytest.raises(ScenarioError, match="no saved scenario 'missing'"):
        repo.get_scenario(engine=engine, ref="missing")


def test_slugs_unique_and_validated(engine: sa.Engine) -> None:  # noqa: F811
    a = repo.save_scenario(engine=engine, scenario=BASE)
    b = repo.save_scenario(engine=engine, scenario=BASE)
    c = repo.save_scenario(engine=engine, scenario=BASE, slug="team-review")
    assert (a.slug, b.slug, c.slug) == ("llama-8b-on-h100", "llama-8b-on-h100-2", "team-review")
    with pytest.raises(ConflictError, match="slug: 'team-review' is taken"):
        repo.save_scenario(engine=engine, scenario=BASE, slug="team-review")
    with pytest.raises(ScenarioError, match="slug"):
        repo.save_scenario(engine=engine, scenario=BASE, slug="Not A Slug")
    with pytest.raises(ScenarioError, match="slug"):
        repo.save_scenario(engine=engine, scenario=BASE, slug="123")
    with pytest.raises(ScenarioError, match="name"):
        repo.save_scenario(engine=engine, scenario=BASE, name="   ")
    assert _count(engine, ScenarioRow) == 3


def test_list_and_search(engine: sa.Engine) -> None:  # noqa: F811
    repo.save_scenario(engine=engine, scenario=BASE, name="Llama 8B chat", tags=["prod"])
    repo.save_scenario(engine=engine, scenario=BASE, name="Llama 70B batch", tags=["batch", "prod"])
    repo.save_scenario(engine=engine, scenario=BASE, name="Qwen 100%_test", tags=["draft"])
    names = lambda items: sorted(i.name for i in items)  # noqa: E731
    assert len(repo.list_scenarios(engine=engine)) == 3
    assert names(repo.list_scenarios(engine=engine, query="LLAMA")) == ["Llama 70B batch", "Llama 8B chat"]
    assert names(repo.list_scenarios(engine=engine, tag="prod")) == ["Llama 70B batch", "Llama 8B chat"]
    assert names(repo.list_scenarios(engine=engine, query="llama", tag="batch")) == ["Llama 70B batch"]
    # LIKE wildcards in the query are literal.
    assert names(repo.list_scenarios(engine=engine, query="100%_")) == ["Qwen 100%_test"]
    assert repo.list_scenarios(engine=engine, query="q%t") == []  # would match as a LIKE pattern


def test_update_and_stale_version_conflict(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=_tp(1))
    s2 = repo.update_scenario(engine=engine, ref=s.slug, expected_version=1, scenario=_tp(2), tags=["x"])
    assert s2.version == 2 and s2.scenario.parallel.tp == 2 and s2.tags == ("x",)
    assert s2.updated_at >= s.updated_at and s2.created_at == s.created_at
    before_revs = _count(engine, ScenarioRevisionRow)
    with pytest.raises(ConflictError, match=r"you had version 1; the store has version 2.*nothing was saved"):
        repo.update_scenario(engine=engine, ref=s.slug, expected_version=1, scenario=_tp(4))
    after = repo.get_scenario(engine=engine, ref=s.slug)
    assert after.version == 2 and after.scenario.parallel.tp == 2
    assert _count(engine, ScenarioRevisionRow) == before_revs


def test_rename_keeps_slug_and_duplicate(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=_tp(2), tags=["t"])
    r = repo.rename_scenario(engine=engine, ref=s.id, name="Renamed", expected_version=1)
    assert (r.name, r.slug, r.version, r.scenario) == ("Renamed", s.slug, 2, _tp(2))
    with pytest.raises(ConflictError):
        repo.rename_scenario(engine=engine, ref=s.id, name="Again", expected_version=1)
    d = repo.duplicate_scenario(engine=engine, ref=s.slug)
    assert d.id != s.id and d.slug == "renamed-copy" and d.name == "Renamed (copy)" and d.version == 1
    assert d.scenario == r.scenario and d.frozen_catalog == r.frozen_catalog and d.tags == ("t",)
    # Independent: changing the copy leaves the original alone.
    repo.update_scenario(engine=engine, ref=d.id, expected_version=1, scenario=_tp(4))
    assert repo.get_scenario(engine=engine, ref=s.id).scenario.parallel.tp == 2


def test_delete(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=BASE)
    keep = repo.save_scenario(engine=engine, scenario=BASE)
    repo.update_scenario(engine=engine, ref=s.id, expected_version=1, scenario=_tp(2))
    with pytest.raises(ConflictError):
        repo.delete_scenario(engine=engine, ref=s.id, expected_version=1)
    assert repo.get_scenario(engine=engine, ref=s.id).version == 2
    repo.delete_scenario(engine=engine, ref=s.slug, expected_version=2)
    with pytest.raises(ScenarioError):
        repo.get_scenario(engine=engine, ref=s.id)
    with engine.connect() as conn:
        left = conn.execute(sa.select(ScenarioRevisionRow.scenario_id)).scalars().all()
    assert left == [keep.id]
    with pytest.raises(ScenarioError):
        repo.delete_scenario(engine=engine, ref=s.slug)


def test_history_and_restore_old_revision(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=_tp(1), name="History")
    repo.update_scenario(engine=engine, ref=s.id, expected_version=1, scenario=_tp(2))
    repo.update_scenario(engine=engine, ref=s.id, expected_version=2, scenario=_tp(4), name="History v3")
    revs = repo.list_revisions(engine=engine, ref=s.slug)
    assert [r.version for r in revs] == [3, 2, 1]
    assert [r.payload["parallel"]["tp"] for r in revs] == [4, 2, 1]
    assert [r.note for r in revs] == ["update", "update", "created"]
    with pytest.raises(ConflictError):
        repo.restore_revision(engine=engine, ref=s.id, version=1, expected_version=2)
    restored = repo.restore_revision(engine=engine, ref=s.id, version=1, expected_version=3)
    assert restored.version == 4 and restored.scenario == _tp(1) and restored.name == "History"
    revs = repo.list_revisions(engine=engine, ref=s.id)
    assert [r.version for r in revs] == [4, 3, 2, 1]
    assert revs[0].note == "restore of version 1" and revs[0].payload == revs[-1].payload
    with pytest.raises(ScenarioError, match="has no version 9"):
        repo.restore_revision(engine=engine, ref=s.id, version=9, expected_version=4)


def test_export_import_round_trip(engine: sa.Engine) -> None:  # noqa: F811
    src = Scenario(name="Inline", gpu=get_gpu("h200-sxm"), model="llama-3.1-70b", weights_dtype="fp8",
                   parallel={"tp": 2}, workload={"requests_per_s": 3.25})
    s = repo.save_scenario(engine=engine, scenario=src, description="d", tags=["a", "b"])
    doc = store.export_scenario(engine=engine, ref=s.slug)
    assert doc["kind"] == "ridgeline.scenario" and doc["schema_version"] == 1
    imported = store.import_scenario(engine=engine, document=doc)
    assert imported.slug == "inline-2"  # the exported slug is taken here
    assert imported.scenario == src and imported.frozen_catalog == s.frozen_catalog
    assert (imported.name, imported.description, imported.tags) == ("Inline", "d", ("a", "b"))
    named = store.import_scenario(engine=engine, document=doc, slug="from-file")
    assert named.slug == "from-file"


def test_import_version0_bare_scenario_is_upgraded(engine: sa.Engine) -> None:  # noqa: F811
    legacy = {"name": "old file", "gpu": "h100-sxm", "model": "llama-3.1-8b", "parallel": {"tp": 2}}
    s = store.import_scenario(engine=engine, document=legacy)
    assert s.name == "old file" and s.scenario.parallel.tp == 2 and s.frozen_catalog is not None


@pytest.mark.parametrize(("document", "message"), [
    ([1, 2], "expected a JSON object"),
    ({"kind": "ridgeline.scenario", "schema_version": 7, "name": "x", "scenario": {}}, "schema_version 7"),
    ({"kind": "ridgeline.scenario", "schema_version": "1", "name": "x", "scenario": {}}, "must be an integer"),
    ({"kind": "something.else", "schema_version": 1, "name": "x", "scenario": {}}, "not a Ridgeline"),
    ({"kind": "ridgeline.scenario", "schema_version": 1, "name": "x"}, "scenario"),
    ({"kind": "ridgeline.scenario", "schema_version": 1, "name": "x", "scenario": {"parallel": {"tp": 0}}},
     "parallel.tp"),
    ({"kind": "ridgeline.scenario", "schema_version": 1, "name": "x", "scenario": {},
      "frozen_catalog": {"gpu": "nope"}}, "frozen_catalog"),
    ({"gpu": "no-such-gpu"}, "gpu"),
    ({"bogus_field": 1}, "bogus_field: unknown key"),
])
def test_import_rejects_malformed_and_writes_nothing(engine: sa.Engine, document: object,  # noqa: F811
                                                     message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        store.import_scenario(engine=engine, document=document)
    assert _count(engine, ScenarioRow) == 0 and _count(engine, ScenarioRevisionRow) == 0


def test_frozen_catalog_reproduces_plan_after_catalog_change(engine: sa.Engine, tmp_path,  # noqa: F811
                                                             monkeypatch) -> None:
    scenario = Scenario(gpu="h100-sxm", model="llama-3.1-8b")
    before = plan(scenario).to_json_dict()
    s = repo.save_scenario(engine=engine, scenario=scenario, name="frozen")
    # A new catalog where the H100's bandwidth and price changed.
    new_dir = tmp_path / "catalog"
    shutil.copytree(catalog_dir(), new_dir)
    gpus = yaml.safe_load((new_dir / "gpus.yaml").read_text())
    for entry in gpus:
        if entry["id"] == "h100-sxm":
            old_bw = entry["hbm_bytes_per_s"]
            entry["hbm_bytes_per_s"] = float(old_bw) / 2  # YAML 1.1 reads 3.35e12 as text
            entry["usd_per_gpu_hour"] = float(entry["usd_per_gpu_hour"]) + 0.5  # still within its quotes
    (new_dir / "gpus.yaml").write_text(yaml.safe_dump(gpus))
    monkeypatch.setenv("RIDGELINE_CATALOG_DIR", str(new_dir))
    stored = repo.get_scenario(engine=engine, ref=s.slug)
    drift = stored.catalog_drift()
    assert any(line.startswith("gpu.hbm_bytes_per_s:") for line in drift), drift
    assert any(line.startswith("gpu.usd_per_gpu_hour:") for line in drift), drift
    assert repo.drift(engine=engine, ref=s.id) == drift
    assert plan(stored.scenario).to_json_dict()["decode"] != before["decode"]  # the catalog did change
    frozen_plan = plan(stored.frozen_scenario()).to_json_dict()
    assert frozen_plan["decode"] == before["decode"] and frozen_plan["ttft_s"] == before["ttft_s"]


def test_probe_runs_store_no_credentials(engine: sa.Engine) -> None:  # noqa: F811
    s = repo.save_scenario(engine=engine, scenario=BASE)
    t0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    samples = [store.ProbeSample(seq=i, started_at=t0 + timedelta(seconds=i), ttft_s=0.01 * (i + 1), e2e_s=0.5,
                                prompt_tokens=100, output_tokens=20, data={"itl_s": [0.01, 0.02]})
               for i in range(3)]
    run_id = store.save_probe_run(engine=engine, endpoint_url="http://127.0.0.1:8080/v1", settings={"streams": 8},
                                 summary={"ttft_s_p50": 0.02}, started_at=t0, finished_at=t0 + timedelta(seconds=5),
                                 samples=samples, scenario_ref=s.slug)
    run = store.get_probe_run(engine=engine, run_id=run_id)
    assert run.samples == tuple(samples) and run.scenario_id == s.id and run.started_at == t0
    assert [r.id for r in store.list_probe_runs(engine=engine, scenario_ref=s.id)] == [run_id]
    for bad in ({"api_key": "sk-1"}, {"headers": {"Authorization": "Bearer x"}}):
        with pytest.raises(ProbeError, match="never stored"):
            store.save_probe_run(engine=engine, endpoint_url="http://h/v1", settings=bad, summary={}, started_at=t0)
    with pytest.raises(ProbeError, match="user:password"):
        store.save_probe_run(engine=engine, endpoint_url="http://u:p@h/v1", settings={}, summary={}, started_at=t0)
    assert len(store.list_probe_runs(engine=engine)) == 1
    columns = [c["name"] for t in ("probe_runs", "probe_samples") for c in sa.inspect(engine).get_columns(t)]
    assert not [c for c in columns if "key" in c or "token" in c.replace("_tokens", "")]
    repo.delete_scenario(engine=engine, ref=s.id)
    assert store.get_probe_run(engine=engine, run_id=run_id).scenario_id is None
