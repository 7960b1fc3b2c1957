"""The review report's Deployment section (issue 27): the chosen target's commands,
one row per pool, or the one line that says why the target cannot express the plan."""

from __future__ import annotations

from planner.deploy import TARGETS, DeployError, deploy
from planner.sizing.plan import Plan
from planner.spec.scenario import Scenario
from planner.views.report.content import ReportRow

__all__ = ["deployment_rows"]


def deployment_rows(scenario: Scenario, result: Plan, target: str | None) -> tuple[ReportRow, ...]:
    """One row per pool: the engine command that runs it (``python -m planner deploy --target T`` writes the
    files); none without a target."""
    if target is None:
        return ()
    if target not in TARGETS:
        raise DeployError(f"deploy target {target!r}: expected one of {', '.join(TARGETS)}")
    try:
        d = deploy(scenario, target, result=result)
    except DeployError as exc:
        return (ReportRow(f"Target {target}", "not expressible", str(exc)),)
    rows = [ReportRow(f"{target}: {c.pool.role}", line,
                      f"{c.pool.replicas} replica(s) × {c.pool.gpus_per_replica} GPU(s); files: "
                      + ", ".join(f.name for f in d.files))
            for c, line in zip(d.commands, d.command_lines, strict=True)]
    return tuple(rows)
