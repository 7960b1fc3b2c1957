"""What a review report says, as text a reader can take in: the answer, the
scenario, the SLO check (each target beside the value checked and its
statistic), the fleet, the cost, the alternatives, derivations with their
origins, assumptions, warnings and catalog sources.

Every value here is already formatted (``numbers``); the HTML renderer only
escapes and lays it out.  No Streamlit, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from planner.physics.speculative import drafter_for
from planner.sizing.plan import Plan, plan
from planner.sizing.pools import pools_set
from planner.spec.catalog import load_catalog, on_demand_quotes
from planner.spec.context import resolve
from planner.spec.scenario import Scenario
from planner.spec.share import share_token
from planner.views.pools import pool_rows
from planner.views.referee import Simulate
from planner.views.report.alternatives import Alternative, alternatives
from planner.views.report.derivations import DERIVATION_GROUPS, DerivationRow, _derivations
from planner.views.report.derivations import DERIVATION_LABELS as DERIVATION_LABELS
from planner.views.report.numbers import count, is_number, missing, percent, quantity, readable_text, sig, usd
from planner.views.report.simulated import SimulatedCheck, band_row, latency_rows
from planner.views.review import mode_verdict
from planner.views.vocabulary import SloCheck, plan_attainment, plan_slo_checks

__all__ = [
    "DEFAULT_APP_URL",
    "DERIVATION_GROUPS",
    "DerivationRow",
    "ReviewReport",
    "ReportRow",
    "Source",
    "review_report",
]

# Where `make run` serves the app (the Makefile's PORT); a share link in a report
# written by the CLI points here unless --app-url says otherwise.
DEFAULT_APP_URL = "http://localhost:8501/"


@dataclass(frozen=True)
class ReportRow:
    label: str
    value: str
    note: str = ""
    passed: bool | None = None  # a checked row (the SLO table): pass or fail



@dataclass(frozen=True)
class Source:
    what: str
    name: str
    url: str
    note: str


@dataclass(frozen=True)
class ReviewReport:
    """A review, every value already text (see ``report_html``)."""

    title: str
    scenario_name: str
    generated_at: str
    share_url: str
    answer: tuple[ReportRow, ...]
    verdict: str
    feasible: bool
    scenario: tuple[ReportRow, ...]
    slo: tuple[SloCheck, SloCheck]  # the plan's own checks, as every page shows them (planner.views.vocabulary)
    slo_notes: tuple[str, str]  # what the report adds to each check's basis ("" for none)
    limits: tuple[ReportRow, ...]  # the batch fits the KV budget; prefill keeps up or the KV transfer fits
    fleet: tuple[ReportRow, ...]
    cost: tuple[ReportRow, ...]
    alternatives: tuple[Alternative, ...]
    alternatives_note: str
    derivations: tuple[DerivationRow, ...]
    assumptions: tuple[ReportRow, ...]
    warnings: tuple[str, ...]
    sources: tuple[Source, ...]
    plan: Plan = field(repr=False)
    scenario_model: Scenario = field(repr=False)
    deployment: tuple[ReportRow, ...] = ()  # the chosen deploy target's commands (views/report/deployment.py)

    @property
    def slo_rows(self) -> tuple[ReportRow, ...]:
        """The SLO table: each target (label), the value checked, the statistic (note), pass or fail."""
        return tuple(_slo_row(c, n) for c, n in zip(self.slo, self.slo_notes, strict=True)) + self.limits


def _slo_target(c: SloCheck) -> str:
    return f"{c.metric} ≤ {quantity(c.target_s, 's')}"


def _slo_row(c: SloCheck, note: str) -> ReportRow:
    """A vocabulary SloCheck as a row of the report's SLO table: a missing value fails."""
    why = c.why_missing or ("queue unstable" if c.metric == "TTFT" else "")
    return ReportRow(label=_slo_target(c), value=quantity(c.value_s, "s", why),
                     note=f"{c.label} ({c.basis})" + (f"; {note}" if note else ""), passed=bool(c.passed))


def _replicas(p: Plan) -> str:
    f = p.fleet
    if f.mode == "disaggregated":
        if not (is_number(f.prefill_replicas) and is_number(f.decode_replicas)):
            return missing("no operating point meets the SLO")
        return f"{count(f.prefill_replicas)} prefill + {count(f.decode_replicas)} decode"
    return count(f.replicas, "no operating point meets the SLO")


def _slo_notes(p: Plan) -> tuple[str, str]:
    """What the report says beside the TTFT and TPOT checks' basis."""
    op = p.operating_point
    ttft = f"p99 {quantity(op.ttft_p99_s, 's')}"
    if op.mode == "colocated":
        return ttft, (f"mean ITL {quantity(op.itl_s, 's')}; the token-gap p99 is {quantity(op.itl_gap_p99_s, 's')} "
                      f"(a step that carries the longest chunk takes {quantity(op.itl_worst_s, 's')}), "
                      "averaged over each request's output in its TPOT")
    return ttft, "on the decode pool (no prefill there): every gap is one decode step"


def _limits(s: Scenario, p: Plan, check: SimulatedCheck | None = None) -> tuple[ReportRow, ...]:
    """The verdict rows (the share of requests meeting both targets, analytic and simulated)
    and the checks beside the SLO that make its numbers hold: the batch fits the KV budget,
    and prefill keeps up (colocated) or the KV transfer fits in the TTFT target (disaggregated)."""
    op, f, slo = p.operating_point, p.fleet, s.slo
    a = plan_attainment(p, s)
    checks = [ReportRow(
        label=f"requests meeting both targets ≥ {percent(slo.attainment)}",
        value=percent(a.value, "no operating point") if is_number(a.value) else missing("no operating point"),
        note=(f"analytic: TTFT within target for {percent(a.ttft_share)}, TPOT for {percent(a.tpot_share)} "
              "(taken as independent); the criterion the plan is feasible by"), passed=bool(a.passed))]
    if slo.itl_gap_p99_s is not None:
        checks.append(ReportRow(
            label=f"token-gap p99 ≤ {quantity(slo.itl_gap_p99_s, 's')}", value=quantity(op.itl_gap_p99_s, "s"),
            note="p99 of all token gaps at the operating batch (the chunk stall)",
            passed=is_number(op.itl_gap_p99_s) and op.itl_gap_p99_s <= slo.itl_gap_p99_s))
    if check is not None:
        checks.append(ReportRow(
            label=f"simulated: requests meeting both targets ≥ {percent(check.target)}",
            value=percent(check.attainment), note=f"simulated check ({check.description})", passed=check.passed))
    checks.append(ReportRow(
        label=f"batch {op.batch_size:,} fits the KV budget", value=f"{sig(op.max_sequences)} sequences fit"
        if is_number(op.max_sequences) else missing("no KV budget"),
        note="p99 of the live KV across the batch (residence-weighted context)",
        passed=is_number(op.max_sequences) and op.batch_size <= op.max_sequences))
    if op.mode == "colocated":
        checks.append(ReportRow(
            label="prefill keeps up (utilization < 100%)", value=percent(op.prefill_utilization, "saturated"),
            note="prefill chunks' share of the iterations at the planned rate",
            passed=is_number(op.prefill_utilization) and op.prefill_utilization < 1))
    else:
        checks.append(ReportRow(
            label=f"KV transfer < TTFT target {quantity(slo.ttft_s, 's')}", value=quantity(f.kv_transfer_s, "s"),
            note=f"mean prompt's KV over the {s.fleet.link} link", passed=f.kv_transfer_fits_ttft))
    return tuple(checks)


def _scenario_rows(s: Scenario, p: Plan) -> tuple[ReportRow, ...]:
    w, sv, par = s.workload, s.serving, s.parallel
    r = resolve(s)
    lengths = {"fixed": "fixed lengths", "lognormal": f"lognormal (σ prompt {sig(w.prompt_sigma)}, output "
               f"{sig(w.output_sigma)})", "trace": f"trace of {len(w.trace or ()):,} requests"}[w.distribution]
    rows = [
        ReportRow("Model", f"{r.model.name or r.model.id} ({r.model.id})", f"{sig(r.params.total / 1e9)} billion parameters"),
        ReportRow("GPU", f"{r.gpu.name} ({r.gpu.id})", f"{quantity(r.gpu.hbm_bytes, 'bytes')} HBM (datasheet)" + (
            f", {quantity(r.gpu.cuda_visible_hbm_bytes, 'bytes')} CUDA-visible"
            if r.gpu.cuda_visible_hbm_bytes is not None else "")),
        ReportRow("Precision", f"weights {s.weights_dtype}, KV cache {s.kv_dtype}"),
        ReportRow("Layout per replica", f"{par.label()}: TP {par.tp} × PP {par.pp} = {p.fleet.gpus_per_replica} GPU(s) on "
                  f"{p.memory.nodes_per_replica} node(s)", par.describe()),
        ReportRow("Serving mode", sv.mode),
        ReportRow("Prompt / output tokens", f"{w.prompt_tokens:,} / {w.output_tokens:,} (means)", lengths),
        ReportRow("Traffic", f"{sig(w.requests_per_s)} req/s mean, {sig(w.peak_rate)} req/s peak", "the fleet is sized for the peak"),
        ReportRow("Shared prefix", f"{w.prefix_tokens:,} tokens, hit rate {percent(w.prefix_hit_rate)}"),
        ReportRow("SLO targets", f"TTFT ≤ {quantity(s.slo.ttft_s, 's')} and TPOT ≤ {quantity(s.slo.itl_s, 's')} "
                  f"for at least {percent(s.slo.attainment)} of requests",
                  "a request's TPOT is its own mean inter-token time"
                  + (f"; token-gap p99 ≤ {quantity(s.slo.itl_gap_p99_s, 's')}" if s.slo.itl_gap_p99_s else "")),
        ReportRow("Batch", f"{sv.batch_size:,} (fixed)" if sv.batch_size else "the largest that meets the SLO and fits"),
        ReportRow("Prefill chunk", f"{sv.chunk_tokens:,} tokens"),
    ]
    if sv.mode == "disaggregated" and pools_set(s):  # pools with their own GPU and layout (planner.views.pools)
        rows += [ReportRow(label, value, "prefill.gpu/parallel, decode.gpu/parallel") for label, value in pool_rows(p)]
    if s.speculative.draft_tokens:
        dr = drafter_for(s.speculative, r.model, r.scenario.serving.engine)
        if dr is not None:
            acc = ", ".join(percent(x) for x in dr.acceptance)
            rows.append(ReportRow("Speculative decoding", f"{dr.name} ({dr.method}), {s.speculative.draft_tokens} "
                                  f"draft tokens, acceptance per position {acc}", f"{dr.acceptance_origin}: "
                                  f"{dr.acceptance_source}"))
    return tuple(rows)


def _fleet_rows(p: Plan, check: SimulatedCheck | None = None, mode_line: str | None = None
                ) -> tuple[ReportRow, ...]:
    f, op = p.fleet, p.operating_point
    why = "no operating point meets the SLO"
    served = op.feasible  # an infeasible plan's per-replica rates are 0 by convention: no such number

    def rate(x: float) -> str:
        return quantity(x, "req/s") if served else missing(why)

    rows = [
        ReportRow("GPUs total", count(f.gpus_total, why), f"{f.gpus_per_replica} GPU(s) per replica"),
        ReportRow("Replicas", _replicas(p), f.mode),
        ReportRow("Decode batch per replica", f"{op.batch_size:,}"),
        ReportRow("Goodput per decode replica", rate(f.decode_req_s_per_replica)),
    ]
    if f.mode == "disaggregated":
        rows.append(ReportRow("Prefill capacity per replica", rate(f.prefill_req_s_per_replica)))
        rows.append(ReportRow("KV transfer per request", quantity(f.kv_transfer_s, "s")))
    rows += [
        ReportRow("Fleet utilization at the mean rate", percent(f.fleet_utilization, why)),
        ReportRow("Cold start of a replica", quantity(f.cold_start_s, "s"), "weights loaded at the scenario's load rate"),
        ReportRow("Colocated vs disaggregated", f"{count(f.colocated_gpus, 'misses the SLO')} vs "
            f"{count(f.disaggregated_gpus, 'misses the SLO')} GPUs", mode_line or f.verdict),
    ]
    rows += [ReportRow(*row) for row in latency_rows(p, check)]
    return tuple(rows)


def _cost_rows(s: Scenario, p: Plan) -> tuple[ReportRow, ...]:
    c = p.cost
    why = "no operating point meets the SLO"
    price_origin = ("set in the scenario" if s.cost.usd_per_gpu_hour is not None else
                    "catalog default: the median of its on-demand quotes (sources below)"
                    if on_demand_quotes(load_catalog().prices, resolve(s).gpu.id) else
                    "catalog estimate: no quote for this GPU (sources below)")
    return (
        ReportRow("Price", usd(c.usd_per_gpu_hour, per="GPU-hour"), price_origin),
        ReportRow("Fleet cost", usd(c.usd_per_hour, why, "hour"), "provisioned for the peak, charged around the clock"),
        ReportRow("$/Mtok output", usd(c.usd_per_mtok_output, why), "the fleet's $/hour over the output tokens it serves"),
        ReportRow("$/Mtok input", usd(c.usd_per_mtok_input, why), "the same $/hour over the prompt tokens"),
        ReportRow("$/Mtok blended", usd(c.usd_per_mtok_blended, why),
            "the same $/hour over input + output tokens, so it is below both"),
        ReportRow("$/Mtok output at full load", usd(c.usd_per_mtok_output_full_load, why), "no idle capacity: a floor"),
        ReportRow("$/1,000 requests", usd(c.usd_per_1k_requests, why)),
    )


def _assumptions(s: Scenario, p: Plan) -> tuple[ReportRow, ...]:
    r = resolve(s)
    o = r.origins
    util = s.serving.memory_utilization
    return (
        ReportRow("HBM bandwidth efficiency", percent(r.bandwidth_efficiency), o["efficiency.bandwidth"]),
        ReportRow("Compute efficiency (prefill)", percent(r.compute_efficiency), o["efficiency.compute"]),
        ReportRow("Overhead per layer per pass", quantity(r.layer_overhead_s, "s"), o["efficiency.layer_overhead_s"]),
        ReportRow("Overhead per step", quantity(r.step_overhead_s, "s"), o["efficiency.step_overhead_s"]),
        ReportRow("Target utilization", percent(s.fleet.target_utilization), "replicas are added until each runs at most this"),
        ReportRow("Minimum replicas", f"{s.fleet.min_replicas:,}", "input"),
        ReportRow("GPU memory for the engine", percent(util) if util else "HBM − weights − reserved",
            f"reserved {quantity(s.serving.reserved_bytes, 'bytes')}"),
        ReportRow("Queueing model", "M/G/c (Allen–Cunneen) over the fleet's prefill servers",
                  p.operating_point.queueing),
        ReportRow("KV transfer link", s.fleet.link, quantity(s.fleet.link_bytes_per_s, "bytes/s") if s.fleet.link_bytes_per_s
            else "the GPU's NVLink, or 400 Gb/s RDMA"),
        ReportRow("Weight load rate for a cold start", quantity(s.fleet.load_bytes_per_s, "bytes/s"), "per GPU"),
    )


def _sources(s: Scenario, p: Plan, alts: tuple[Alternative, ...]) -> tuple[Source, ...]:
    r = resolve(s)
    cat = load_catalog()
    out = [Source("GPU", f"{r.gpu.name} ({r.gpu.id})", r.gpu.source_url,
                  r.gpu.source_note or ("inline spec in the scenario" if not isinstance(s.gpu, str) else "")),
           Source("Model", f"{r.model.name or r.model.id} ({r.model.id})", r.model.source_url,
                  r.model.source_note or ("inline spec in the scenario" if not isinstance(s.model, str) else ""))]
    if s.cost.usd_per_gpu_hour is not None:
        out.append(Source("Price", usd(s.cost.usd_per_gpu_hour, per="GPU-hour"), "", "set in the scenario"))
    else:
        quotes = on_demand_quotes(cat.prices, r.gpu.id)
        if quotes:
            listed = ", ".join(usd(q.usd_per_gpu_hour) for q in quotes)
            note = (f"the catalog's default: the median of the {len(quotes)} on-demand "
                    f"quote{'s' if len(quotes) > 1 else ''} below ({listed}), rounded to $0.05 (catalog/prices.yaml)")
            url = quotes[len(quotes) // 2].source_url  # the middle quote's source
        else:
            note, url = "the catalog's estimate: no quote for this GPU in catalog/prices.yaml", ""
        out.append(Source("Price", f"{usd(r.gpu.usd_per_gpu_hour, per='GPU-hour')} for {r.gpu.id}", url, note))
        for q in cat.prices:
            if q.gpu == r.gpu.id:
                out.append(Source("Price quote", f"{q.provider}: {usd(q.usd_per_gpu_hour, per='GPU-hour')}",
                                  q.source_url, f"{q.pricing_type.replace('_', '-')}, as of {q.as_of}"))
    seen = {r.gpu.id}
    for a in alts:
        g = cat.gpus.get(a.gpu)
        if g is not None and g.id not in seen:
            seen.add(g.id)
            out.append(Source("Compared GPU", f"{g.name} ({g.id}), {usd(g.usd_per_gpu_hour, per='GPU-hour')}",
                              g.source_url, g.source_note))
    return tuple(out)


def review_report(scenario: Scenario, *, share_url: str | None = None, app_url: str = DEFAULT_APP_URL,
                  now: datetime | None = None, simulated: SimulatedCheck | None = None,
                  referee: Simulate | None = None, deploy_target: str | None = None) -> ReviewReport:
    """The review of ``scenario``: its plan, the alternatives compared and
    everything a reviewer needs to check them.  ``share_url`` is the link that
    reopens the scenario (default: ``app_url`` + ``?s=<share token>``).

    ``simulated``: the short simulation of the plan's fleet (the answer passes only if it
    meets ``slo.attainment`` too); ``referee``: the simulation behind the colocated vs
    disaggregated verdict (``planner.simulate.referee``; the report the CLI and the Plan
    page write carries both); ``deploy_target``: the deploy target whose commands it lists."""
    from planner.views.report.deployment import deployment_rows  # it imports ReportRow from here

    p = plan(scenario)
    f, c = p.fleet, p.cost
    alts, note = alternatives(scenario, p)
    slo, limits = plan_slo_checks(p, scenario), _limits(scenario, p, simulated)
    a = plan_attainment(p, scenario)
    # The verdict is the share of requests meeting both targets (and the limits); the two
    # percentiles are shown beside their targets.
    failed = [r.label for r in limits if not r.passed]
    feasible = p.operating_point.feasible and not failed
    why = "no operating point meets the SLO"
    sim_note = (f"; simulated: {percent(simulated.attainment)} of requests meet both targets"
                if simulated is not None else "")
    if feasible:
        verdict = f"meets the SLO: {percent(a.value)} of requests meet both targets (analytic){sim_note}"
    elif p.operating_point.feasible and simulated is not None and not simulated.passed:
        verdict = (f"misses in simulation: {percent(simulated.attainment)} of requests meet both targets, under "
                   f"the {percent(simulated.target)} the SLO asks (analytic {percent(a.value)})")
    else:
        verdict = f"misses: {p.operating_point.reason or ', '.join(failed)}"
    answer_rows = [
        ReportRow("GPUs", count(f.gpus_total, why), f"{p.gpu} × {f.gpus_per_replica} per replica, {f.mode}"),
        ReportRow("Replicas", _replicas(p)),
        ReportRow("$/Mtok output", usd(c.usd_per_mtok_output, why), usd(c.usd_per_hour, why, "hour")),
        ReportRow("SLO", "pass" if feasible else "fail", verdict),
    ]
    if simulated is not None:
        answer_rows.append(ReportRow("Simulated check", f"{percent(simulated.attainment)} meet both targets",
                                     f"{'meets' if simulated.passed else 'misses'} the {percent(simulated.target)} "
                                     f"the SLO asks; {simulated.description}"))
    if (band := band_row(p)) is not None:
        answer_rows.append(ReportRow(*band))
    answer = tuple(answer_rows)
    mode_line = mode_verdict(scenario, referee=referee)[0] if referee is not None else None
    when = (now or datetime.now(UTC)).astimezone(UTC)
    name = scenario.name
    link = share_url if share_url is not None else f"{app_url.split('?')[0]}?s={share_token(scenario)}"
    return ReviewReport(
        title=f"Capacity review: {name}", scenario_name=name, generated_at=when.strftime("%Y-%m-%d %H:%M UTC"),
        share_url=link, answer=answer, verdict=verdict, feasible=feasible, scenario=_scenario_rows(scenario, p),
        slo=slo, slo_notes=_slo_notes(p), limits=limits, fleet=_fleet_rows(p, simulated, mode_line), cost=_cost_rows(scenario, p), alternatives=alts, alternatives_note=note,
        derivations=_derivations(scenario, p), assumptions=_assumptions(scenario, p),
        warnings=tuple(readable_text(w) for w in p.warnings), sources=_sources(scenario, p, alts), plan=p,
        scenario_model=scenario, deployment=deployment_rows(scenario, p, deploy_target))

