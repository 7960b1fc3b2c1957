"""Disaggregated pools with their own GPU and layout (issue 25, part 5): ``prefill.gpu``,
``prefill.parallel``, ``decode.gpu``, ``decode.parallel``."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.agreement import agreement
from planner import Scenario, ScenarioError, plan
from planner.cli.main import main
from planner.physics.handoff import kv_handoff_factor, kv_handoff_s
from planner.spec.scenario import apply_overrides, scenario_from_dict
from planner.spec.share import scenario_from_token, share_token
from tests.test_derivations import check

# llama-3.1-70b, 2,000-token prompts; catalog prices: h100-sxm $3.00, h200-sxm $2.75 per GPU-hour.
BASE: dict[str, Any] = {"model": "llama-3.1-70b", "weights_dtype": "fp8", "gpu": "h200-sxm", "parallel": {"tp": 2},
                        "serving": {"mode": "disaggregated"}, "slo": {"ttft_s": 2.0, "itl_s": 0.05},
                        "workload": {"requests_per_s": 20, "prompt_tokens": 2000, "output_tokens": 300}}
HETERO: dict[str, Any] = {**BASE, "prefill": {"gpu": "h100-sxm", "parallel": {"tp": 4}},
                          "decode": {"gpu": "h200-sxm", "parallel": {"tp": 2}}}


def _sc(data: dict[str, Any], **update: Any) -> Scenario:
    return scenario_from_dict({**data, **update})


def test_heterogeneous_plan_charges_each_pool_at_its_own_price() -> None:
    p = plan(_sc(HETERO))
    assert p.operating_point.feasible, p.operating_point.reason
    pr, de = p.pools.prefill, p.pools.decode
    assert (pr.gpu, pr.tp, pr.gpus_per_replica, pr.usd_per_gpu_hour) == ("h100-sxm", 4, 4, 3.00)
    assert (de.gpu, de.tp, de.gpus_per_replica, de.usd_per_gpu_hour) == ("h200-sxm", 2, 2, 2.75)
    n_p, n_d = p.fleet.prefill_replicas, p.fleet.decode_replicas
    # GPUs = P × 4 + D × 2; $/hour = P × 4 × 3.00 + D × 2 × 2.75 (no power price)
    assert p.fleet.gpus_total == n_p * 4 + n_d * 2
    assert p.cost.usd_per_hour == pytest.approx(n_p * 4 * 3.00 + n_d * 2 * 2.75, rel=1e-12)
    assert pr.usd_per_hour + de.usd_per_hour == pytest.approx(p.cost.usd_per_hour, rel=1e-12)
    # $/Mtok output = $/hour / (20 req/s × 300 tokens × 3600 / 1e6 = 21.6 Mtok/h)
    assert p.cost.usd_per_mtok_output == pytest.approx(p.cost.usd_per_hour / 21.6, rel=1e-12)
    assert p.pools.xpyd == f"{n_p:.0f}P{n_d:.0f}D"
    for key in ("pools.xpyd", "pools.usd_per_hour", "pools.kv_transfer_s", "fleet.gpus_total", "cost.usd_per_hour"):
        dv = p.derivations[key]
        check(key, dv.substituted, dv.value)
    assert "h100-sxm" in p.derivations["fleet.gpus_total"].formula


def test_a_stated_price_applies_to_both_pools() -> None:
    p = plan(_sc(HETERO, cost={"usd_per_gpu_hour": 2.0}))
    assert p.pools.prefill.usd_per_gpu_hour == p.pools.decode.usd_per_gpu_hour == 2.0
    assert p.cost.usd_per_hour == pytest.approx(p.fleet.gpus_total * 2.0, rel=1e-12)


def test_each_pool_is_timed_on_its_own_gpu_and_layout() -> None:
    het = plan(_sc(HETERO))
    # The prefill section is the prefill pool's: the same as a one-pool scenario on H100 TP4.
    alone = plan(_sc(BASE, gpu="h100-sxm", parallel={"tp": 4}))
    assert het.prefill.time_s == alone.prefill.time_s
    assert het.fleet.prefill_req_s_per_replica == pytest.approx(alone.fleet.prefill_req_s_per_replica, rel=1e-12)
    # The decode side is the decode pool's: the same as the one-pool H200 TP2 scenario.
    one = plan(_sc(BASE))
    assert het.decode.step_s == one.decode.step_s
    assert het.memory.kv_budget_bytes == one.memory.kv_budget_bytes
    assert het.fleet.decode_replicas == one.fleet.decode_replicas


def _numbers(p: Any) -> dict[str, Any]:
    j = p.to_json_dict()
    return {k: j[k] for k in ("roofline", "memory", "decode", "prefill", "ttft_s", "operating_point", "fleet",
                              "cost", "routing", "warnings")}


@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_unset_pools_and_pools_equal_to_the_scenario_plan_the_same(mode: str) -> None:
    # bench/agreement.py's disaggregated RAG row: pools unset, pools given the scenario's own gpu and
    # layout, and the plan's numbers are identical (exact equality, not approx).
    data = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 2},
            "serving": {"mode": mode}, "slo": {"ttft_s": 10.0},
            "workload": {"requests_per_s": 2, "prompt_tokens": 32000, "output_tokens": 300}}
    same = {**data, "prefill": {"gpu": "h200-sxm", "parallel": {"tp": 2}}, "decode": {"parallel": {"tp": 2}}}
    a, b = plan(_sc(data)), plan(_sc(same))
    if mode == "colocated":  # pools on a colocated scenario: a warning naming the fields, numbers unchanged
        assert any("prefill.gpu, prefill.parallel, decode.parallel apply to disaggregated pools only" in w
                   for w in b.warnings)
        b_numbers = _numbers(b)
        b_numbers["warnings"] = [w for w in b.warnings if "disaggregated pools only" not in w]
        assert b_numbers == _numbers(a)
    else:
        assert _numbers(b) == _numbers(a)
    assert a.pools.prefill.own_layout is False and b.pools.prefill.own_layout is True


def test_default_disaggregated_numbers_are_unchanged() -> None:
    # tests/test_fleet.py's high-traffic verdict scenario (66 colocated vs 88 disaggregated GPUs) holds
    # those numbers; here the pools section of a scenario without pools repeats the fleet.
    p = plan(_sc(BASE))
    assert p.pools.prefill.replicas == p.fleet.prefill_replicas and p.pools.decode.replicas == p.fleet.decode_replicas
    assert p.pools.prefill.gpus + p.pools.decode.gpus == p.fleet.gpus_total
    assert p.pools.prefill.usd_per_hour + p.pools.decode.usd_per_hour == pytest.approx(p.cost.usd_per_hour)


# KV hand-off by hand: llama-3.1-70b bf16 KV = 2 × 80 layers × 8 KV heads × 128 × 2 B = 327,680 B/token;
# 2,000 tokens; one 400 Gb/s NIC per GPU = 5e10 B/s at η = 0.8.
@pytest.mark.parametrize(("pre_tp", "dec_tp", "expected_s"), [
    # TP2 → TP8: K_d = 40,960 B; 40,960 × 2,000 / (0.8 × 5e10) = 2.048 ms; senders: max(1, 8/2) = 4 → 8.192 ms
    (2, 8, 8.192e-3),
    # TP8 → TP2: K_d = 163,840 B; 163,840 × 2,000 / 4e10 = 8.192 ms; max(1, 2/8) = 1 → 8.192 ms
    (8, 2, 8.192e-3),
    # TP4 → TP4: 81,920 × 2,000 / 4e10 = 4.096 ms, the one-pool figure
    (4, 4, 4.096e-3),
])
def test_kv_transfer_between_differently_sharded_pools(pre_tp: int, dec_tp: int, expected_s: float) -> None:
    sc = _sc({**BASE, "weights_dtype": "fp8", "kv_dtype": "bf16", "fleet": {"link": "rdma"},
              "prefill": {"gpu": "h100-sxm", "parallel": {"tp": pre_tp}},
              "decode": {"gpu": "h200-sxm", "parallel": {"tp": dec_tp}}})
    p = plan(sc)
    assert p.pools.kv_transfer_s == pytest.approx(expected_s, rel=1e-12)
    assert p.fleet.kv_transfer_s == pytest.approx(expected_s, rel=1e-12)
    assert p.pools.kv_bytes_per_sequence == 327_680 * 2000


def test_slower_senders_bind_the_hand_off() -> None:
    # 4 senders at 5e10 B/s feed 8 receivers at 4.5e11: max(1, 8 × 4.5e11 / (4 × 5e10)) = 18
    assert kv_handoff_factor(send_gpus=4, recv_gpus=8, send_link_bytes_per_s=5e10, recv_link_bytes_per_s=4.5e11) == 18
    # 163,840 B × 1,000 tokens / (0.8 × 5e10) = 4.096 ms, senders keep up
    assert kv_handoff_s(prompt_tokens=1000, recv_kv_bytes_per_token_per_gpu=163_840, send_gpus=8, recv_gpus=2,
                        send_link_bytes_per_s=5e10, recv_link_bytes_per_s=5e10, efficiency=0.8) == pytest.approx(4.096e-3)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.floats(1e9, 1e12), st.floats(1e9, 1e12))
def test_hand_off_never_beats_either_side(n_p: int, n_d: int, l_p: float, l_d: float) -> None:
    t = float(kv_handoff_s(prompt_tokens=1000, recv_kv_bytes_per_token_per_gpu=1e4, send_gpus=n_p, recv_gpus=n_d,
                           send_link_bytes_per_s=l_p, recv_link_bytes_per_s=l_d, efficiency=1.0))
    recv = 1e7 / l_d  # each receiver's own bytes over its link
    send = n_d * 1e7 / (n_p * l_p)  # all the receivers' bytes over the senders' links
    assert t >= recv * (1 - 1e-12) and t >= send * (1 - 1e-12)
    assert t == pytest.approx(max(recv, send), rel=1e-12)


@pytest.mark.parametrize(("override", "needle"), [
    ("prefill.parallel.tp=3", "prefill.parallel.tp (3) must divide the model's 64 attention heads"),
    ("decode.parallel.tp=128", "decode.parallel.tp: Input should be less than or equal to 64"),
    ("decode.parallel.ep=2", "decode.parallel.ep (2) needs a mixture-of-experts model"),
    ("prefill.gpu=nope", "prefill.gpu: unknown gpu 'nope'"),
    ("prefill.parallel.foo=1", "prefill.parallel.foo: unknown key"),
    ("decode.tp=2", "decode.tp: unknown key"),
])
def test_bad_pool_layouts_name_the_field(override: str, needle: str) -> None:
    with pytest.raises(ScenarioError) as err:
        scenario_from_dict(apply_overrides(HETERO, [override]))
    assert needle in str(err.value)


def test_a_pool_on_a_gpu_too_small_for_the_model_is_infeasible_with_the_reason() -> None:
    # 70B bf16 = 141 GB of weights: on one 80 GB H100 the prefill pool cannot hold them.
    p = plan(_sc({**HETERO, "weights_dtype": "bf16", "prefill": {"gpu": "h100-sxm", "parallel": {"tp": 1}}}))
    assert not p.operating_point.feasible
    assert "prefill pool does not fit" in p.operating_point.reason and "prefill.parallel.tp" in p.operating_point.reason


def test_cli_sets_pools_and_prints_them(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--set", "model=llama-3.1-70b", "--set", "weights_dtype=fp8", "--set", "serving.mode=disaggregated",
            "--set", "prefill.gpu=h100-sxm", "--set", "prefill.parallel.tp=4", "--set", "decode.gpu=h200-sxm",
            "--set", "decode.parallel.tp=2", "--set", "workload.requests_per_s=20", "--format", "csv"]
    assert main(args) == 0
    header, row = list(csv.reader(io.StringIO(capsys.readouterr().out)))[:2]
    cols = dict(zip(header, row, strict=True))
    assert cols["pools.prefill.gpu"] == "h100-sxm" and cols["pools.decode.gpu"] == "h200-sxm"
    assert cols["scenario.prefill.gpu"] == "h100-sxm" and cols["scenario.decode.parallel.tp"] == "2"
    for key in ("pools.xpyd", "pools.prefill.replicas", "pools.prefill.gpus", "pools.prefill.usd_per_hour",
                "pools.decode.layout", "pools.decode.usd_per_hour"):
        assert cols[key], key
    assert main(args[:-1] + ["table"]) == 0
    out = capsys.readouterr().out
    assert "pools.xpyd" in out or "xPyD" in out


def test_share_link_and_store_round_trip_a_scenario_with_pools(tmp_path: Any) -> None:
    from planner.store import make_engine, upgrade
    from planner.store import repository as repo

    sc = _sc(HETERO)
    back = scenario_from_token(share_token(sc))
    assert back == sc and back.prefill is not None and back.prefill.gpu == "h100-sxm"
    url = f"sqlite:///{tmp_path / 'pools.db'}"
    upgrade(url)
    eng = make_engine(url)
    try:
        saved = repo.save_scenario(engine=eng, scenario=sc, name="hetero")
        loaded = repo.get_scenario(engine=eng, ref=saved.id).scenario
    finally:
        eng.dispose()
    assert (loaded.prefill, loaded.decode) == (sc.prefill, sc.decode)
    # The store plans it as saved: the frozen scenario keeps each pool at its own price.
    a, b = plan(sc), plan(loaded)
    assert b.pools == a.pools and b.cost == a.cost


def test_plan_and_simulator_agree_on_a_heterogeneous_fleet() -> None:
    # bench/agreement.py's RAG row with its own pools: prefill on H100 TP4, decode on H200 TP2.
    data = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "weights_dtype": "fp8", "parallel": {"tp": 2},
            "serving": {"mode": "disaggregated"}, "slo": {"ttft_s": 10.0},
            "workload": {"requests_per_s": 2, "prompt_tokens": 32000, "output_tokens": 300},
            "prefill": {"gpu": "h100-sxm", "parallel": {"tp": 4}}}
    row = agreement("hetero rag", data, requests=600, seed=1, search=False)
    assert row.feasible, row.fleet
    assert row.sim.attainment >= row.target
    assert abs(row.tpot_error) <= 0.15, (row.plan.tpot_s, row.sim.tpot_s)
    assert abs(row.ttft_error) <= 0.15, (row.plan.ttft_p90_s, row.sim.ttft_p90_s)
    assert math.isfinite(row.plan.ttft_p90_s)
