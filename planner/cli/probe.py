"""``python -m planner probe``: load a live endpoint, optionally beside a scenario.

    python -m planner probe --url URL --model NAME [--api-key-env VAR]
        [--concurrency 1,4,16 | --rate R --arrival poisson|gamma --burstiness B]
        [--requests N] [--duration-s S] [--prompt-tokens N] [--output-tokens N] [--workers N]
        [SCENARIO.json] [--set KEY=VALUE ...] [--calibrate] --format json|csv|table

The scenario (file or ``--set gpu=... --set model=...``) describes what the
endpoint runs; with one, every level gets ``predicted`` and ``mbu``/``mfu``,
and ``--calibrate`` adds the fitted efficiencies and the calibrated scenario.
Each level reports the client's own event-loop lag, CPU share and the
concurrency it held (``client``); a level whose figures include the client's
delay is also named on stderr, with the reason.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from planner.cli.main import add_format_arg, add_scenario_args, emit, scenario_from_args
from planner.errors import ProbeError

__all__ = ["register"]

_TABLE_COLS = (
    "concurrency", "rate_req_s", "requests", "failures", "ttft_s.p50", "ttft_s.p99", "tpot_s.p50", "tpot_s.p99",
    "itl_s.p99", "e2e_s.p50", "output_tok_s", "req_s", "goodput_req_s", "token_count_source",
    "predicted.ttft_s", "predicted.tpot_s", "predicted.output_tok_s", "mbu", "mfu",
    "client.loop_lag_p99_s", "client.cpu_share", "client.held_concurrency",
)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        out = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not out:
        raise argparse.ArgumentTypeError("give at least one concurrency level")
    return out


def _save(args: argparse.Namespace, run: Any) -> None:
    """Store the run (and, with --save-calibrated, the calibrated scenario) in
    the scenario store: DATABASE_URL, else the SQLite file."""
    from planner.probe.persist import save_run
    from planner.spec.scenario import scenario_from_dict
    from planner.store.db import make_engine
    from planner.store.migrate import require_current
    from planner.store.repository import save_scenario

    engine = make_engine()
    require_current(engine)
    stored_id = save_run(engine=engine, run=run)
    print(f"saved probe run {run.run_id} as store id {stored_id}", file=sys.stderr)
    if args.save_calibrated:
        if not run.calibration:
            raise ProbeError("--save-calibrated needs --calibrate")
        calibrated = scenario_from_dict(run.calibration["scenario"])
        stored = save_scenario(engine=engine, scenario=calibrated, name=args.save_calibrated,
                               description=f"efficiencies calibrated from probe run {run.run_id} ({run.url})",
                               tags=["calibrated"])
        print(f"saved calibrated scenario as {stored.slug}", file=sys.stderr)


def _cmd_probe(args: argparse.Namespace) -> int:
    from planner.probe import (
        api_key_from,
        calibrate,
        calibrated_scenario,
        kv_capacity_check,
        probe_settings,
        run_probe_sync,
        with_prediction,
    )

    scenario = scenario_from_args(args) if (args.scenario or args.overrides) else None
    if args.calibrate and scenario is None:
        raise ProbeError("--calibrate needs a scenario (a file or --set gpu=... --set model=...)")
    kwargs: dict[str, Any] = {
        "url": args.url, "model": args.model, "endpoint": args.endpoint,
        "requests": args.requests, "duration_s": args.duration_s,
        "prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens,
        "request_timeout_s": args.timeout_s, "warmup_requests": args.warmup,
        "shared_prefix": args.shared_prefix, "ignore_eos": args.ignore_eos,
        "metrics_url": "" if args.no_metrics else args.metrics_url,
        "stop_when_kv_full": args.kv_capacity,
        "ramp_up_s": args.ramp_up_s,
        "workers": args.workers,
    }
    if args.rate is not None:
        kwargs.update(rate_req_s=args.rate, arrival=args.arrival, burstiness=args.burstiness)
    else:
        kwargs["concurrency"] = args.concurrency or (1,)
    if scenario is not None:
        kwargs.update(slo_ttft_s=scenario.slo.ttft_s, slo_tpot_s=scenario.slo.itl_s)
    settings = probe_settings(**kwargs)
    api_key = api_key_from(api_key_env=args.api_key_env)
    run = run_probe_sync(settings, api_key=api_key)
    for lv in run.levels:
        if lv.client is not None and lv.client.warning:
            at = f"concurrency {lv.concurrency}" if lv.concurrency is not None else f"rate {lv.rate_req_s} req/s"
            print(f"warning: {at}: {lv.client.warning}", file=sys.stderr)
    if scenario is not None:
        run = with_prediction(run, scenario)
        if run.pattern == "concurrency":
            run = run.model_copy(update={"metrics": {
                **run.metrics, "kv_capacity": kv_capacity_check(run, scenario).model_dump(mode="json")}})
    if args.calibrate and scenario is not None:
        cal = calibrate(run, scenario)
        run = run.model_copy(update={"calibration": {
            **cal.model_dump(mode="json"),
            "scenario": calibrated_scenario(scenario, cal).model_dump(mode="json"),
        }})
    for text in (run.calibration or {}).get("warnings", ()):
        print(f"warning: calibration: {text}", file=sys.stderr)
    if args.save or args.save_calibrated:
        _save(args, run)
    payload = run.to_json_dict(samples=args.samples)
    if args.format == "table":
        rows = [{k: r.get(k) for k in _TABLE_COLS if k in r} for r in run.csv_rows()]
        emit("table", payload, rows)
        if run.calibration:
            c = run.calibration
            print(f"calibrated from {c['run_id']}: efficiency.bandwidth={c['bandwidth_efficiency']:.3f} "
                  f"efficiency.compute={c['compute_efficiency']:.3f} "
                  f"efficiency.step_overhead_s={c['step_overhead_s']:.5f} (rms log error {c['rms_log_error']:.3f})")
            for r in c["residuals"]:
                print(f"  c={r['concurrency']} {r['metric']}: measured {r['measured']:.5f} "
                      f"predicted {r['predicted']:.5f} ({r['rel_error']:+.1%})")
        return 0
    emit(args.format, payload, run.csv_rows())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("probe", help="load-test a live OpenAI-compatible endpoint")
    p.add_argument("--url", required=True, help="server root or /v1/... URL (checked against PROBE_ALLOWED_HOSTS)")
    p.add_argument("--model", required=True, help="model name sent to the endpoint")
    p.add_argument("--api-key-env", default=None, metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--endpoint", choices=("completions", "chat"), default=None,
                   help="API to probe (default: the one the --url path names, else completions)")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=_int_list, default=None, help="closed-loop levels, e.g. 1,4,16")
    load.add_argument("--rate", type=float, default=None, help="open-loop requests per second")
    p.add_argument("--arrival", choices=("constant", "poisson", "gamma"), default="poisson")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson, <1 burstier)")
    p.add_argument("--requests", type=int, default=32, help="measured requests per level")
    p.add_argument("--duration-s", type=float, default=120.0, help="wall-clock limit per level")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--ramp-up-s", type=float, default=0.0,
                   help="closed loop: stagger the streams' first requests over this many seconds")
    p.add_argument("--workers", type=int, default=1,
                   help="processes sending the load, each its share of the streams (results merged as from one)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up requests per level (default: one per stream)")
    p.add_argument("--timeout-s", type=float, default=120.0,
                   help="limit on each request (and on each /metrics scrape, at most 5 s)")
    p.add_argument("--metrics-url", default=None, help="Prometheus page (default: <server>/metrics)")
    p.add_argument("--no-metrics", action="store_true", help="do not scrape /metrics")
    p.add_argument("--shared-prefix", action="store_true", help="same prompt prefix for every request")
    p.add_argument("--ignore-eos", action="store_true", help="ask the engine to run to --output-tokens")
    p.add_argument("--kv-capacity", action="store_true",
                   help="stop the sweep once the engine reports KV usage >= 95%% or preemptions")
    p.add_argument("--calibrate", action="store_true", help="fit the scenario's efficiencies to the sweep")
    p.add_argument("--samples", action="store_true", help="include every request's sample in the JSON")
    p.add_argument("--save", action="store_true",
                   help="store the run and its samples in the scenario store (DATABASE_URL or the SQLite file)")
    p.add_argument("--save-calibrated", metavar="NAME", default=None,
                   help="with --calibrate: also save the calibrated scenario under NAME")
    add_scenario_args(p)
    add_format_arg(p)
    p.set_defaults(func=_cmd_probe)
