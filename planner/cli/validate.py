"""``python -m planner validate --data FILE [--by tp,gpu,family] [--cv none|kfold|loso]``.

Prints, per row, the id, metric, measured and predicted values, the signed
error and the scenario used (or why the row was skipped), then the summary per
metric and per engine family (median and p90 absolute, median signed error).
``--by`` adds the summary per TP degree, GPU, engine family or publication
(``source``), each split by quantity (throughput, TTFT, ITL, E2E).  ``--cv``
predicts each row with efficiencies fitted without it: ``kfold`` (5 seeded
folds), ``loso`` (leave its publication out), ``gpu`` (leave its GPU out) or
``engine`` (leave its engine out); ``none`` (default) uses the
fitted defaults.  JSON: ``rows``, ``summary``, ``summary_by``.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import ValidationError

from planner.errors import ScenarioError
from planner.io.export import flatten
from planner.spec.parallel import Parallel
from planner.validate import (
    CV_SCHEMES,
    GROUP_KEYS,
    GroupKey,
    cross_validate,
    load_measurements,
    validate_rows,
    validation_payload,
)

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

    by = _parse_by(args.by)
    measured = load_measurements(args.data)
    results = validate_rows(measured) if args.cv == "none" else cross_validate(measured, args.cv)
    payload = validation_payload(results, by=by, cross_validation=args.cv)
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
                f"{_layout_label(r)} x{r.get('operating_point.replicas')} "
                f"{r.get('operating_point.load')} B={r.get('operating_point.batch_size', 0):.0f}"}
             for r in rows]
    emit("table", payload, short)
    print()
    summary = [{"group": k, **v} for k, v in payload["summary"].items()]
    summary += [{"group": f"family {k}", **v} for k, v in payload["summary_by_family"].items()]
    for key, groups in payload.get("summary_by", {}).items():
        summary += [{"group": f"{key} {g} {q}", **st} for g, qs in groups.items() for q, st in qs.items()]
    emit("table", payload, summary)
    return 0


def _layout_label(row: dict[str, Any]) -> str:
    """The predicted layout's short name (``TP8·EP8·DPattn``) from a flattened result row, whose
    scenario leaves out the layout fields at their defaults."""
    fields = {k: row[f"scenario.parallel.{k}"] for k in ("tp", "pp", "ep", "dp_attention", "redundant_experts")
              if f"scenario.parallel.{k}" in row}
    try:
        return Parallel(**fields).label()
    except ValidationError:
        return f"TP{fields.get('tp', 1)}"


def _parse_by(text: str | None) -> tuple[GroupKey, ...]:
    if not text:
        return ()
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in keys if k not in GROUP_KEYS]
    if bad:
        raise ScenarioError(f"--by: unknown key '{bad[0]}' (known: {', '.join(GROUP_KEYS)})")
    return tuple(dict.fromkeys(k for k in GROUP_KEYS if k in keys))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("validate", help="predict published measurements and report the errors")
    p.add_argument("--data", required=True, help="measurement file (the published_calibration.json schema)")
    p.add_argument("--format", choices=("json", "csv", "table"), default="json")
    p.add_argument("--by", default=None, help=f"comma-separated summary groups: {','.join(GROUP_KEYS)}")
    p.add_argument("--cv", choices=("none", *CV_SCHEMES), default="none",
                   help="cross-validate: 5-fold, leave-one-source-out, leave-one-GPU-out or leave-one-engine-out "
                        "(refits; minutes on the full file)")
    p.set_defaults(func=_cmd_validate)
