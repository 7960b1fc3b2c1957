"""``python -m planner validate --data FILE``: the planner against published measurements.

Prints, per row, the id, metric, measured and predicted values, the signed
error and the scenario used (or why the row was skipped), then the summary per
metric and per engine family.  JSON: ``rows`` and ``summary``.
"""

from __future__ import annotations

import argparse
from typing import Any

from planner.io.export import flatten
from planner.validate import load_measurements, validate_rows, validation_payload

__all__ = ["register"]


def _flat_rows(payload: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in payload["rows"]:
        out.append({
            "id": r["id"], "metric": r["metric"], "family": r["family"], "measured": r["measured"],
            "predicted": r["predicted"], "error_pct": None if r["error_pct"] is None else round(r["error_pct"], 1),
            "skipped_reason": r["skipped_reason"],
            **{f"scenario.{k}": v for k, v in flatten(r["scenario"] or {}).items()},
            **{f"operating_point.{k}": v for k, v in (r["operating_point"] or {}).items()},
        })
    return out


def _cmd_validate(args: argparse.Namespace) -> int:
    from planner.cli.main import emit

    results = validate_rows(load_measurements(args.data))
    payload = validation_payload(results)
    if args.format == "json":
        emit("json", payload)
        return 0
    rows = _flat_rows(payload)
    if args.format == "csv":
        emit("csv", payload, rows)
        return 0
    short = [{k: r[k] for k in ("id", "metric", "measured", "predicted", "error_pct")}
             | {"scenario / skipped": r["skipped_reason"] or
                f"{r.get('scenario.gpu')} {r.get('scenario.model')} {r.get('scenario.weights_dtype', 'bf16')} "
                f"tp{r.get('scenario.parallel.tp', 1)} x{r.get('operating_point.replicas')} "
                f"{r.get('operating_point.load')} B={r.get('operating_point.batch_size', 0):.0f}"}
             for r in rows]
    emit("table", payload, short)
    print()
    summary = [{"group": k, **v} for k, v in payload["summary"].items()]
    summary += [{"group": f"family {k}", **v} for k, v in payload["summary_by_family"].items()]
    emit("table", payload, summary)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("validate", help="predict published measurements and report the errors")
    p.add_argument("--data", required=True, help="measurement file (the published_calibration.json schema)")
    p.add_argument("--format", choices=("json", "csv", "table"), default="json")
    p.set_defaults(func=_cmd_validate)
