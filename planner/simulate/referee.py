"""The simulation the referee (``planner.views.referee``) calls: a scenario's plan, its
fleet simulated briefly at the peak rate with the plan's router, and the share of
requests meeting both targets.

Pages and the CLI pass :func:`simulated_attainment` to the views' pickers
(``sweep_result``, ``compare_columns``, ``gpu_variants``, ``mode_verdict``, the report),
and :func:`refereed_sweep` is the sweep as the CLI prints it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from planner.simulate.fleetcheck import CHECK_MAX_REQUESTS, REFEREE_MAX_REQUESTS, FleetCheck, fleet_check
from planner.sizing.plan import plan
from planner.spec.scenario import Scenario
from planner.views.referee import REFEREE_MAX_SIMULATED, Simulate
from planner.views.report import DEFAULT_APP_URL, SimulatedCheck, review_report_html
from planner.views.sweep import DEFAULT_PP, DEFAULT_TP, MODES, SweepResult, sweep_result

__all__ = ["checked_report_html", "referee_check", "refereed_sweep", "report_check", "simulated_attainment",
           "simulator"]


def referee_check(scenario: Scenario, *, requests: int = REFEREE_MAX_REQUESTS, seed: int = 0) -> FleetCheck | None:
    """The short simulated check of the scenario's plan (None: no fleet to simulate)."""
    return fleet_check(plan(scenario), scenario, seed=seed, max_requests=requests)


def simulated_attainment(scenario: Scenario) -> float | None:
    """Share of requests meeting both targets in a short run of the plan's fleet (seed 0)."""
    check = referee_check(scenario)
    return None if check is None else check.attainment


def simulator(*, requests: int = REFEREE_MAX_REQUESTS, seed: int = 0) -> Simulate:
    """A ``Simulate`` with its own run length and seed (tests, benches)."""

    def run(scenario: Scenario) -> float | None:
        check = referee_check(scenario, requests=requests, seed=seed)
        return None if check is None else check.attainment

    return run


def refereed_sweep(base: Scenario, *, gpus: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
                   tps: Sequence[int] = DEFAULT_TP, pps: Sequence[int] = DEFAULT_PP, eps: Sequence[int] | None = None,
                   chunks: Sequence[int] | None = None, modes: Sequence[str] = MODES,
                   cap: int = REFEREE_MAX_SIMULATED, simulate: Simulate | None = None) -> SweepResult:
    """The sweep with its ``cheapest`` refereed by the simulator."""
    return sweep_result(base, gpus=gpus, dtypes=dtypes, tps=tps, pps=pps, eps=eps, chunks=chunks, modes=modes,
                        referee=simulate or simulated_attainment, referee_cap=cap)


def report_check(scenario: Scenario, *, seed: int = 0) -> SimulatedCheck | None:
    """The simulated check the review report carries (the Plan page's check: up to
    CHECK_MAX_REQUESTS requests on a slice of the plan's fleet)."""
    c = fleet_check(plan(scenario), scenario, seed=seed, max_requests=CHECK_MAX_REQUESTS)
    if c is None:
        return None
    return SimulatedCheck(attainment=c.attainment, target=c.target, ttft_p90_s=c.ttft_p90_s, ttft_p99_s=c.ttft_p99_s,
                          tpot_percentile=c.tpot_percentile, tpot_percentile_s=c.tpot_percentile_s,
                          itl_mean_s=c.itl_mean_s, gap_p99_s=c.gap_p99_s,
                          description=f"{c.sim.describe()}, {c.sim.options.router.replace('_', ' ')} router")


def checked_report_html(scenario: Scenario, *, share_url: str | None = None, app_url: str = DEFAULT_APP_URL,
                        now: datetime | None = None, charts: bool = True, deploy_target: str | None = None) -> str:
    """The review report with its simulated check and the refereed mode verdict: what
    ``python -m planner report`` and the Plan page's download write (``deploy_target``: list that
    deploy target's commands)."""
    return review_report_html(scenario, share_url=share_url, app_url=app_url, now=now, charts=charts,
                              simulated=report_check(scenario), referee=simulated_attainment,
                              deploy_target=deploy_target)
