"""What the review report adds from the simulator and the error bands: the simulated
check of the plan's fleet (built by ``planner.simulate.referee.report_check``), the
latency tails beside the checked percentiles, and the uncertainty band."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.sizing.plan import Plan
from planner.views.report.numbers import missing, percent, quantity, readable_text, usd

__all__ = ["ReportCells", "SimulatedCheck", "band_row", "latency_rows"]

ReportCells = tuple[str, str, str]  # (label, value, note): a report row, before content.ReportRow


def _row(label: str, value: str, note: str = "") -> ReportCells:
    return (label, value, note)


@dataclass(frozen=True)
class SimulatedCheck:
    """The short simulation of the plan's fleet the report carries (built by
    ``planner.simulate.referee.report_check``; latencies in seconds)."""

    attainment: float  # share of requests meeting both targets
    target: float  # slo.attainment
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_percentile: float  # slo.itl_percentile
    tpot_percentile_s: float
    itl_mean_s: float
    gap_p99_s: float
    description: str  # what was simulated, in words

    @property
    def passed(self) -> bool:
        return self.attainment + 1e-12 >= self.target


def latency_rows(p: Plan, check: SimulatedCheck | None) -> list[ReportCells]:
    """The tails beside the checked percentiles: analytic at the operating point, simulated where run."""
    op = p.operating_point

    def sim(x: float | None) -> str:
        return f"; simulated {quantity(x, 's')}" if check is not None and x is not None and math.isfinite(x) else ""

    q = f"p{p.operating_point.itl_percentile * 100:g}"
    return [
        _row("TTFT p90 · queueing included", quantity(op.ttft_p90_s, "s"),
                  "analytic, M/G/c at the peak rate" + sim(check.ttft_p90_s if check else None)),
        _row("TTFT p99 · queueing included", quantity(op.ttft_p99_s, "s"),
                  "analytic, M/G/c at the peak rate" + sim(check.ttft_p99_s if check else None)),
        _row(f"TPOT {q} per request · no queueing", quantity(op.itl_percentile_s, "s"),
                  "analytic at the operating batch" + sim(check.tpot_percentile_s if check else None)),
        _row("ITL mean · no queueing", quantity(op.itl_s, "s"),
                  "every token gap's mean at the operating batch (= the mean TPOT)"
                  + sim(check.itl_mean_s if check else None)),
        _row("Token-gap p99 (chunk stall)", quantity(op.itl_gap_p99_s, "s"),
                  "analytic at the operating batch" + sim(check.gap_p99_s if check else None)),
    ]


def band_row(p: Plan) -> ReportCells | None:
    """The uncertainty band of the headline numbers (planner/sizing/uncertainty.py)."""
    u = p.uncertainty
    if u is None:
        return None
    parts = [f"{name} {quantity(b.low, unit) if unit else usd(b.low)} – {quantity(b.high, unit) if unit else usd(b.high)}"
             for name, b, unit in (("ITL", u.itl_s, "s"), ("TTFT", u.ttft_s, "s"),
                                   ("$/Mtok output", u.usd_per_mtok_output, "")) if b is not None]
    bases = "; ".join(f"{name}: {b.basis}, {b.rows} rows" for name, b in (
        ("ITL", u.itl_s), ("TTFT", u.ttft_s), ("$/Mtok", u.usd_per_mtok_output)) if b is not None)
    return _row(f"Likely range ({percent(u.level)})", " · ".join(parts) if parts else missing("no band"),
                readable_text(f"{bases}. {u.note}" if bases else u.note))
