"""One pass: the Plan's sections read the numbers operating_arrays computed instead of
computing them again, and what they read is what a separate computation would give."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import plan, prefill_step, resolve, scenario_from_dict
from planner.physics.step import prefill_chunks
from planner.sizing import chunk_times_at, mean_prefill, operating_arrays, workload_stats
from tests.strategies import gpu_ids, model_ids

scenarios = st.fixed_dictionaries({
    "model": model_ids, "gpu": gpu_ids, "parallel": st.fixed_dictionaries({"tp": st.sampled_from([1, 2, 8])}),
    "workload": st.fixed_dictionaries({
        "prompt_tokens": st.integers(16, 20_000), "prefix_tokens": st.integers(0, 4000),
        "prefix_hit_rate": st.sampled_from([0.0, 0.3, 1.0]),
        "distribution": st.sampled_from(["fixed", "lognormal"]), "prompt_sigma": st.just(0.6)}),
    "serving": st.fixed_dictionaries({"mode": st.sampled_from(["colocated", "disaggregated"]),
                                      "chunk_tokens": st.sampled_from([256, 2048, 8192])}),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=scenarios)
def test_chunk_times_read_from_the_arrays_are_the_chunks_computed_alone(data: dict) -> None:
    w = data["workload"]
    w["prefix_tokens"] = min(w["prefix_tokens"], w["prompt_tokens"])
    r = resolve(scenario_from_dict(data))
    s = r.scenario
    stats = workload_stats(r)
    op = operating_arrays(r, tp=[s.parallel.tp], pp=[s.parallel.pp], ep=[s.parallel.ep], mode=s.serving.mode,
                          stats=stats, max_batch=4)
    prompt = float(s.workload.prompt_tokens)
    hit_cached = mean_prefill(r).hit_cached_tokens
    for cached in (0.0, hit_cached):
        got = chunk_times_at(op, 0, prompt_tokens=prompt, cached_tokens=cached)
        in_classes = bool(((stats.class_prompt == prompt) & (stats.class_cached == cached)).any())
        assert (got is not None) == in_classes
        if s.workload.distribution == "fixed" and (cached == 0.0) == (stats.prefix_hit_rate < 1.0):
            assert got is not None  # fixed lengths: the mean prompt is a class, read, not recomputed
        if got is not None:
            pc = prefill_chunks(new_tokens=[prompt - cached], cached_tokens=[cached],
                                chunk_tokens=s.serving.chunk_tokens, **r.step_kwargs())
            alone = [float(x) for x, m in zip(pc.marginal_s[0], pc.mask[0], strict=True) if m]
            assert got == alone


@settings(max_examples=40, deadline=None)
@given(data=scenarios)
def test_mean_prefill_is_each_prefill_computed_alone_and_both_sections_read_it(data: dict) -> None:
    w = data["workload"]
    w["prefix_tokens"] = min(w["prefix_tokens"], w["prompt_tokens"])
    sc = scenario_from_dict(data)
    r = resolve(sc)
    mp = mean_prefill(r)
    kw = r.step_kwargs()
    n, pre = sc.workload.prompt_tokens, sc.workload.prefix_tokens
    for got, cached in ((mp.miss, 0), (mp.hit, min(pre, n - 1)), (mp.warm, pre)):
        alone = prefill_step(tokens=n, cached_tokens=cached, **kw)
        assert got.time_s == float(alone.time_s) and got.flops == float(alone.flops)
        assert got.compute_bound == bool(alone.compute_bound)
    p = plan(sc)
    assert p.routing.cold_ttft_s == mp.miss.time_s and p.routing.warm_ttft_s == mp.warm.time_s
    h = sc.workload.prefix_hit_rate if pre > 0 else 0.0
    if h == 0.0:
        assert p.prefill.time_s == p.routing.cold_ttft_s  # one number, two sections
