"""Whatever the sweep names cheapest passes its simulation (issue 24): a property over
catalog scenarios, few examples, short simulations, deterministic seeds."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import Scenario, sweep, sweep_row_scenario
from planner.simulate.referee import referee_check, simulator

REQUESTS = 300  # a short run per candidate: the property is about the pick, not the estimate

models = st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b"])
gpus = st.sampled_from(["h100-sxm", "h200-sxm", "l40s"])


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(model=models, gpu=gpus, rate=st.sampled_from([5.0, 20.0]), prompt=st.sampled_from([500, 2000]))
def test_the_sweeps_cheapest_passes_its_simulation(model: str, gpu: str, rate: float, prompt: int) -> None:
    base = Scenario(model=model, gpu=gpu, workload={"requests_per_s": rate, "prompt_tokens": prompt,
                                                     "output_tokens": 200})
    result = sweep(base, gpus=[gpu], dtypes=["fp8"], tps=[1, 2], pps=[1], chunks=[2048],
                   referee=simulator(requests=REQUESTS), referee_cap=3)
    cheapest = result["cheapest"]
    if cheapest is None:  # nothing feasible, or none of the 3 cheapest passed: nothing is named
        assert all(not s["passed"] for s in result["simulated"])
        return
    check = referee_check(sweep_row_scenario(base, cheapest), requests=REQUESTS)
    assert check is not None and check.passed and check.attainment == cheapest["simulated_attainment"]
    # Every cheaper feasible candidate was simulated and failed.
    cheaper = [i for i, r in enumerate(result["rows"]) if r["feasible"]
               and r["usd_per_mtok_output"] < cheapest["usd_per_mtok_output"]]
    failed = {s["row"] for s in result["simulated"] if not s["passed"]}
    assert set(cheaper) <= failed
