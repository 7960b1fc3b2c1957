"""The view-layer helpers behind the review pages: number formatting, the link state,
revision diffs, label spacing, the plan's fleet in the simulator, comparisons, the
CSV's units row, plausibility warnings and uploaded traces."""

from __future__ import annotations

import csv
import io
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from planner import (
    Scenario,
    ScenarioError,
    SweepRow,
    compare_columns,
    csv_text,
    gpu_variants,
    human,
    link_params,
    parse_link,
    plan,
    plan_row,
    plausibility_warnings,
    readable,
    review_csv_text,
    revision_changes,
    room_for_labels,
    scenario_data,
    scenario_from_dict,
    sig3,
    sweep,
    sweep_result,
    sweep_row_scenario,
    trace_from_upload,
    widget_values,
)
from planner.simulate import PLAN_ATTAINMENT_TARGET, fleet_sim
from planner.simulate.fleetcheck import CHECK_MAX_REPLICAS, CHECK_MAX_REQUESTS, describe_knee
from planner.views.inputs import TRACE_MAX_BYTES, TRACE_MAX_ROWS
from tests.strategies import gpu_ids

CHOICES = {"gpu": ["h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb"], "model": ["llama-3.1-8b", "llama-3.1-70b"],
           "wd": ["bf16", "fp8"], "kd": ["bf16", "fp8"], "tp": [1, 2, 4, 8], "pp": [1, 2], "ep": [1],
           "mode": ["colocated", "disaggregated"], "dist": ["fixed", "lognormal", "trace"], "link": ["rdma", "nvlink"]}
SCIENTIFIC = r"\d[eE][+-]?\d"
MOE = {"mixtral-8x7b", "qwen3-30b-a3b"}
SWEEP_PLAN = settings(max_examples=10, deadline=None)


@pytest.mark.parametrize(("value", "unit", "text"), [
    (0.03820, "s", "38.2 ms"),        # ITL: milliseconds below a second
    (8.03026, "s", "8.03 s"),         # "Cold start 8,030.26 ms" was the bug
    (0.71335, "s", "713 ms"),
    (70.55e9, "bytes", "70.5 GB"),    # three significant figures, SI prefix
    (327_680, "bytes", "328 kB"),     # 2 × 80 × 8 × 128 × 2 bytes
    (4.8e12, "bytes/s", "4.80 TB/s"),
    (1979e12, "FLOP/s", "1.98 PFLOP/s"),
    (0.04, "fraction", "4.00%"),      # attainment as %, never "0.04"
    (2.0712, "USD", "$2.07"),
    (112.0, "USD", "$112"),
    (6204.3, "tok/s", "6,204 tok/s"),  # thousands separator
    (32.0, "GPUs", "32 GPUs"),
    (float("nan"), "s", "—"),
    (float("inf"), "USD", "—"),
])
def test_human_three_significant_figures_with_the_unit(value: float, unit: str, text: str) -> None:
    assert human(value, unit) == text


@given(hs.floats(min_value=1e-9, max_value=1e15, allow_nan=False))
def test_sig3_never_writes_scientific_notation(x: float) -> None:
    text = sig3(x)
    assert "e" not in text.lower()
    assert float(text.replace(",", "")) == pytest.approx(x, rel=5e-3, abs=5e-12)


def test_readable_rewrites_scientific_notation_with_si_prefixes() -> None:
    # What a derivation substituted: 7.055e+10 bytes of weights over 3.35e+12 bytes/s.
    assert readable("7.055e+10 / 3.35e+12 + 1e+09") == "70.5 G / 3.35 T + 1.00 G"
    assert readable("× 3600 / 1e6", powers_of_ten=True) == "× 3600 / 10⁶"
    assert readable("h100-sxm 2e3x") == "h100-sxm 2e3x"  # not a number on its own


@settings(max_examples=40, deadline=None)
@given(gpu=hs.sampled_from(CHOICES["gpu"]), model=hs.sampled_from(CHOICES["model"]),
       wd=hs.sampled_from(["bf16", "fp8"]), tp=hs.sampled_from([1, 2, 4, 8]), mode=hs.sampled_from(CHOICES["mode"]),
       rps=hs.floats(min_value=0.1, max_value=5000), ttft=hs.floats(min_value=0.05, max_value=30),
       target=hs.floats(min_value=0.05, max_value=1.0), draft=hs.integers(0, 8))
def test_a_link_round_trips_the_scenario(gpu: str, model: str, wd: str, tp: int, mode: str, rps: float, ttft: float,
                                         target: float, draft: int) -> None:
    scenario = scenario_from_dict({"gpu": gpu, "model": model, "weights_dtype": wd, "parallel": {"tp": tp},
                                   "serving": {"mode": mode}, "workload": {"requests_per_s": rps},
                                   "slo": {"ttft_s": ttft}, "fleet": {"target_utilization": target},
                                   "speculative": {"draft_tokens": draft}})
    defaults = widget_values(Scenario())
    params = link_params(widget_values(scenario), defaults)
    values, problems = parse_link({k: [v] for k, v in params.items()}, CHOICES)
    assert problems == []
    again = scenario_from_dict(scenario_data({**defaults, **values}))
    _same(again, scenario)


def _same(a: Scenario, b: Scenario) -> None:
    """Every field of ``a`` equals ``b``'s, numbers to 12 significant digits (the link holds ms and %)."""
    da, db = a.model_dump(), b.model_dump()

    def same(x: object, y: object) -> bool:
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-12)
        return x == y

    assert same(da, db), (da, db)


def test_link_params_hold_only_what_differs_from_the_defaults() -> None:
    s = Scenario(model="llama-3.1-70b", workload={"requests_per_s": 60.0})
    assert link_params(widget_values(s), widget_values(Scenario())) == {"model": "llama-3.1-70b", "rps": "60"}


@pytest.mark.parametrize(("params", "needle"), [
    ({"gpu": ["notagpu"]}, "`notagpu` is not one of the choices"),
    ({"foo": ["1"]}, "`foo` is not a Ridgeline setting"),
    ({"rps": ["1e400"]}, "is not a finite number"),
    ({"prompt": ["2000.5"]}, "is not a whole number"),
    ({"batch": ["-1"]}, "is below the minimum 0"),
    ({"name": ["x" * 201]}, "longer than 200 characters"),
])
def test_unknown_link_values_are_reported_not_ignored(params: dict[str, list[str]], needle: str) -> None:
    values, problems = parse_link(params, CHOICES)
    assert values == {} and len(problems) == 1 and needle in problems[0]


def test_revision_changes_name_each_changed_field_with_units() -> None:
    old = {"name": "review", "description": "", "tags": ["a"],
           "payload": Scenario(workload={"requests_per_s": 50.0}).model_dump(mode="json")}
    new = {"name": "review", "description": "v2", "tags": ["a"],
           "payload": Scenario(gpu="h200-sxm", workload={"requests_per_s": 60.0}).model_dump(mode="json")}
    changes = {c.key: (c.label, c.old, c.new) for c in revision_changes(old, new)}
    assert changes == {"gpu": ("GPU", "h100-sxm", "h200-sxm"),
                       "workload.requests_per_s": ("Requests/s (mean)", "50 req/s", "60 req/s"),
                       "description": ("Description", "", "v2")}
    assert revision_changes(old, old) == []


@given(hs.lists(hs.tuples(hs.floats(0, 1), hs.floats(0, 1)), min_size=1, max_size=40))
def test_kept_labels_never_overlap(points: list[tuple[float, float]]) -> None:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    keep = room_for_labels(xs, ys, x_domain=(0, 1), y_domain=(0, 1), min_dx=0.1, min_dy=0.05)
    assert keep[0]  # the first (most important) point always has room
    kept = [p for p, k in zip(points, keep, strict=True) if k]
    for i, a in enumerate(kept):
        for b in kept[i + 1:]:
            assert abs(a[0] - b[0]) >= 0.1 or abs(a[1] - b[1]) >= 0.05


REVIEW = Scenario(model="llama-3.1-70b", gpu="h200-sxm", weights_dtype="fp8", parallel={"tp": 2},
                  serving={"mode": "disaggregated"}, workload={"requests_per_s": 50, "output_tokens": 300})


def test_the_simulator_gets_the_plans_pools_at_the_peak_rate() -> None:
    p = plan(REVIEW)
    fs = fleet_sim(p, REVIEW)
    assert fs is not None and not fs.sliced
    assert (fs.options.prefill_replicas, fs.options.decode_replicas) == (p.fleet.prefill_replicas, p.fleet.decode_replicas)
    assert fs.options.rate_req_s == REVIEW.workload.peak_rate
    assert fs.options.max_batch == p.operating_point.batch_size
    assert fs.steady and fs.options.requests / fs.rate_req_s >= 3 * fs.planned_e2e_s * 0.99


@settings(max_examples=25, deadline=None)
@given(rps=hs.floats(min_value=1, max_value=2000), mode=hs.sampled_from(["colocated", "disaggregated"]))
def test_a_slice_keeps_each_pools_load_per_replica_and_the_caps(rps: float, mode: str) -> None:
    s = Scenario(workload={"requests_per_s": rps}, serving={"mode": mode})
    p = plan(s)
    fs = fleet_sim(p, s, max_replicas=CHECK_MAX_REPLICAS, max_requests=CHECK_MAX_REQUESTS)
    assert fs is not None
    sim_total = fs.replicas + fs.prefill_replicas + fs.decode_replicas
    assert sim_total <= max(CHECK_MAX_REPLICAS, 2) and fs.options.requests <= CHECK_MAX_REQUESTS
    if mode == "colocated":
        assert fs.rate_req_s / fs.replicas == pytest.approx(rps / p.fleet.replicas)
    else:  # no pool is busier per replica than in the full fleet; the busier one exactly as busy
        per_pre, per_dec = fs.rate_req_s / fs.prefill_replicas, fs.rate_req_s / fs.decode_replicas
        full_pre, full_dec = rps / p.fleet.prefill_replicas, rps / p.fleet.decode_replicas
        assert per_pre <= full_pre * (1 + 1e-9) and per_dec <= full_dec * (1 + 1e-9)
        assert per_pre == pytest.approx(full_pre) or per_dec == pytest.approx(full_dec)


def test_an_infeasible_plan_has_no_fleet_to_simulate() -> None:
    s = Scenario(slo={"ttft_s": 0.001, "itl_s": 0.001})
    assert fleet_sim(plan(s), s) is None


def test_the_knee_is_never_silently_the_top_of_the_grid() -> None:
    rates = (1.0, 2.0, 4.0)
    assert describe_knee(rates=rates, knee=4.0, target=PLAN_ATTAINMENT_TARGET).startswith("above 4 req/s")
    assert describe_knee(rates=rates, knee=None, target=PLAN_ATTAINMENT_TARGET).startswith("below 1 req/s")
    assert describe_knee(rates=rates, knee=2.0, target=PLAN_ATTAINMENT_TARGET).startswith("2 req/s")


def test_h100_vs_h200_each_in_its_cheapest_layout() -> None:
    cols = compare_columns(gpu_variants(REVIEW, ["h100-sxm", "h200-sxm"]))
    assert [c.scenario.gpu for c in cols] == ["h100-sxm", "h200-sxm"]
    for c in cols:
        assert c.gpus_total == plan(c.scenario).fleet.gpus_total
        assert c.meets_slo and 0 <= c.kv_headroom < 1
    cheapest = min(cols, key=lambda c: c.usd_per_mtok_output)
    assert cheapest.verdict == "cheapest that meets the SLO"  # no referee given: the analytic pick, unannotated
    other = next(c for c in cols if c is not cheapest)
    assert other.verdict.startswith("meets the SLO, +")


def test_a_price_typed_for_one_gpu_is_not_charged_for_another() -> None:
    priced = REVIEW.model_copy(update={"cost": REVIEW.cost.model_copy(update={"usd_per_gpu_hour": 9.0})})
    h200, h100 = (sc for _, sc in gpu_variants(priced, ["h200-sxm", "h100-sxm"], keep_layout=True))
    assert h200.cost.usd_per_gpu_hour == 9.0 and h100.cost.usd_per_gpu_hour is None


def test_compare_takes_two_to_four_options() -> None:
    with pytest.raises(ScenarioError, match="2 to 4"):
        compare_columns([("one", REVIEW)])


def test_the_plan_csv_names_the_scenario_and_has_a_units_row() -> None:
    s = REVIEW.model_copy(update={"name": "70B review"})
    rows = list(csv.reader(io.StringIO(review_csv_text(plan_row(s, plan(s).to_json_dict())))))
    header, units, values = rows
    assert header[0] == "scenario.name" and values[0] == "70B review" and units[0] == "units:"
    unit = dict(zip(header, units, strict=True))
    assert unit["decode.step_s"] == "s" and unit["memory.weight_bytes"] == "bytes"
    assert unit["cost.usd_per_mtok_output"] == "USD/Mtok" and unit["fleet.gpus_total"] == "GPUs"
    assert unit["scenario.workload.requests_per_s"] == "requests/s"


def test_a_billion_requests_per_second_is_a_warning() -> None:
    s = Scenario(workload={"requests_per_s": 1e9})
    warnings = plausibility_warnings(s, plan(s))
    assert len(warnings) == 1 and "largest GPU cluster" in warnings[0]
    assert plausibility_warnings(Scenario(), plan(Scenario())) == []


def test_an_uploaded_trace_is_capped_bytes_never_a_path(tmp_path: object) -> None:
    assert trace_from_upload(b"prompt_tokens,output_tokens\n2000,300\n100,50\n") == ((2000, 300), (100, 50))
    with pytest.raises(ScenarioError, match="missing column"):
        trace_from_upload(b"/etc/passwd.csv")  # a path-shaped upload is text, not a file to open
    with pytest.raises(ScenarioError, match=f"{TRACE_MAX_BYTES:,}"):
        trace_from_upload(b"x" * (TRACE_MAX_BYTES + 1))
    rows = b"prompt_tokens,output_tokens\n" + b"10,10\n" * (TRACE_MAX_ROWS + 1)
    with pytest.raises(ScenarioError, match=f"more than {TRACE_MAX_ROWS:,}"):
        trace_from_upload(rows)
    with pytest.raises(ScenarioError, match="prompt_tokens must be an integer"):
        trace_from_upload(b"prompt_tokens,output_tokens\n1e400,3\n")
    with pytest.raises(ScenarioError, match="UTF-8"):
        trace_from_upload(b"\xff\xfe\x00")


@given(gpu_ids)
@settings(max_examples=10, deadline=None)
def test_every_gpu_price_names_its_source(gpu: str) -> None:
    from planner import price_source

    text = price_source(gpu=gpu, usd_per_gpu_hour=None)
    assert text.startswith("catalog default $") and gpu in text
    assert price_source(gpu=gpu, usd_per_gpu_hour=2.5) == "$2.50/GPU-hour: your input"


# The sweep's public columns (CLI JSON/CSV, the Explore page): a contract, in this order.
SWEEP_COLUMNS = ("gpu", "weights_dtype", "kv_dtype", "tp", "pp", "ep", "dp_attention", "chunk_tokens", "mode", "feasible", "reason",
                 "compute_dtype", "batch_size", "itl_s", "itl_percentile_s", "ttft_s", "ttft_p90_s",
                 "goodput_req_s_per_replica", "goodput_req_s_per_gpu", "gpus_per_replica", "replicas", "gpus_total",
                 "usd_per_hour", "usd_per_mtok_output", "usd_per_mtok_blended", "usd_per_mtok_output_full_load",
                 "pareto_cost_itl", "pareto_goodput_ttft", "cheapest", "itl_gap_p99_s", "slo_attainment",
                 "simulated_attainment", "slo_status")


def test_sweep_rows_are_typed_and_their_dicts_keep_the_public_columns() -> None:
    result = sweep_result(Scenario(), gpus=["h100-sxm", "l40s"], dtypes=["fp8"], tps=[1, 8, 16], pps=[1])
    assert all(isinstance(row, SweepRow) for row in result.rows)
    as_dict = sweep(Scenario(), gpus=["h100-sxm", "l40s"], dtypes=["fp8"], tps=[1, 8, 16], pps=[1])
    assert as_dict == result.to_dict()
    assert [tuple(row) for row in as_dict["rows"]] == [SWEEP_COLUMNS] * len(result.rows)
    # TP 16 spans two 8-GPU nodes (issue 25: once refused as exceeding a node): planned, its
    # all-reduces over the NICs, 16 GPUs per replica (the gpus_total of a feasible row a multiple).
    two_nodes = [row for row in result.rows if row.tp == 16]
    assert two_nodes and all(r.gpus_per_replica == 16 and r.batch_size is not None for r in two_nodes)
    assert all(r.gpus_total is None or r.gpus_total % 16 == 0 for r in two_nodes)
    assert result.cheapest is not None and result.cheapest.cheapest
    assert sum(row.cheapest for row in result.rows) == 1
    header = next(csv.reader(io.StringIO(csv_text(as_dict["rows"]))))
    assert tuple(header) == SWEEP_COLUMNS


@SWEEP_PLAN
@given(model=hs.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-30b-a3b"]),
       gpu=hs.sampled_from(["h100-sxm", "h200-sxm", "l40s", "a100-sxm-80gb"]),
       wd=hs.sampled_from(["bf16", "fp8", "int4"]), rps=hs.floats(min_value=0.5, max_value=400),
       prompt=hs.integers(64, 8000), output=hs.integers(2, 1000), ttft=hs.floats(min_value=0.2, max_value=5),
       itl=hs.floats(min_value=0.01, max_value=0.2), prefix=hs.floats(0, 1), hit=hs.floats(0, 1),
       lognormal=hs.booleans(), draft=hs.sampled_from([0, 3]), chunks=hs.sampled_from([(512,), (2048, 8192), (256,)]),
       min_replicas=hs.integers(1, 3))
def test_every_sweep_row_plans_to_its_own_numbers(model: str, gpu: str, wd: str, rps: float, prompt: int,
                                                  output: int, ttft: float, itl: float, prefix: float, hit: float,
                                                  lognormal: bool, draft: int, chunks: tuple[int, ...],
                                                  min_replicas: int) -> None:
    """One truth: for every row, plan(sweep_row_scenario(row)) has the row's feasibility, GPUs and $/Mtok."""
    workload = {"requests_per_s": rps, "prompt_tokens": prompt, "output_tokens": output,
                "prefix_tokens": int(prefix * prompt), "prefix_hit_rate": hit}
    if lognormal:
        workload.update(distribution="lognormal", prompt_sigma=0.6, output_sigma=0.4)
    base = scenario_from_dict({"model": model, "gpu": gpu, "weights_dtype": wd, "workload": workload,
                               "slo": {"ttft_s": ttft, "itl_s": itl}, "speculative": {"draft_tokens": draft},
                               "fleet": {"min_replicas": min_replicas}})
    result = sweep_result(base, gpus=[gpu], dtypes=[wd], tps=[1, 2, 8], pps=[1, 2], eps=[1, 8] if
                          scenario_from_dict({"model": model}).model != "" and model in MOE else None, chunks=chunks)
    for row in result.rows:
        if row.reason.startswith("parallel."):  # a layout the scenario schema rejects too
            with pytest.raises(ScenarioError):
                sweep_row_scenario(base, row)
            continue
        p = plan(sweep_row_scenario(base, row))
        assert p.operating_point.feasible == row.feasible, row
        assert p.operating_point.reason == row.reason
        assert p.operating_point.batch_size == row.batch_size
        assert p.fleet.gpus_per_replica == row.gpus_per_replica
        if row.feasible:
            assert p.fleet.gpus_total == row.gpus_total
            assert p.cost.usd_per_mtok_output == pytest.approx(row.usd_per_mtok_output, rel=1e-12)
            assert p.operating_point.itl_percentile_s == pytest.approx(row.itl_percentile_s, rel=1e-12)
            assert p.operating_point.ttft_p90_s == pytest.approx(row.ttft_p90_s, rel=1e-12)
        else:
            assert row.gpus_total is None and not math.isfinite(p.fleet.gpus_total)
