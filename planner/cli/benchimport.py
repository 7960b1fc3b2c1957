"""``python -m planner import-bench`` and ``python -m planner calibrate``.

    python -m planner import-bench FILE... [--tool auto|vllm|sglang|guidellm|aiperf|mlperf|llmd]
        [--scenario FILE] [--set KEY=VALUE ...] [--save] [--format json|csv|table]
    python -m planner calibrate --from RUN_OR_FILE... [--tool ...] [--scenario FILE]
        [--set KEY=VALUE ...] [--save [--name NAME]] [--format json|csv|table]

``import-bench`` reads each file (refused by size before reading), maps its levels
onto the setup ``--set`` gives (gpu, model, parallel.tp, engine, precision, n_gpus;
what the file states is checked against it) and prints measured beside predicted
with the signed error and the scenario used; ``--save`` stores each run as a probe
run is stored.  ``calibrate`` fits the efficiencies on the runs (files, or stored
run ids), prints the fit, its leave-one-run-out error and its warnings, and with
``--save`` stores the calibrated scenario (``efficiency.calibrated_from`` names the
runs).  Every file is read and checked before anything is saved.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from planner.cli.main import add_format_arg, emit

__all__ = ["register"]


def _base(args: argparse.Namespace) -> dict[str, Any]:
    from planner.spec.scenario import load_scenario_file

    return load_scenario_file(args.scenario) if getattr(args, "scenario", None) else {}


def _engine() -> Any:
    from planner.store.db import make_engine
    from planner.store.migrate import require_current

    engine = make_engine()
    require_current(engine)
    return engine


def _load_runs(args: argparse.Namespace, sources: list[str]) -> list[tuple[Any, Any]]:
    """(run, setup) per source, every one read and checked (nothing saved yet)."""
    from planner.benchimport import bench_run_from_summary, bench_setup, check_run, read_bench_file
    from planner.benchimport.limits import MAX_BENCH_FILES
    from planner.errors import ScenarioError
    from planner.store import get_probe_run

    if len(sources) > MAX_BENCH_FILES:
        raise ScenarioError(f"{len(sources)} runs is over the limit of {MAX_BENCH_FILES}")
    base = _base(args)
    engine = None
    out = []
    for src in sources:
        if src.isdigit():
            engine = engine or _engine()
            stored = get_probe_run(engine=engine, run_id=int(src))
            run = bench_run_from_summary(stored.summary, stored.settings, store_id=stored.id)
        else:
            run = read_bench_file(src, args.tool)
        setup = bench_setup(list(args.overrides), base, file_model=run.model, allow_local_files=True)
        check_run(run, setup)
        out.append((run, setup))
    return out


def _result_row(run: Any, r: Any) -> dict[str, Any]:
    s = r.scenario or {}
    op = r.operating_point

    def name(v: Any) -> Any:  # an inline spec by its id
        return v.get("id", "inline") if isinstance(v, dict) else v

    used = None if r.skipped_reason else (
        f"{name(s.get('gpu'))} {name(s.get('model'))} {s.get('weights_dtype')} tp{(s.get('parallel') or {}).get('tp', 1)} "
        f"x{op.replicas if op else '?'} {op.load if op else ''} B={op.batch_size if op else 0:.0f}")
    level = r.id.rsplit("#", 1)[1].split(":", 1)[0]
    lv = run.levels[int(level)]
    return {"run": run.label, "level": lv.label(), "metric": r.metric, "measured": r.measured,
            "predicted": r.predicted, "error_pct": None if r.error_pct is None else round(r.error_pct, 1),
            "scenario / skipped": r.skipped_reason or used}


def _cmd_import(args: argparse.Namespace) -> int:
    from planner.benchimport import compare_rows, run_rows, save_bench_run

    pairs = _load_runs(args, list(args.files))
    runs_out, flat = [], []
    for run, setup in pairs:
        rows = run_rows(run, setup)
        results = compare_rows(rows, [setup] * len(rows))
        runs_out.append({"run": run.label, "tool": run.tool, "tool_version": run.tool_version,
                         "source_file": run.source_file, "model": run.model, "notes": list(run.notes),
                         "setup": setup.describe(), "levels": [lv.model_dump(mode="json") for lv in run.levels],
                         "rows": [r.model_dump(mode="json") for r in results]})
        flat += [_result_row(run, r) for r in results]
    saved = []
    if args.save:
        engine = _engine()
        for run, setup in pairs:
            stored = save_bench_run(engine=engine, run=run, setup=setup)
            saved.append(stored)
            print(f"saved {run.label} as store run {stored}", file=sys.stderr)
    payload = {"runs": runs_out, "saved": saved}
    emit(args.format, payload, flat)
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from planner.benchimport import calibrate_runs, calibrated_from_scenario
    from planner.store.repository import save_scenario

    pairs = _load_runs(args, [s for group in args.sources for s in group])
    cal = calibrate_runs(pairs)
    calibrated = calibrated_from_scenario(pairs[0][1].scenario, cal)
    for text in cal.warnings:
        print(f"warning: calibration: {text}", file=sys.stderr)
    payload = {**cal.to_json_dict(), "scenario": calibrated.model_dump(mode="json")}
    if args.save:
        stored = save_scenario(engine=_engine(), scenario=calibrated, name=args.name or f"calibrated {cal.runs[0]}",
                               description=f"efficiencies calibrated from {cal.calibrated_from}", tags=["calibrated"])
        payload["saved"] = stored.slug
        print(f"saved calibrated scenario as {stored.slug}", file=sys.stderr)
    rows = [r.model_dump(mode="json") for r in cal.rows]
    if args.format == "table":
        e = cal.efficiency
        print(f"calibrated from {cal.calibrated_from}: efficiency.bandwidth={e['bandwidth']:.3f} "
              f"efficiency.compute={e['compute']:.3f} efficiency.step_overhead_s={e['step_overhead_s']:.5f} "
              f"efficiency.layer_overhead_s={e['layer_overhead_s']:.2e}")
        ho = cal.held_out_median_abs_error_pct
        print(f"median |error|: in sample {cal.in_sample_median_abs_error_pct:.1f}%, "
              f"{cal.cross_validation} {'—' if ho is None else f'{ho:.1f}%'}")
    emit(args.format, payload, rows)
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    from planner.benchimport.read import TOOL_CHOICES

    p.add_argument("--tool", choices=TOOL_CHOICES, default="auto", help="the files' format (auto: detect it)")
    p.add_argument("--scenario", default=None, metavar="FILE", help="a scenario JSON the setup starts from")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="the setup the file lacks: gpu, model, parallel.tp, engine, precision, n_gpus, served_model "
                        "(and any scenario key)")
    add_format_arg(p)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("import-bench", help="read benchmark results (vLLM, SGLang, GuideLLM, AIPerf, MLPerf, llm-d) "
                                            "and set them beside the prediction")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--save", action="store_true", help="store each run as a measured run (beside probe runs)")
    _common(p)
    p.set_defaults(func=_cmd_import)
    c = sub.add_parser("calibrate", help="fit the efficiencies on imported or stored runs")
    c.add_argument("--from", dest="sources", action="append", nargs="+", required=True, metavar="RUN_OR_FILE",
                   help="benchmark files, or store ids of probe / imported runs")
    c.add_argument("--save", action="store_true", help="store the calibrated scenario")
    c.add_argument("--name", default=None, help="name of the saved scenario")
    _common(c)
    c.set_defaults(func=_cmd_calibrate)
