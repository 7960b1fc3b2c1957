"""The simulator against the analytic core (planner.physics.step), and its queueing behaviour."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from planner import Scenario, decode_step, plan, prefill_step, resolve
from planner.physics.techniques import kv_transfer_s
from planner.simulate import Request, SimRun, sim_options, simulate, summarize
from planner.spec.terms import physics_terms, term


def check_little(run: SimRun) -> None:
    """Little's law: the engine's time-averaged in-flight count = throughput × mean latency."""
    throughput = run.requests / run.duration_s
    assert run.mean_in_flight == pytest.approx(throughput * float(run.e2e_s.mean()), rel=1e-6)


def kw(scenario: Scenario) -> dict:
    return resolve(scenario).step_kwargs()


def test_one_request_at_a_time_matches_the_core() -> None:
    # Fixed 2000/250 lengths, arrivals 100 s apart: nothing ever queues or batches.
    sc = Scenario(serving={"chunk_tokens": 4096})
    reqs = tuple(Request(arrival_s=100.0 * i, prompt_tokens=2000, output_tokens=250) for i in range(4))
    run = simulate(sc, sim_options(), reqs)
    check_little(run)
    k = kw(sc)
    want_ttft = float(prefill_step(tokens=2000, **k).time_s)
    assert run.ttft_s == pytest.approx(np.full(4, want_ttft), rel=1e-9)
    # Token i (i ≥ 2) is one batch-1 decode step at live context 2000 + i − 1.
    ctx = 2000 + np.arange(1, 250)
    want_gaps = np.asarray(decode_step(batch_size=1, context_tokens=ctx, **k).step_s)
    assert run.itl_s == pytest.approx(np.tile(want_gaps, 4), rel=1e-4)
    # The plan's ITL uses the mean live context 2000 + 250/2: the same mean.
    p = plan(Scenario(serving={"batch_size": 1}))
    assert float(run.tpot_s.mean()) == pytest.approx(p.decode.itl_s, rel=1e-3)
    assert run.e2e_s == pytest.approx(want_ttft + want_gaps.sum(), rel=1e-6)
    assert run.preemptions == 0


def test_chunked_ttft_is_the_sum_of_chunks() -> None:
    sc = Scenario(serving={"chunk_tokens": 512})
    run = simulate(sc, sim_options(), (Request(arrival_s=0.0, prompt_tokens=2000, output_tokens=2),))
    k = kw(sc)
    chunks = [float(prefill_step(tokens=c + min(512, 2000 - c), cached_tokens=c, **k).time_s)
              for c in range(0, 2000, 512)]
    assert float(run.ttft_s[0]) == pytest.approx(sum(chunks), rel=1e-9)


@pytest.mark.parametrize("batch", [8, 32])
def test_saturated_closed_loop_matches_batch_throughput(batch: int) -> None:
    sc = Scenario(workload={"prompt_tokens": 128, "output_tokens": 2000})
    opts = sim_options(concurrency=batch, max_batch=batch, requests=batch * 6, lengths="fixed", seed=0)
    run = simulate(sc, opts)
    check_little(run)
    tok_s = float(run.output_tokens.sum()) / run.duration_s
    # Core: B sequences at mean live context 128 + 2000/2.
    want = batch / float(decode_step(batch_size=batch, context_tokens=128 + 1000, **kw(sc)).step_s)
    assert tok_s == pytest.approx(want, rel=0.02)
    assert run.mean_in_flight == pytest.approx(batch, rel=0.01)


def _head_of_line(chunked: bool) -> tuple[float, float]:
    """(max ITL − median ITL) of a decode-batch member while an 8,000-token prompt arrives."""
    sc = Scenario(serving={"chunk_tokens": 512})
    batch = tuple(Request(arrival_s=0.0, prompt_tokens=100, output_tokens=1200) for _ in range(8))
    reqs = batch + (Request(arrival_s=2.0, prompt_tokens=8000, output_tokens=4),)
    run = simulate(sc, sim_options(chunked_prefill=chunked), reqs)
    check_little(run)
    gaps = run.itl_series(0)  # a member of the decode batch
    assert gaps.size == 1199
    return float(gaps.max() - np.median(gaps)), float(np.median(gaps))


def test_long_prompt_raises_batch_itl_by_one_chunk_or_by_the_whole_prefill() -> None:
    k = kw(Scenario())
    # Issue 13: a prefill riding in a decode iteration costs its marginal time (the
    # decode step already streams the weights and pays the overhead), PrefillStep.marginal_s.
    # Issue 24: the iteration's token budget (512) holds the 8 running decodes first, so the
    # prompt's chunks are 512 − 8 = 504 tokens.
    chunk_s = [float(prefill_step(tokens=c + min(504, 8000 - c), cached_tokens=c, **k).marginal_s)
               for c in range(0, 8000, 504)]
    whole_s = float(prefill_step(tokens=8000, **k).marginal_s)
    chunked_rise, base = _head_of_line(chunked=True)
    whole_rise, _ = _head_of_line(chunked=False)
    # The seeds' head-of-line example: + one chunk with chunked prefill, + the whole prefill without.
    assert chunked_rise == pytest.approx(max(chunk_s), rel=0.02)
    assert whole_rise == pytest.approx(whole_s, rel=0.02)
    assert whole_rise > 5 * chunked_rise
    assert base == pytest.approx(float(decode_step(batch_size=8, context_tokens=700, **k).step_s), rel=0.05)


def test_kv_budget_below_the_working_set_preempts_and_loses_goodput() -> None:
    opts = sim_options(requests=400, rate_req_s=4.0, seed=3)
    roomy = Scenario(serving={"memory_utilization": 0.9})
    # 0.24 (was 0.25): since issue 13 the engine budget is a fraction of the 85.0 GB CUDA
    # reports on an H100, not of 80 GB; 0.24 × 85.0 − 16.1 GB of weights − activations leaves ~15k tokens.
    tight = Scenario(serving={"memory_utilization": 0.24})
    cap_tokens = plan(tight).memory.kv_budget_bytes / plan(tight).memory.kv_bytes_per_token_per_gpu
    # Working set: ~4 req/s × a few seconds in flight × ~2,250 tokens each exceeds the tight budget.
    assert cap_tokens < 20_000
    a, b = simulate(roomy, opts), simulate(tight, opts)
    check_little(a)
    check_little(b)
    assert a.preemptions == 0
    assert b.preemptions > 0
    sa = summarize(a, slo_ttft_s=1.0, slo_itl_s=0.05)
    sb = summarize(b, slo_ttft_s=1.0, slo_itl_s=0.05)
    assert sb.goodput_req_s < 0.5 * sa.goodput_req_s
    assert sb.peak_kv_utilization == pytest.approx(1.0, abs=0.02)


def test_prefix_affinity_beats_round_robin_on_multi_turn_chat() -> None:
    sc = Scenario()
    base = dict(requests=600, rate_req_s=12.0, replicas=4, multi_turn=6, seed=2)
    rr = summarize(simulate(sc, sim_options(router="round_robin", **base)), slo_ttft_s=1.0, slo_itl_s=0.05)
    pa = summarize(simulate(sc, sim_options(router="prefix_affinity", **base)), slo_ttft_s=1.0, slo_itl_s=0.05)
    assert pa.prefix_hit_rate > rr.prefix_hit_rate + 0.2
    assert pa.ttft_s.p90 < rr.ttft_s.p90
    # Round-robin over 4 replicas lands a turn on its session's replica about 1 time in 4.
    assert rr.prefix_hit_rate < 0.45


def test_router_choices() -> None:
    from planner.simulate import ReplicaLoad, affinity_score, choose_replica

    idle_cold = ReplicaLoad(in_flight=0, pending_tokens=0, kv_utilization=0.0, cached_prefix_tokens=0)
    busy_warm = ReplicaLoad(in_flight=3, pending_tokens=4096, kv_utilization=0.5, cached_prefix_tokens=3000)
    # 1.0 × 3000/4000 − 0.5 × 4096/8192 − 0.5 × 0.5 = 0.75 − 0.25 − 0.25 = 0.25
    assert affinity_score(load=busy_warm, prompt_tokens=4000, w_affinity=1.0, w_queue=0.5, w_kv=0.5,
                          queue_norm_tokens=8192) == pytest.approx(0.25)
    loads = [busy_warm, idle_cold]
    assert choose_replica(policy="prefix_affinity", loads=loads, prompt_tokens=4000, counter=0) == 0
    # Heavier queue weight: 0.75 − 2 × 0.5 − 0.25 < 0, the cold idle replica wins.
    assert choose_replica(policy="prefix_affinity", loads=loads, prompt_tokens=4000, counter=0, w_queue=2.0) == 1
    assert choose_replica(policy="least_loaded", loads=loads, prompt_tokens=4000, counter=0) == 1
    assert [choose_replica(policy="round_robin", loads=loads, prompt_tokens=1, counter=c) for c in range(4)] == [
        0, 1, 0, 1]


def test_shared_system_prompt_hits_the_prefix_cache() -> None:
    sc = Scenario(workload={"prefix_tokens": 1024, "prefix_hit_rate": 1.0}, serving={"chunk_tokens": 4096})
    opts = sim_options(requests=200, rate_req_s=0.05, lengths="fixed", seed=1)  # mostly one at a time
    run = simulate(sc, opts)
    s = summarize(run, slo_ttft_s=1.0, slo_itl_s=0.05)
    # Every request after the first reuses the 1,024-token prefix of its 2,000-token prompt.
    assert s.prefix_hit_rate == pytest.approx(1024 / 2000 * 199 / 200, rel=1e-9)
    k = kw(sc)
    cached = float(prefill_step(tokens=2000, cached_tokens=1024, **k).time_s)
    assert float(np.median(run.ttft_s)) == pytest.approx(cached, rel=1e-6)
    assert cached < 0.6 * float(prefill_step(tokens=2000, **k).time_s)


@pytest.mark.parametrize("iterations", [0.0, None])
def test_disaggregated_first_token_reaches_the_client_with_its_kv(iterations: float | None) -> None:
    """A disaggregated request's first token is sampled by its prefill pool and streamed from its
    decode pool once that takes it in: TTFT = prefill + the exposed KV transfer (its tail behind the
    prefill + the hand-off's setup) + k decode iterations at the decode worker's batch (the take-in,
    k = disagg_handoff_iterations), as the plan has it; the next gap is one decode step."""
    k_iter = term("disagg_handoff_iterations") if iterations is None else iterations
    for setup in (0.0, None):
        sc = Scenario(serving={"mode": "disaggregated", "chunk_tokens": 4096}, fleet={"kv_transfer_setup_s": setup})
        with physics_terms(disagg_handoff_iterations=k_iter):
            run = simulate(sc, sim_options(), (Request(arrival_s=0.0, prompt_tokens=2000, output_tokens=10),))
        k = kw(sc)
        prefill = float(prefill_step(tokens=2000, **k).time_s)
        kv_bytes = 2000 * plan(sc).memory.kv_bytes_per_token
        # The plan's link (issue 13): one 50 GB/s NIC per GPU at 80%, shipped layer by layer behind
        # the prefill: of 32 layers only max(t/32, t − 31/32 × prefill) is exposed, + the setup
        # (stated 0 s, else the calibrated hand-off).
        full = float(kv_transfer_s(kv_bytes=kv_bytes, link_bytes_per_s=50e9, efficiency=0.8))
        handoff = term("disagg_handoff_s") if setup is None else setup
        transfer = max(full / 32, full - 31 / 32 * prefill) + handoff
        # the take-in: k iterations of the decode worker, which holds this request alone
        take_in = k_iter * float(decode_step(batch_size=1, context_tokens=2000, **k).step_s)
        assert float(run.ttft_s[0]) == pytest.approx(prefill + transfer + take_in, rel=1e-3)
        if k_iter == 0:
            assert float(run.ttft_s[0]) == pytest.approx(prefill + transfer, rel=1e-9)
        first_gap = float(run.itl_s[0])
        assert first_gap == pytest.approx(float(decode_step(batch_size=1, context_tokens=2001, **k).step_s), rel=1e-3)
        assert float(run.tpot_s[0]) == pytest.approx(float(np.mean(run.itl_s)), rel=1e-9)
        check_little(run)


def test_disaggregated_pools_serve_a_stream() -> None:
    sc = Scenario(serving={"mode": "disaggregated"})
    run = simulate(sc, sim_options(requests=300, rate_req_s=6.0, prefill_replicas=1, decode_replicas=2, seed=4))
    check_little(run)
    assert run.requests == 300 and np.all(run.finish_s >= run.first_token_s)
    assert [tl["role"] for tl in run.timeline] == ["prefill", "decode", "decode"]
    # Every request's prompt crossed the link before its first token reached the client: 400 Gb/s
    # RDMA at 80%, layer by layer behind its prefill (32 layers), plus the calibrated hand-off.
    k = kw(sc)
    kv_per_token = plan(sc).memory.kv_bytes_per_token
    for i in np.flatnonzero(run.output_tokens > 1)[:50]:
        n = int(run.prompt_tokens[i])
        prefill = float(prefill_step(tokens=n, **k).time_s)
        full = n * kv_per_token / (0.8 * 50e9)
        exposed = max(full / 32, full - 31 / 32 * prefill) + term("disagg_handoff_s")
        assert run.ttft_s[i] >= (prefill + exposed) * (1 - 1e-9)
        assert run.itl_series(int(i))[0] > 0


def test_same_seed_same_results_other_seed_differs() -> None:
    sc = Scenario()
    opts = sim_options(requests=300, rate_req_s=5.0, arrival="gamma", burstiness=0.5, seed=11, replicas=2,
                       router="least_loaded")
    a = summarize(simulate(sc, opts), slo_ttft_s=1.0, slo_itl_s=0.05, timeline=True)
    b = summarize(simulate(sc, opts), slo_ttft_s=1.0, slo_itl_s=0.05, timeline=True)
    c = summarize(simulate(sc, opts.model_copy(update={"seed": 12})), slo_ttft_s=1.0, slo_itl_s=0.05)
    assert a == b and a.timeline is not None and c.timeline is None
    assert a.e2e_s != c.e2e_s
    # The Tail page caches reports with st.cache_data, which pickles them.
    assert pickle.loads(pickle.dumps(a)) == a


def test_goodput_falls_past_the_knee() -> None:
    from planner.simulate import rate_sweep

    sc = Scenario()
    result = rate_sweep(sc, sim_options(requests=300, seed=1), [2.0, 5.0, 12.0])
    levels = result.levels
    assert [lv.offered_rate_req_s for lv in levels] == [2.0, 5.0, 12.0]
    assert levels[0].slo_attainment >= 0.99
    assert levels[-1].slo_attainment < 0.5  # 12 req/s of 2,000-token prompts saturates one H100
    assert result.knee_rate_req_s in (2.0, 5.0)
    for lv in levels:
        assert lv.offered_rate_req_s is not None
        assert lv.goodput_req_s <= lv.offered_rate_req_s * 1.25  # Poisson sample of 300 arrivals
    # Below the knee nearly every request meets the SLO: goodput ≈ the offered rate
    # (not the completions over a run that includes its final drain).
    assert levels[0].goodput_req_s == pytest.approx(2.0, rel=0.15)
    assert levels[-1].goodput_req_s < 12.0 / 2
    assert pickle.loads(pickle.dumps(result)) == result


@pytest.mark.parametrize("router", ["round_robin", "prefix_affinity"])
def test_kv_blocks_are_conserved_under_preemption_and_prefix_sharing(router: str) -> None:
    from planner.simulate import simulate

    sc = Scenario(serving={"memory_utilization": 0.3})
    opts = sim_options(requests=300, rate_req_s=8.0, replicas=2, multi_turn=4, think_s=1.0, router=router, seed=9)
    run = simulate(sc, opts)
    assert run.preemptions > 0  # the small KV budget forces preemption
    assert int(run.hit_tokens.sum()) > 0  # and chat turns reuse their cached prefixes
    assert len(run.kv_blocks) == 2
    for blocks in run.kv_blocks:
        # Every sequence released its blocks; only cached prefixes (unreferenced) remain.
        assert blocks.referenced == 0
        assert blocks.free + blocks.cached == blocks.capacity
        assert blocks.capacity * sc.serving.block_tokens == run.kv_capacity_tokens
    for tl in run.timeline:
        assert 0.0 <= min(tl["kv_utilization"]) and max(tl["kv_utilization"]) <= 1.0
