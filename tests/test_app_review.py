"""AppTest of the review as a reviewer does it: readable numbers on every page, the
Plan page's answer first, a link that is the state, revisions, Compare, and the
Tail page keeping the promise Fleet & cost makes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from planner import Scenario, compare_columns, gpu_variants, plan
from planner.store import get_scenario, list_revisions, make_engine, save_scenario, update_scenario
from tests.apptest_v2 import new_app_test, use_migrated_sqlite

PAGES = ["plan", "roofline", "memory", "latency", "parallelism", "fleet", "tail", "compare", "explore", "scenarios",
         "catalog"]
INFEASIBLE = {"ttft_ms": "1", "itl_ms": "1"}  # no layout meets 1 ms TTFT and ITL
# The review: Llama-3.1-70B at 50 req/s, 2,000/300 tokens, TTFT ≤ 1 s, ITL ≤ 50 ms, FP8, H200 TP2.
REVIEW = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "wd": "fp8", "tp": "2", "mode": "disaggregated", "rps": "50",
          "output": "300"}
NOT_A_NUMBER = re.compile(r"(?i)(?<![\w-])(nan|-?inf(inity)?)(?![\w-])")
SCIENTIFIC = re.compile(r"\d\.?\d*[eE][+-]\d")
# A metric value that is a bare decimal number (a unit is missing), e.g. "189.9414" or "0.04".
BARE_DECIMAL = re.compile(r"^-?[\d,]*\.\d+$")
# Metric labels whose unit is in the label ("tok/s per sequence") or that count things.
UNIT_IN_LABEL = re.compile(r"tok/s|req/s|\(ms\)|\(%\)|sequences|\$")


@pytest.fixture(autouse=True)
def store_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_migrated_sqlite(tmp_path, monkeypatch)


def _open(params: dict[str, str], page: str = "plan") -> AppTest:
    at = new_app_test()
    at.query_params.update(params)
    at.run()
    if page != "plan":
        at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def visible_text(at: AppTest) -> str:
    """What a visitor reads: titles, text, captions, messages, metrics (label, value and
    help), expander and widget labels with the widgets' values, and every table cell."""
    out: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "error", "warning", "info", "success",
                 "exception", "code"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [f"{m.label}: {m.value} ({m.proto.help})" for m in at.metric]
    out += [e.label for e in at.expander]
    for kind in ("number_input", "selectbox", "text_input", "multiselect", "toggle", "radio", "button"):
        out += [f"{w.label}: {getattr(w, 'value', '')}" for w in getattr(at, kind)]
    out += [t.value.to_csv(na_rep="") for t in at.table]
    out += [d.value.to_csv(na_rep="") for d in at.dataframe]
    return "\n".join(out)


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("case", ["default", "infeasible"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_reads_as_numbers_with_units(page: str, case: str) -> None:
    at = _open(INFEASIBLE if case == "infeasible" else {}, page)
    text = visible_text(at)
    assert "Traceback" not in text
    assert not NOT_A_NUMBER.search(text), NOT_A_NUMBER.findall(text)[:5]
    assert not SCIENTIFIC.search(text), SCIENTIFIC.findall(text)[:5]
    for m in at.metric:
        assert not BARE_DECIMAL.match(m.value) or UNIT_IN_LABEL.search(m.label), (m.label, m.value)


def test_the_plan_page_leads_with_gpus_replicas_cost_and_the_slo_check() -> None:
    at = _open(REVIEW)
    s = Scenario(model="llama-3.1-70b", gpu="h200-sxm", weights_dtype="fp8", parallel={"tp": 2},
                 serving={"mode": "disaggregated"}, workload={"requests_per_s": 50, "output_tokens": 300})
    p = plan(s)
    first = [m.label for m in at.metric][:4]
    assert first == ["GPUs", "Replicas (prefill + decode)", "$/Mtok output", "SLO"]
    assert _metric(at, "GPUs") == f"{p.fleet.gpus_total:,.0f}"
    assert _metric(at, "Replicas (prefill + decode)") == f"{p.fleet.prefill_replicas:.0f} + {p.fleet.decode_replicas:.0f}"
    assert _metric(at, "$/Mtok output") == f"${p.cost.usd_per_mtok_output:.2f}"
    assert _metric(at, "SLO") == "met"
    checks = next(md.value for md in at.markdown if "TTFT p90 · queueing included" in md.value)
    # The two percentiles beside their targets, and the verdict they feed: the share of requests meeting both.
    assert "TPOT p90 · no queueing" in checks and "Requests meeting both targets (analytic)" in checks
    assert "pass" in checks and "fail" not in checks
    assert any("Simulated check" in s.value and "meets the 90%" in s.value for s in at.success)


def test_an_infeasible_plan_says_why_instead_of_a_number() -> None:
    at = _open(INFEASIBLE)
    assert _metric(at, "GPUs") == "—" and _metric(at, "SLO") == "—"
    assert any("No operating point meets the SLO" in e.value for e in at.error)


def test_a_billion_requests_per_second_is_a_warning_in_plain_numbers() -> None:
    at = _open({"rps": "1e9"})
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "largest GPU cluster" in warnings[0] and "1,000,000,000 req/s" in warnings[0]
    assert not SCIENTIFIC.search(visible_text(at)), SCIENTIFIC.findall(visible_text(at))[:5]


def test_a_link_after_a_page_switch_and_a_change_reopens_the_same_scenario() -> None:
    at = _open({})
    at.selectbox(key="model").set_value("llama-3.1-70b").run()
    at.selectbox(key="gpu").set_value("h200-sxm").run()
    at.selectbox(key="wd").set_value("fp8").run()
    at.query_params.clear()  # a browser's sidebar navigation drops the query string
    at.switch_page("pages/fleet.py").run()
    at.number_input(key="rps").set_value(60.0).run()
    link = dict(at.query_params)
    assert {"model", "gpu", "wd", "rps"} <= set(link)
    shared = next(c.value for c in at.code)  # the sidebar's "Share this view" (st.code has a copy button)
    assert shared.endswith("?" + "&".join(f"{k}={v}" for k, v in link.items()))
    gpus = _metric(at, "GPUs total")
    fresh = _open(link, "fleet")
    assert fresh.session_state["_scenario"] == at.session_state["_scenario"]
    assert _metric(fresh, "GPUs total") == gpus


def test_unknown_link_values_are_reported() -> None:
    at = _open({"gpu": "notagpu", "foo": "1", "rps": "12"})
    warnings = [w.value for w in at.warning]
    assert any("`gpu`" in w and "`notagpu` is not one of the choices" in w for w in warnings)
    assert any("`foo` is not a Ridgeline setting" in w for w in warnings)
    assert at.number_input(key="rps").value == 12.0  # the valid one applies


def _saved(store_db: Path) -> Any:
    engine = make_engine(f"sqlite:///{store_db}")
    stored = save_scenario(engine=engine, scenario=Scenario(gpu="h200-sxm", model="llama-3.1-70b", weights_dtype="fp8",
                                                            parallel={"tp": 2}), name="70B review")
    return engine, stored


def test_a_saved_scenario_keeps_its_link_and_banner_until_edited(store_db: Path) -> None:
    _engine, stored = _saved(store_db)
    at = _open({"scenario": stored.slug})
    assert at.query_params == {"scenario": stored.slug}
    assert any("70B review" in i.value and "version 1" in i.value for i in at.info)
    at.switch_page("pages/fleet.py").run()
    assert at.query_params == {"scenario": stored.slug}
    at.number_input(key="rps").set_value(20.0).run()
    assert at.query_params.get("rps") == "20" and "scenario" not in at.query_params
    assert any("edited since it was loaded" in i.value for i in at.info)


def test_save_an_existing_name_asks_update_or_copy_and_history_diffs_and_restores(store_db: Path) -> None:
    engine, stored = _saved(store_db)
    at = _open({"scenario": stored.slug}, "scenarios")
    at.number_input(key="rps").set_value(25.0).run()
    assert at.text_input(key="sc_name").value == "70B review"
    assert any("Update it (a new revision" in w.value for w in at.warning)
    at.button(key="sc_update").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    now = get_scenario(engine=engine, ref=stored.slug)
    assert now.version == 2 and now.scenario.workload.requests_per_s == 25.0
    assert at.query_params == {"scenario": stored.slug}  # the sidebar holds version 2 now
    assert any("version 2" in i.value for i in at.info)
    at.button(key="sc_copy").click().run()
    copies = [r for r in list_revisions(engine=engine, ref=f"{stored.slug}-2")]
    assert len(copies) == 1 and copies[0].version == 1
    at.selectbox(key="sc_pick").set_value(stored.slug).run()
    assert any(e.label == "History (2 versions)" for e in at.expander)
    diff = at.table[-1].value
    assert list(diff.columns) == ["field", "version 1", "version 2"]
    row = diff.set_index("field").loc["Requests/s (mean)"]
    assert (row["version 1"], row["version 2"]) == ("10 req/s", "25 req/s")
    at.selectbox(key="sc_rev").set_value(1).run()
    at.button(key="sc_restore").click().run()
    restored = get_scenario(engine=engine, ref=stored.slug)
    assert restored.version == 3 and restored.scenario.workload.requests_per_s == 10.0


def test_one_version_is_singular(store_db: Path) -> None:
    _engine, stored = _saved(store_db)
    at = _open({}, "scenarios")
    at.selectbox(key="sc_pick").set_value(stored.slug).run()
    assert any(e.label == "History (1 version)" for e in at.expander)


def test_two_people_updating_get_a_clear_conflict_and_no_lost_revision(store_db: Path) -> None:
    engine, stored = _saved(store_db)
    at = _open({"scenario": stored.slug}, "scenarios")  # this person loaded version 1
    update_scenario(engine=engine, ref=stored.slug, expected_version=1,
                    scenario=stored.scenario.model_copy(update={"name": "someone else"}), note="other person")
    at.number_input(key="rps").set_value(30.0).run()
    at.button(key="sc_update").click().run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "someone else saved this scenario since you loaded it" in errors[0]
    assert "you had version 1" in errors[0] and "Save as a copy" in errors[0]
    assert [r.version for r in list_revisions(engine=engine, ref=stored.slug)] == [2, 1]


def test_compare_h100_vs_h200_is_the_page_and_one_click() -> None:
    at = _open({"model": "llama-3.1-70b", "wd": "fp8", "rps": "50", "output": "300", "gpu": "b200"}, "compare")
    at.button(key="cmp_pair_h100-sxm_h200-sxm").click().run()
    assert not at.exception
    table = at.table[0].value
    s = Scenario(model="llama-3.1-70b", weights_dtype="fp8", gpu="b200",
                 workload={"requests_per_s": 50, "output_tokens": 300})
    from planner.simulate.referee import simulated_attainment

    cols = compare_columns(gpu_variants(s, ["h100-sxm", "h200-sxm"], referee=simulated_attainment),
                           referee=simulated_attainment)
    assert list(table.columns) == [c.label for c in cols]
    for c in cols:
        assert table.loc["GPUs", c.label] == f"{c.gpus_total:,.0f}"
        assert table.loc["Verdict", c.label] == c.verdict
    assert {"TTFT p90 · queueing included (target 1.00 s)", "TPOT p90 per request · no queueing (target 50.0 ms)",
            "KV headroom at the batch", "$/Mtok output"} <= set(table.index)
    assert len(at.get("vega_lite_chart")) == 1


def test_the_tail_page_on_the_recommended_fleet_keeps_the_fleet_pages_promise() -> None:
    fleet = _open(REVIEW, "fleet")
    promise = next(s.value for s in fleet.success if "Simulated check" in s.value and " prefill + " in s.value)
    target = float(re.search(r"the (\d+)% the SLO asks", promise).group(1)) / 100
    want = plan(Scenario(model="llama-3.1-70b", gpu="h200-sxm", weights_dtype="fp8", parallel={"tp": 2},
                         serving={"mode": "disaggregated"}, workload={"requests_per_s": 50, "output_tokens": 300}))
    pools = f"{want.fleet.prefill_replicas:.0f} prefill + {want.fleet.decode_replicas:.0f} decode"
    tail = _open(REVIEW, "tail")
    assert any(f"the plan's fleet: {pools} at 50 req/s" in c.value for c in tail.caption)
    attained = float(_metric(tail, "Requests meeting both targets").rstrip("%")) / 100
    assert attained >= target
    assert _metric(tail, "Plan's 90%") == "met"
