"""Autoscaling over a day: replicas per control interval under a policy, GPU-hours and $ per day.

* The day is cut into control intervals of ``fleet.scale_interval_s`` (the last one
  may be shorter).  An interval's rate is the profile's highest rate in it, so the
  replicas sized for it cover the whole interval.
* Each pool's need at rate r is the plan's own sizing with the peak rate set to r
  (``operating_arrays``: colocated max(min_replicas, ⌈r / (u × goodput)⌉) at the
  largest batch meeting ITL, KV and the p90 TTFT of the M/G/c pool of prefill
  servers; disaggregated, the decode pool likewise on ITL and KV, the prefill pool
  grown until its M/G/c p90 TTFT meets the target): one load model.
* Policies (D = the scale-up delay):
  - ``static``: the peak fleet (the profile's highest rate) around the clock;
  - ``predictive``: each interval's need is ordered D ahead from the profile and
    serves from the interval's start;
  - ``reactive``: at each interval boundary the controller reads the signals (the
    load the interval brings) and orders the difference; added replicas serve D
    later, the first ``warm_pool_replicas`` of them at once from the warm pool
    (which reloads in D).
  Both elastic policies keep a replica until the need has stayed lower for
  ``scale_down_delay_s`` (hysteresis), then drain and release it.  The controller
  runs over two days and the second is reported (the daily steady state).
* Billing: a replica is paid from its order (weights loading) to its release; warm
  pool replicas are paid all day.  GPU-hours = Σ mean GPUs × interval s / 3600;
  $/day = GPU-hours × $/GPU-hour; $/Mtok = $/day / (requests per day × mean output
  tokens / 1e6); savings = 1 − GPU-hours / static GPU-hours.
* An interval meets the SLO (analytically) when the replicas serving at its start
  hold its rate within both targets: the same sizing with min_replicas = those
  replicas and no utilization headroom needs no more than them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from planner.errors import ScenarioError
from planner.sizing.operating import OperatingArrays, operating_arrays, workload_stats
from planner.sizing.pools import pools_set
from planner.spec.context import Resolved, resolve
from planner.spec.derivation import Derivation, fmt_num
from planner.spec.profile import DAY_S, ProfilePoint, profile_integral, profile_max
from planner.spec.scenario import Scenario

__all__ = [
    "MAX_DAY_INTERVALS",
    "MIN_DAY_INTERVAL_S",
    "MIN_SIZING_RATE",
    "POLICIES",
    "AutoscaleResult",
    "AutoscaleStep",
    "AutoscaleSummary",
    "Sizer",
    "autoscale",
    "compare_policies",
    "day_profile",
    "scale_up_delay",
]

POLICIES = ("static", "reactive", "predictive")
# An interval with no traffic is sized at this rate (the min_replicas floor then holds).
MIN_SIZING_RATE = 1e-6
# Control intervals in a day: each is sized (the plan's sizing at its rate, twice), and on
# the Autoscaling page drawn and, on demand, simulated.  A 10 s interval (8,640 of them)
# reran the page for 187 s at 2.35 GB and overflowed its charts; 720 (2-minute intervals)
# is about 5× the default 600 s interval's 144.
MAX_DAY_INTERVALS = 720
MIN_DAY_INTERVAL_S = DAY_S / MAX_DAY_INTERVALS
_F = ConfigDict(frozen=True, extra="forbid")


class AutoscaleStep(BaseModel):
    """One control interval (SI units; replicas serving at its start)."""

    model_config = _F
    t_s: float
    duration_s: float
    requests_per_s: float  # the interval's highest rate (what it is sized for)
    mean_requests_per_s: float
    prefill_replicas: int  # 0 colocated
    decode_replicas: int  # 0 colocated
    replicas: int
    needed_replicas: int
    gpus: float  # mean GPUs billed over the interval (loading and warm pool included)
    ttft_p90_s: float | None  # analytic, at the serving replicas (None: they cannot hold the rate)
    itl_p90_s: float | None  # at slo.itl_percentile
    kv_occupancy: float | None  # decode batch / KV capacity in sequences
    covered_fraction: float  # share of the interval with the needed replicas serving
    meets_slo: bool  # analytic verdict
    slo_attainment: float | None = None  # simulated (None: not simulated)
    # replicas joining during the interval (s after its start): colocated or prefill pool, decode pool
    join_offsets_s: tuple[float, ...] = ()
    decode_join_offsets_s: tuple[float, ...] = ()


class AutoscaleSummary(BaseModel):
    model_config = _F
    policy: str
    gpu_hours: float
    usd_per_day: float
    usd_per_mtok_output: float
    slo_attainment: float | None  # simulated
    worst_step_slo_attainment: float | None  # simulated
    static_gpu_hours: float
    savings_fraction: float
    scale_up_delay_s: float
    steps_meeting_slo: float  # analytic share of intervals
    peak_gpus: float
    min_gpus: float
    requests_per_day: float
    usd_per_gpu_hour: float


class AutoscaleResult(BaseModel):
    model_config = _F
    steps: tuple[AutoscaleStep, ...]
    summary: AutoscaleSummary
    derivations: dict[str, Derivation]

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def day_profile(scenario: Scenario) -> tuple[ProfilePoint, ...]:
    """The scenario's profile, or a flat day at the peak rate when it has none."""
    w = scenario.workload
    return w.profile if w.profile is not None else (ProfilePoint(t_s=0.0, requests_per_s=w.peak_rate),)


def _peak(scenario: Scenario) -> float:
    w = scenario.workload
    return profile_max(w.profile) if w.profile is not None else w.peak_rate


@dataclass(frozen=True)
class _Need:
    prefill: int
    decode: int
    replicas: int
    feasible: bool
    reason: str
    op: OperatingArrays


class Sizer:
    """The plan's sizing at any rate (cached by rate and floor)."""

    def __init__(self, resolved: Resolved) -> None:
        self.r = resolved
        self.stats = workload_stats(resolved)
        self._cache: dict[tuple[float, int, bool], _Need] = {}

    def need(self, rate: float, *, floor: int | None = None, headroom: bool = True) -> _Need:
        """Replicas per pool at ``rate``: the plan's sizing with the peak rate set to it
        (``floor``: min_replicas instead of the scenario's; no ``headroom``: utilization 1)."""
        s = self.r.scenario
        rate = max(rate, MIN_SIZING_RATE)
        f = s.fleet.min_replicas if floor is None else max(floor, 1)
        key = (rate, f, headroom)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        w = s.workload.model_copy(update={"requests_per_s": rate, "peak_requests_per_s": rate})
        fl = s.fleet.model_copy(update={"min_replicas": f} if headroom else {"min_replicas": f,
                                                                             "target_utilization": 1.0})
        rr = replace(self.r, scenario=s.model_copy(update={"workload": w, "fleet": fl}))
        p = s.parallel
        op = operating_arrays(rr, tp=[p.tp], pp=[p.pp], ep=[p.ep], mode=s.serving.mode, stats=self.stats)
        ok = bool(op.feasible[0])
        disagg = s.serving.mode == "disaggregated"

        def n(a: Any) -> int:
            return int(a[0]) if ok and math.isfinite(float(a[0])) else 0

        out = _Need(prefill=n(op.prefill_replicas) if disagg else 0, decode=n(op.decode_replicas) if disagg else 0,
                    replicas=n(op.replicas), feasible=ok, reason=str(op.reason[0]), op=op)
        self._cache[key] = out
        return out


def scale_up_delay(r: Resolved, op: OperatingArrays) -> tuple[float, Derivation]:
    """fleet.scale_up_delay_s, or engine start + weight bytes per GPU / load bytes/s (a cold start)."""
    fl = r.scenario.fleet
    if fl.scale_up_delay_s is not None:
        return fl.scale_up_delay_s, Derivation(name="fleet.scale_up_delay_s", formula="given",
                                               substituted=fmt_num(fl.scale_up_delay_s), value=fl.scale_up_delay_s,
                                               unit="s", origin="input")
    wg = float(op.weight_bytes_per_gpu[0])
    value = fl.engine_start_s + wg / fl.load_bytes_per_s
    return value, Derivation(
        name="fleet.scale_up_delay_s",
        formula="engine start + weight bytes per GPU / load bytes/s per GPU (the plan's fleet.cold_start_s)",
        substituted=f"{fmt_num(fl.engine_start_s)} + {fmt_num(wg / 1e9)} GB / {fmt_num(fl.load_bytes_per_s / 1e9)} GB/s",
        value=value, unit="s", origin="default")


@dataclass
class _Unit:
    order_s: float
    ready_s: float
    release_s: float = math.inf


def _controller(needs: list[int], starts: list[float], policy: str, delay: float, warm: int,
                down_s: float) -> list[_Unit]:
    """Replicas of one pool over two days (boundaries at ``starts`` and a day later)."""
    n = len(needs)
    units = [_Unit(-DAY_S, -DAY_S) for _ in range(needs[0])]
    warm_ready: list[float] = [-DAY_S] * warm  # when each warm-pool slot is loaded
    window: list[tuple[float, int]] = []
    for day in (0.0, DAY_S):
        for k in range(n):
            t = starts[k] + day
            window = [(ts, v) for ts, v in window if ts > t - down_s - 1e-9] + [(t, needs[k])]
            target = max(v for _, v in window) if policy != "static" else needs[k]
            active = [u for u in units if u.release_s == math.inf]
            if target > len(active):
                for _ in range(target - len(active)):
                    if policy == "predictive":
                        units.append(_Unit(t - delay, t))
                        continue
                    slot = min(range(warm), key=lambda i: warm_ready[i], default=-1)
                    if slot >= 0 and warm_ready[slot] <= t:
                        units.append(_Unit(t, t))
                        warm_ready[slot] = t + delay
                    else:
                        units.append(_Unit(t, t + delay))
            elif target < len(active):
                # release the newest first (still-loading replicas before serving ones); serving ones drain
                for u in sorted(active, key=lambda u: u.ready_s, reverse=True)[:len(active) - target]:
                    u.release_s = t
    return units


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


@dataclass(frozen=True)
class _PoolDay:
    ready: list[int]  # serving at each interval's start
    covered: list[float]  # share of the interval with the need serving
    billed: list[float]  # replica-seconds paid
    joins: list[tuple[float, ...]]  # replicas joining during the interval: seconds after its start


def _pool_steps(units: list[_Unit], needs: list[int], starts: list[float], durs: list[float]) -> _PoolDay:
    """One pool's intervals on day 2 of the controller's run."""
    ready, covered, billed, joins = [], [], [], []
    for k, (t0, d) in enumerate(zip(starts, durs, strict=True)):
        a, b = t0 + DAY_S, t0 + DAY_S + d
        live = [u for u in units if u.release_s > a and u.order_s < b]
        at_start = sum(1 for u in live if u.ready_s <= a)
        ready.append(at_start)
        joins.append(tuple(sorted(u.ready_s - a for u in live if a < u.ready_s < b)))
        if at_start >= needs[k]:
            covered.append(1.0)
        else:
            later = sorted(u.ready_s for u in live if a < u.ready_s < b)
            missing = needs[k] - at_start
            covered.append((b - later[missing - 1]) / d if len(later) >= missing else 0.0)
        billed.append(sum(_overlap(u.order_s, u.release_s, a, b) for u in live))
    return _PoolDay(ready, covered, billed, joins)


def _intervals(interval_s: float) -> tuple[list[float], list[float]]:
    n = math.ceil(DAY_S / interval_s - 1e-9)
    if n > MAX_DAY_INTERVALS:
        raise ScenarioError(f"fleet.scale_interval_s: {interval_s:g} s cuts the day into {n:,} control intervals, over "
                            f"the limit of {MAX_DAY_INTERVALS:,} (MAX_DAY_INTERVALS); use at least "
                            f"{MIN_DAY_INTERVAL_S:g} s")
    starts = [k * interval_s for k in range(n)]
    return starts, [min(interval_s, DAY_S - t) for t in starts]


def autoscale(scenario: Scenario, policy: str | None = None, *, sizer: Sizer | None = None) -> AutoscaleResult:
    """Replicas, GPUs and latencies per control interval under ``policy`` (default: fleet.policy)."""
    sz = sizer or Sizer(resolve(scenario))
    s = sz.r.scenario
    if s.serving.mode == "disaggregated" and pools_set(s):
        raise ScenarioError("prefill/decode: the autoscaling day sizes one GPU and layout for both pools; pools with "
                            "their own gpu or parallel are planned by `plan` and the Fleet page only (unset "
                            "prefill and decode here)")
    pol = policy or s.fleet.policy
    prof = day_profile(s)
    disagg = s.serving.mode == "disaggregated"
    g = sz.r.gpus_per_replica
    peak = _peak(s)
    peak_need = sz.need(peak)
    delay, delay_d = scale_up_delay(sz.r, peak_need.op)
    starts, durs = _intervals(s.fleet.scale_interval_s)
    rates = [min(profile_max(prof, t, t + d), peak) for t, d in zip(starts, durs, strict=True)]
    needs = [sz.need(r) for r in rates]  # each interval's own need
    held = [peak_need] * len(rates) if pol == "static" else needs  # what the controller provisions for
    pools = ("prefill", "decode") if disagg else ("replicas",)
    warm = 0 if pol == "static" else s.fleet.warm_pool_replicas
    per_pool: dict[str, _PoolDay] = {}
    for pool in pools:
        nd = [getattr(x, pool) for x in needs]
        units = _controller([getattr(x, pool) for x in held], starts, pol, delay, warm, s.fleet.scale_down_delay_s)
        per_pool[pool] = _pool_steps(units, nd, starts, durs)
    steps = []
    per_gpu_hour = sz.r.usd_per_gpu_hour + ((sz.r.gpu.tdp_w * s.cost.pue * s.cost.usd_per_kwh / 1000.0)
                                            if s.cost.usd_per_kwh else 0.0)
    for k, (t0, d) in enumerate(zip(starts, durs, strict=True)):
        ready = {p: per_pool[p].ready[k] for p in pools}
        total = sum(ready.values())
        billed = sum(per_pool[p].billed[k] for p in pools) + warm * len(pools) * d
        cov = min(per_pool[p].covered[k] for p in pools)
        ev = sz.need(rates[k], floor=min(ready.values()), headroom=False)
        fits = ev.feasible and (ev.prefill <= ready["prefill"] and ev.decode <= ready["decode"] if disagg
                                else ev.replicas <= total)
        op = ev.op
        steps.append(AutoscaleStep(
            t_s=t0, duration_s=d, requests_per_s=rates[k], mean_requests_per_s=profile_integral(prof, t0, t0 + d) / d,
            prefill_replicas=ready.get("prefill", 0), decode_replicas=ready.get("decode", 0), replicas=total,
            needed_replicas=needs[k].replicas, gpus=billed * g / d,
            ttft_p90_s=float(op.ttft_p90_s[0]) if fits else None,
            itl_p90_s=float(op.fleet_itl_percentile_s[0]) if fits else None,
            kv_occupancy=float(op.fleet_batch_size[0] / op.max_sequences[0]) if fits and op.max_sequences[0] > 0
            else None,
            covered_fraction=cov, meets_slo=bool(fits and needs[k].feasible),
            join_offsets_s=per_pool[pools[0]].joins[k], decode_join_offsets_s=per_pool[pools[-1]].joins[k] if disagg
            else ()))
    return _result(sz, pol, steps, peak_need, per_gpu_hour, delay, delay_d, prof)


def _result(sz: Sizer, pol: str, steps: list[AutoscaleStep], peak_need: _Need, per_gpu_hour: float, delay: float,
            delay_d: Derivation, prof: tuple[ProfilePoint, ...]) -> AutoscaleResult:
    s = sz.r.scenario
    g = sz.r.gpus_per_replica
    gpu_hours = sum(st.gpus * st.duration_s for st in steps) / 3600.0
    static_gpu_hours = peak_need.replicas * g * DAY_S / 3600.0
    usd = gpu_hours * per_gpu_hour
    requests = profile_integral(prof)
    mtok = requests * sz.stats.mean_output / 1e6
    d: dict[str, Derivation] = {"scale_up_delay_s": delay_d}
    busiest = max(steps, key=lambda st: st.requests_per_s)
    op = sz.need(busiest.requests_per_s).op
    u = s.fleet.target_utilization
    if s.serving.mode == "disaggregated":
        sub = (f"(prefill {sz.need(busiest.requests_per_s).prefill} (M/G/c p90 TTFT ≤ {fmt_num(s.slo.ttft_s)} s) + "
               f"decode max({s.fleet.min_replicas}, ⌈{fmt_num(busiest.requests_per_s)} / ({u} × "
               f"{fmt_num(float(op.goodput_req_s_per_replica[0]))})⌉)) × {g}")
    else:
        sub = (f"max({s.fleet.min_replicas}, ⌈{fmt_num(busiest.requests_per_s)} / ({u} × "
               f"{fmt_num(float(op.goodput_req_s_per_replica[0]))})⌉) × {g}")
    d["interval_gpus"] = Derivation(
        name="interval_gpus", formula=f"the busiest interval (t = {fmt_num(busiest.t_s)} s) sized like the plan at its "
                                      "rate: replicas per pool × GPUs per replica", substituted=sub,
        value=sz.need(busiest.requests_per_s).replicas * g, unit="GPUs")
    d["gpu_hours"] = Derivation(name="gpu_hours", formula="Σ mean GPUs billed × interval s / 3600",
                                substituted=f"Σ over {len(steps)} intervals", value=gpu_hours, unit="GPU-h")
    d["usd_per_day"] = Derivation(name="usd_per_day", formula="GPU-hours × $/GPU-hour",
                                  substituted=f"{fmt_num(gpu_hours)} × {fmt_num(per_gpu_hour)}", value=usd, unit="USD",
                                  origin=sz.r.origins["cost.usd_per_gpu_hour"])
    d["savings_fraction"] = Derivation(
        name="savings_fraction", formula="1 − GPU-hours / static GPU-hours (peak replicas × GPUs × 24 h)",
        substituted=f"1 − {fmt_num(gpu_hours)} / ({peak_need.replicas} × {g} × 24)",
        value=1.0 - gpu_hours / static_gpu_hours if static_gpu_hours > 0 else 0.0, unit="")
    summary = AutoscaleSummary(
        policy=pol, gpu_hours=gpu_hours, usd_per_day=usd, usd_per_mtok_output=usd / mtok if mtok > 0 else math.inf,
        slo_attainment=None, worst_step_slo_attainment=None, static_gpu_hours=static_gpu_hours,
        savings_fraction=d["savings_fraction"].value, scale_up_delay_s=delay,
        steps_meeting_slo=sum(st.duration_s for st in steps if st.meets_slo) / DAY_S,
        peak_gpus=max(st.gpus for st in steps), min_gpus=min(st.gpus for st in steps), requests_per_day=requests,
        usd_per_gpu_hour=per_gpu_hour)
    return AutoscaleResult(steps=tuple(steps), summary=summary, derivations=d)


def compare_policies(scenario: Scenario) -> dict[str, AutoscaleResult]:
    """The three policies on one scenario (one sizing cache)."""
    sz = Sizer(resolve(scenario))
    return {p: autoscale(scenario, p, sizer=sz) for p in POLICIES}
