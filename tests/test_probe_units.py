"""The probe's pure parts: allow-list, key handling, settings caps, metrics
mapping, statistics, arrival patterns, and calibration recovering known factors."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading

import numpy as np
import pytest
from servers.procs import log_lines, start_script

from planner import GpuSpec, ModelSpec, ProbeError, Scenario
from planner.cli import main
from planner.probe import (
    ALLOWED_HOSTS_ENV,
    api_key_from,
    arrival_offsets_s,
    calibrate,
    calibrated_scenario,
    check_url_allowed,
    engine_delta,
    kv_capacity_check,
    make_prompt,
    parse_metrics,
    predict_level,
    probe_settings,
    run_probe,
    run_probe_sync,
    stats,
)
from planner.probe.summary import LevelSummary, ProbeRun, Stats

# ---------------------------------------------------------------- allow-list


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://localhost:1/v1", "http://10.1.2.3",
                                 "http://192.168.0.5:80", "http://[::1]:9000", "http://172.16.0.1"])
def test_default_allows_loopback_and_private(url, monkeypatch):
    monkeypatch.delenv(ALLOWED_HOSTS_ENV, raising=False)
    assert check_url_allowed(url) == url


@pytest.mark.parametrize("url", ["http://8.8.8.8", "http://169.254.169.254/latest", "http://0.0.0.0:80",
                                 "http://[2001:4860::8888]", "ftp://127.0.0.1", "http://user:pw@127.0.0.1"])
def test_default_refuses_public_link_local_and_odd_urls(url, monkeypatch):
    monkeypatch.delenv(ALLOWED_HOSTS_ENV, raising=False)
    with pytest.raises(ProbeError, match="url"):
        check_url_allowed(url)


def test_env_allow_list_replaces_default(monkeypatch):
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "10.0.0.0/8, inference.internal")
    assert check_url_allowed("http://10.9.9.9:1")
    assert check_url_allowed("http://inference.internal:8000")  # listed by name: not resolved
    with pytest.raises(ProbeError, match=ALLOWED_HOSTS_ENV):
        check_url_allowed("http://127.0.0.1:1")


def test_disallowed_host_refused_before_any_connection(monkeypatch):
    """A real listener on loopback; with loopback not allowed, the probe never connects."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    accepted = []

    def accept_loop():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                accepted.append(conn)
            except OSError:
                pass

    stop = threading.Event()
    t = threading.Thread(target=accept_loop, daemon=True)
    t.start()
    try:
        port = srv.getsockname()[1]
        monkeypatch.setenv(ALLOWED_HOSTS_ENV, "10.0.0.0/8")
        s = probe_settings(url=f"http://127.0.0.1:{port}", model="m", concurrency=(1,), requests=1)
        with pytest.raises(ProbeError, match="not allowed"):
            run_probe_sync(s)
        # the metrics URL is checked too
        monkeypatch.setenv(ALLOWED_HOSTS_ENV, "127.0.0.1/32")
        s2 = probe_settings(url=f"http://127.0.0.1:{port}", model="m", concurrency=(1,), requests=1,
                            metrics_url="http://8.8.8.8/metrics")
        with pytest.raises(ProbeError, match="not allowed"):
            run_probe_sync(s2)
        stop.set()
        t.join(timeout=2)
        assert accepted == []
    finally:
        stop.set()
        srv.close()
        for c in accepted:
            c.close()


def test_cli_refuses_disallowed_host_with_one_line(monkeypatch, capsys):
    monkeypatch.delenv(ALLOWED_HOSTS_ENV, raising=False)
    assert main(["probe", "--url", "http://8.8.8.8:80", "--model", "m"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: url:") and "\n" not in err


# ---------------------------------------------------------------- API key

SECRET = "sk-test-9f8e7d6c5b4a-do-not-leak"


@pytest.fixture()
def keyed_pacer():
    srv = start_script("pacing_server", "--ttft-s", "0.005", "--tpot-s", "0.002", "--api-key", SECRET)
    yield srv
    srv.stop()


def test_key_is_sent_but_never_stored_exported_or_logged(keyed_pacer, monkeypatch, caplog, capsys):
    # without the key the server refuses (401): the key really travels in the header
    s = probe_settings(url=keyed_pacer.url, model="m", concurrency=(2,), requests=4, output_tokens=4)
    assert run_probe_sync(s).levels[0].failure_reasons == {"http_401": 4}
    caplog.set_level(logging.DEBUG)
    run = run_probe_sync(s, api_key=SECRET)
    lv = run.levels[0]
    assert lv.failures == 0 and lv.output_tokens_total == 16
    assert SECRET not in json.dumps(run.to_json_dict(samples=True))
    assert SECRET not in run.csv_text()
    assert SECRET not in repr(run) and SECRET not in repr(s)
    assert SECRET not in caplog.text
    # the CLI: the key from the environment, the output carries only the variable's name at most
    monkeypatch.setenv("RIDGELINE_TEST_KEY", SECRET)
    for fmt in ("json", "csv", "table"):
        assert main(["probe", "--url", keyed_pacer.url, "--model", "m", "--api-key-env", "RIDGELINE_TEST_KEY",
                     "--concurrency", "1", "--requests", "2", "--output-tokens", "3", "--format", fmt]) == 0
        out = capsys.readouterr()
        assert SECRET not in out.out and SECRET not in out.err
    assert SECRET not in caplog.text


def test_api_key_sources(monkeypatch):
    monkeypatch.setenv("K1", "abc")
    assert api_key_from(api_key_env="K1") == "abc"
    assert api_key_from(api_key="x", api_key_env="K1") == "x"
    assert api_key_from() is None
    monkeypatch.delenv("K2", raising=False)
    with pytest.raises(ProbeError, match="K2"):
        api_key_from(api_key_env="K2")


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"concurrency": (0,)}, "concurrency"),
    ({"concurrency": (2048,)}, "concurrency"),
    ({"requests": 10**6}, "requests"),
    ({"duration_s": 1e5}, "duration_s"),
    ({"rate_req_s": -1.0}, "rate_req_s"),
    ({"concurrency": (1,), "rate_req_s": 2.0}, "concurrency or rate_req_s"),
])
def test_settings_caps_name_the_field(kwargs, field):
    with pytest.raises(ProbeError, match=field):
        probe_settings(url="http://127.0.0.1:1", model="m", **kwargs)


def test_prompts_unique_unless_shared():
    a = [make_prompt(index=i, prompt_tokens=20, nonce="n") for i in range(50)]
    assert len(set(a)) == 50 and len({p[:2] for p in a}) > 10  # first characters already differ
    b = [make_prompt(index=i, prompt_tokens=20, nonce="n", shared_prefix=True) for i in range(5)]
    assert len({p[:40] for p in b}) == 1 and len(set(b)) == 5
    assert len(a[0].split()) == 18  # 20 − 3 = 17 words + the unique head


# ---------------------------------------------------------------- arrivals & stats


def test_arrival_patterns_have_the_asked_rate_and_burstiness():
    n = 20000
    const = np.diff(arrival_offsets_s(rate_req_s=5.0, n=n, arrival="constant"))
    assert np.allclose(const, 0.2)
    pois = np.diff(arrival_offsets_s(rate_req_s=5.0, n=n, arrival="poisson", seed=1))
    assert pois.mean() == pytest.approx(0.2, rel=0.03)
    assert pois.std() / pois.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV 1
    bursty = np.diff(arrival_offsets_s(rate_req_s=5.0, n=n, arrival="gamma", burstiness=0.25, seed=1))
    assert bursty.mean() == pytest.approx(0.2, rel=0.05)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.1)  # gamma shape k: CV 1/sqrt(k)


def test_stats_percentiles():
    s = stats(list(range(1, 101)))  # 1..100
    assert s.count == 100 and s.mean == 50.5 and s.p50 == 50.5
    assert s.p90 == pytest.approx(90.1) and s.p99 == pytest.approx(99.01)
    assert stats([]) == Stats()


def test_open_loop_rate_against_pacing_server():
    srv = start_script("pacing_server", "--ttft-s", "0.01", "--tpot-s", "0.005")
    try:
        before = len(log_lines(srv.url))
        s = probe_settings(url=srv.url, model="m", rate_req_s=20.0, arrival="constant", requests=20,
                           output_tokens=4, prompt_tokens=8)
        lv = run_probe_sync(s).levels[0]
        server = [json.loads(line) for line in log_lines(srv.url)[before:]]
        assert lv.rate_req_s == 20.0 and lv.concurrency is None and lv.arrival == "constant"
        assert lv.requests == 20 and lv.failures == 0
        # The schedule is 20 arrivals 50 ms apart, and no request leaves before its time.
        smp = sorted(lv.samples, key=lambda x: x.index)
        assert [x.scheduled_s for x in smp] == pytest.approx([0.05 * i for i in range(20)], abs=1e-6)
        assert all(x.sent_s >= x.scheduled_s - 1e-6 for x in smp)
        # On the server's own clock the requests arrived at that pace: a late wake-up stretches one gap
        # and shortens the next, so the median gap stays 50 ms even on a busy machine.
        measured = {x.index for x in smp}  # the warm-up request before the level is not one of them
        recv = sorted(e["recv_ns"] for e in server if int(e["prompt_head"].rsplit("-", 1)[1]) in measured)
        assert len(recv) == 20
        assert float(np.median(np.diff(recv))) / 1e9 == pytest.approx(0.05, abs=0.005)
        # The level cannot end before the last arrival (0.95 s) plus its 10 ms TTFT and 3 × 5 ms gaps.
        assert lv.duration_s >= 0.95 + 0.01 + 3 * 0.005 - 1e-3
        assert lv.req_s == pytest.approx(20 / lv.duration_s)
        # The duration cap stops issuing: the seeded Poisson schedule (seed 0) at 10 req/s has 9 arrivals
        # in the first second (the 10th is at 1.35 s), whatever the machine's speed.
        s2 = probe_settings(url=srv.url, model="m", rate_req_s=10.0, arrival="poisson", requests=1000,
                            duration_s=1.0, output_tokens=2)
        lv2 = run_probe_sync(s2).levels[0]
        assert lv2.requests == 9
        # and engine series from /metrics (vLLM names), counters moved by what was sent
        assert lv2.engine.engine == "vllm"
        assert lv2.engine.generation_tokens == lv2.output_tokens_total == 9 * 2
        assert lv2.engine.preemptions is None  # not exported: unavailable, not zero
    finally:
        srv.stop()


# ---------------------------------------------------------------- metrics

VLLM = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} 1.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="a"} 0.42
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{model_name="a"} 7.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{model_name="a"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{model_name="a"} 250.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{model_name="a"} 500.0
vllm:generation_tokens_total{model_name="b"} 20.0
"""
SGLANG = """# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="q"} 0.9
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="q"} 12
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="q"} 4
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="q"} 0.33
"""
TGI = """# TYPE tgi_queue_size gauge
tgi_queue_size 5
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 9
"""

LLAMACPP = """# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 243
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 12
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 1024
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 128
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 8
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
"""


def test_metrics_map_engine_names():
    v = parse_metrics(VLLM)
    assert (v.engine, v.running, v.waiting, v.kv_usage, v.preemptions_total) == ("vllm", 3, 1, 0.42, 7)
    assert v.generation_tokens_total == 520  # labelled samples summed
    g = parse_metrics(SGLANG)
    assert (g.engine, g.kv_usage, g.running, g.waiting, g.prefix_hit_rate) == ("sglang", 0.9, 12, 4, 0.33)
    assert g.preemptions_total is None and g.generation_tokens_total is None
    t = parse_metrics(TGI)
    assert (t.engine, t.running, t.waiting, t.kv_usage) == ("tgi", 9, 5, None)
    assert v.engine_steps_total is None and t.engine_steps_total is None
    ll = parse_metrics(LLAMACPP)
    assert (ll.engine, ll.running, ll.waiting, ll.kv_usage) == ("llama.cpp", 8, 0, None)
    assert (ll.prompt_tokens_total, ll.prompt_cached_tokens_total) == (243, 12)
    assert (ll.generation_tokens_total, ll.engine_steps_total) == (1024, 128)
    d = engine_delta([parse_metrics(LLAMACPP.replace(" 1024", " 0").replace(" 128", " 0")), ll])
    assert (d.generation_tokens, d.engine_steps) == (1024, 128)  # 8 tokens a step: a batch of 8


def test_engine_delta_uses_counter_differences():
    before = parse_metrics(VLLM)
    after = parse_metrics(VLLM.replace("1000.0", "1400.0").replace("250.0", "550.0").replace(" 7.0", " 9.0")
                          .replace("0.42", "0.97"))
    d = engine_delta([before, after])
    assert d.prefix_hit_rate == pytest.approx(300 / 400)
    assert d.preemptions == 2 and d.kv_usage_max == 0.97 and d.generation_tokens == 0
    assert engine_delta([parse_metrics(TGI)]).preemptions is None


# ---------------------------------------------------------------- calibration

CPU = GpuSpec(id="unit-cpu", name="unit", hbm_bytes=64e9, hbm_bytes_per_s=50e9,
              flops_per_s={"bf16": 200e9, "fp32": 200e9}, pcie_bytes_per_s=16e9, tdp_w=100,
              usd_per_gpu_hour=0.1, gpus_per_node=1)
SMALL = ModelSpec(id="unit-small", layers=8, heads=16, kv_heads=4, head_dim=64, hidden=1024, intermediate=2816,
                  vocab=354)


def _synthetic_run(truth: Scenario, levels=(1, 2, 4, 8), prompt=100.0, out=48) -> ProbeRun:
    """Levels whose 'measurements' are the planner's physics at known efficiencies."""
    from planner import resolve

    r = resolve(truth)
    lvs = []
    for c in levels:
        p = predict_level(r, prompt_tokens=prompt, output_tokens=out, concurrency=c)
        st = lambda x: Stats(count=1, mean=x, p50=x, p90=x, p99=x)  # noqa: E731
        lvs.append(LevelSummary(concurrency=c, requests=c, failures=0, duration_s=p.e2e_s, ttft_s=st(p.ttft_s),
                                ttft_sent_s=st(p.ttft_s), tpot_s=st(p.tpot_s), itl_s=st(p.tpot_s),
                                e2e_s=st(p.e2e_s), output_tokens_total=c * out, prompt_tokens_mean=prompt,
                                output_tok_s=p.output_tok_s, req_s=c / p.e2e_s, goodput_req_s=c / p.e2e_s))
    return ProbeRun(run_id="probe-synthetic", url="http://127.0.0.1", model="m", endpoint="completions",
                    pattern="concurrency", prompt_tokens=int(prompt), output_tokens=out, started_at="",
                    levels=tuple(lvs))


def test_calibration_recovers_known_efficiencies():
    base = Scenario(gpu=CPU, model=SMALL, weights_dtype="fp32", kv_dtype="fp32")
    truth = base.model_copy(update={"efficiency": base.efficiency.model_copy(
        update={"bandwidth": 0.55, "compute": 0.3, "step_overhead_s": 0.002})})
    run = _synthetic_run(truth, levels=(1, 2, 4, 8, 16, 32))
    cal = calibrate(run, base)
    assert cal.success
    assert cal.bandwidth_efficiency == pytest.approx(0.55, rel=0.02)
    assert cal.compute_efficiency == pytest.approx(0.3, rel=0.02)
    assert cal.step_overhead_s == pytest.approx(0.002, rel=0.05)
    assert max(abs(r.rel_error) for r in cal.residuals) < 0.01
    new = calibrated_scenario(base, cal)
    assert new.efficiency.calibrated_from == "probe-synthetic"
    from planner import resolve

    assert resolve(new).origins["efficiency.bandwidth"] == "calibrated"


def test_calibration_needs_two_levels():
    base = Scenario(gpu=CPU, model=SMALL, weights_dtype="fp32", kv_dtype="fp32")
    run = _synthetic_run(base, levels=(1,))
    with pytest.raises(ProbeError, match="two"):
        calibrate(run, base)


def test_prediction_physics_by_hand():
    """Decode on the unit CPU at full efficiency, no overhead; 90,919,936 parameters of fp32
    (8 layers × 11,274,240 + 2 × 354 × 1,024 embeddings + 1,024 final norm), KV 2 × 8 layers × 4 KV heads
    × 64 × 4 B = 16,384 B/token, attention 2·(64 + 64)·8 layers·16 heads = 32,768 FLOP per token pair.

    A step is a sum of kernel groups (issue 24): the GEMMs also read and write each token's
    activations, 8 layers × (attention 1,024 + 1,536 + 1,024 + 1,024 + MLP 1,024 + 5,632 + 2,816 + 1,024)
    = 120,832 elements × 2 B (bf16) = 241,664 B per token; attention reads the KV on its own roofline.
    c = 1, live context 100 + 48/2 = 124 tokens:
    decode bytes = 90,919,936 × 4 + 241,664 + 124 × 16,384 = 363,679,744 + 241,664 + 2,031,616
                 = 365,953,024 B / 50e9 B/s = 7.31906048 ms; FLOPs 2 × 90,919,936 + 32,768 × 124
                 = 185,903,104 / 200e9 = 0.93 ms: memory-bound (each group too).
    prefill of 100 tokens: 2 × 90,919,936 × 100 + 32,768 × 100²/2 = 18,347,827,200 FLOP / 200e9
                 = 91.739136 ms (memory 365,318,144 B / 50e9 = 7.3 ms): compute-bound.
    c = 4: decode 363,679,744 + 4 × 241,664 + 4 × 124 × 16,384 = 372,772,864 B -> 7.45545728 ms; prefill of 4 × 100 tokens
                 together: 2 × 90,919,936 × 400 + 32,768 × 400²/2 = 75,357,388,800 FLOP -> 376.786944 ms.
    """
    sc = Scenario(gpu=CPU, model=SMALL, weights_dtype="fp32", kv_dtype="fp32",
                  efficiency={"bandwidth": 1.0, "compute": 1.0, "step_overhead_s": 0.0})
    from planner import resolve

    p = predict_level(resolve(sc), prompt_tokens=100, output_tokens=48, concurrency=1)
    assert p.tpot_s == pytest.approx(0.00731906048, rel=1e-9)
    assert p.ttft_s == pytest.approx(0.091739136, rel=1e-9)
    assert p.e2e_s == pytest.approx(0.091739136 + 47 * 0.00731906048, rel=1e-9)
    assert p.output_tok_s == pytest.approx(48 / (0.091739136 + 47 * 0.00731906048), rel=1e-9)  # 110.1 tok/s
    p4 = predict_level(resolve(sc), prompt_tokens=100, output_tokens=48, concurrency=4)
    assert (p4.tpot_s, p4.ttft_s) == (pytest.approx(0.00745545728, rel=1e-9), pytest.approx(0.376786944, rel=1e-9))
    assert p4.output_tok_s == pytest.approx(4 * 48 / (0.376786944 + 47 * 0.00745545728), rel=1e-9)


def test_cancel_before_start_yields_no_levels():
    async def go():
        ev = asyncio.Event()
        ev.set()
        s = probe_settings(url="http://127.0.0.1:9", model="m", concurrency=(1, 2), requests=2, metrics_url="")
        return await run_probe(s, cancel=ev)

    assert asyncio.run(go()).levels == ()


def test_exports_listed():
    import planner.probe as probe

    for name in probe.__all__:
        assert hasattr(probe, name), name
    assert os.path.basename(probe.__file__) == "__init__.py"


def test_kv_capacity_ramp_stops_where_the_engine_fills():
    """The pacing server reports KV usage = running / 8: the ramp stops at 8 streams."""
    srv = start_script("pacing_server", "--ttft-s", "0.01", "--tpot-s", "0.01", "--kv-slots", "8")
    try:
        s = probe_settings(url=srv.url, model="m", concurrency=(2, 4, 8, 16, 32), requests=16, output_tokens=20,
                           metrics_interval_s=0.03, stop_when_kv_full=True)
        run = run_probe_sync(s)
    finally:
        srv.stop()
    assert [lv.concurrency for lv in run.levels] == [2, 4, 8]
    assert run.levels[-1].engine.kv_usage_max == 1.0 and run.levels[0].engine.kv_usage_max <= 0.25
    sc = Scenario(gpu=CPU, model=SMALL, weights_dtype="fp32", kv_dtype="fp32")
    chk = kv_capacity_check(run, sc)
    assert chk.observed_full_concurrency == 8 and chk.reason == "kv_usage"
    assert chk.highest_concurrency_tried == 8
    # Context: the pacing server counts a prompt's words (126 for the default 128-token prompt: 125
    # filler words and the unique head) plus the 20 output tokens.
    assert chk.context_tokens == 126 + 20
    # Planner side, by hand (vLLM accounting, memory_utilization 0.9): 0.9 × 64e9 − weights 363,679,744 B
    # − activations (2,304 tokens × 4 × (1,024 + 2,816) × 2 B + 1,024 × 354 × 4 B logits + 0.5e9 CUDA graphs
    # = 572,228,864 B) − 1e9 non-torch = 55,664,091,392 B of KV, over 146 tokens × 16,384 B/token.
    assert chk.planner_max_sequences == pytest.approx(55_664_091_392 / (146 * 16_384), rel=1e-9)
