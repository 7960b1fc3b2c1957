"""MTP speedup, measured against predicted, on InferenceX's paired DeepSeek-R1 rows.

    .venv/bin/python bench/speculative_mtp.py [--all]

InferenceX (``../shared/data/inferencex_dsr1.json``) runs the same deployment with and
without MTP at the same concurrency; the measured speedup is TPOT without / TPOT with.
The planner predicts ITL without / ITL with ``speculative.method = mtp`` at batch =
concurrency (one TP group, aggregated serving) and live context ISL + OSL / 2, with
the draft tokens each engine's InferenceX launch script sets (SGLang
``--speculative-num-steps 2``; TensorRT-LLM ``num_nextn_predict_layers 3`` without
attention DP) and the MTP acceptance default (DeepSeek-V3 report §5.4.3, 0.85).

Only rows the planner can state as run are compared: aggregated, EP 1, no attention
DP, a GPU in the catalog, an engine with a known draft-token count; every other pair
is counted with its reason (``--all`` prints them).

A second prediction ("+ per-token residual") diagnoses where the gap is: the same
deployment's rows without MTP, at every concurrency InferenceX ran, give the step time
the plan misses as α + β × tokens per step (least squares on measured TPOT − planned
step); charged to the step (B tokens) and to the verify pass (B × (k + 1) tokens) alike,
it is what a step model that costs each token (issue 25's MoE expert-GEMM efficiency at
small tokens per expert) would add to both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import PlannerError, Scenario  # noqa: E402
from planner.sizing.replica import decode_at  # noqa: E402
from planner.spec.catalog import load_catalog  # noqa: E402
from planner.spec.context import resolve  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "inferencex_dsr1.json"
# Draft tokens per verify in InferenceX's launch scripts (benchmarks/dsr1_*_mtp.sh).
ENGINE_DRAFT_TOKENS = {"SGLang": 2, "TensorRT-LLM": 3}
PRECISION = {"fp8": "fp8", "fp4": "nvfp4"}
_KEY = ("gpu", "engine", "precision", "tp", "ep", "dp_attention", "isl", "osl", "concurrency", "n_gpus")


@dataclass(frozen=True)
class MtpPair:
    """One deployment at one concurrency, with and without MTP: measured and predicted speedup."""

    gpu: str
    engine: str
    precision: str
    tp: int
    isl: int
    osl: int
    concurrency: int
    draft_tokens: int
    tpot_none_ms: float
    tpot_mtp_ms: float
    predicted: float
    predicted_residual: float  # with the no-MTP rows' per-token residual on step and verify alike (nan: < 2 rows)

    @property
    def measured(self) -> float:
        return self.tpot_none_ms / self.tpot_mtp_ms


def _model_id() -> str:
    models = load_catalog().models
    return "deepseek-r1" if "deepseek-r1" in models else "deepseek-v3"  # R1 is V3's architecture


def _base(gpu: str, weights_dtype: str, tp: int, model: str | None) -> dict[str, Any]:
    return {"model": model or _model_id(), "gpu": gpu, "weights_dtype": weights_dtype, "kv_dtype": "fp8",
            "parallel": {"tp": tp}}


def planned_step_s(*, gpu: str, weights_dtype: str, tp: int, batch: int, context_tokens: float,
                   model: str | None = None) -> float:
    """The plan's decode step without speculation."""
    r = resolve(Scenario(**_base(gpu, weights_dtype, tp, model)))
    return float(decode_at(r, batch_size=batch, live_context=context_tokens).step.step_s)


def predicted_mtp_speedup(*, gpu: str, weights_dtype: str, tp: int, batch: int, context_tokens: float,
                          draft_tokens: int, model: str | None = None, residual: tuple[float, float] = (0.0, 0.0),
                          ) -> float:
    """ITL without / ITL with MTP at this batch and context (the plan's own decode cycle);
    ``residual`` (α s, β s per token) added to the step at B tokens and the verify pass at B × (k + 1)."""
    on = resolve(Scenario(**_base(gpu, weights_dtype, tp, model),
                          speculative={"draft_tokens": draft_tokens, "method": "mtp"}))
    cyc = decode_at(on, batch_size=batch, live_context=context_tokens)
    a, b = residual
    step = float(cyc.step.step_s) + a + b * batch
    verify = float(cyc.verify_s) + a + b * batch * (draft_tokens + 1)
    return cyc.tokens_per_pass * step / (verify + float(cyc.draft_s))


def _residual(rows: list[dict[str, Any]], m: dict[str, Any]) -> tuple[float, float] | None:
    """(α, β): measured TPOT − planned step ≈ α + β × batch over the deployment's no-MTP rows."""
    pts = sorted({int(r["concurrency"]): r["value"] / 1e3 for r in rows}.items())
    if len(pts) < 2:
        return None
    xs = [float(c) for c, _ in pts]
    ys = [v - planned_step_s(gpu=m["gpu"], weights_dtype=PRECISION[m["precision"]], tp=m["tp"], batch=c,
                             context_tokens=m["isl"] + m["osl"] / 2.0) for c, v in pts]
    beta, alpha = statistics.linear_regression(xs, ys)
    return alpha, beta


def mtp_pairs(path: Path = DATA) -> tuple[list[MtpPair], Counter[str]]:
    """Every comparable pair, and the count of pairs left out by reason."""
    rows = json.loads(path.read_text())["measurements"]
    groups: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = defaultdict(dict)
    for m in rows:
        if m["metric"] == "tpot_ms":
            groups[(*(m[k] for k in _KEY), json.dumps(m["disaggregated"]))][m["speculative"]] = m
    gpus = load_catalog().gpus
    plain: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)  # no-MTP rows per deployment
    for m in rows:
        if m["metric"] == "tpot_ms" and m["speculative"] == "none" and not m["disaggregated"]:
            plain[tuple(m[k] for k in _KEY if k != "concurrency")].append(m)
    out: list[MtpPair] = []
    skipped: Counter[str] = Counter()
    for pair in groups.values():
        if set(pair) != {"none", "mtp"}:
            continue
        m = pair["mtp"]
        reason = ("disaggregated" if m["disaggregated"] else "EP > 1 (expert parallelism)" if (m["ep"] or 1) > 1
                  else "attention DP" if m["dp_attention"] else f"GPU {m['gpu']} not in the catalog"
                  if m["gpu"] not in gpus else f"engine {m['engine']}: draft tokens unknown"
                  if m["engine"] not in ENGINE_DRAFT_TOKENS else f"precision {m['precision']}"
                  if m["precision"] not in PRECISION else "")
        if reason:
            skipped[reason] += 1
            continue
        k = ENGINE_DRAFT_TOKENS[m["engine"]]
        try:
            pred = predicted_mtp_speedup(gpu=m["gpu"], weights_dtype=PRECISION[m["precision"]], tp=m["tp"],
                                         batch=int(m["concurrency"]), context_tokens=m["isl"] + m["osl"] / 2.0,
                                         draft_tokens=k)
        except PlannerError as exc:
            skipped[f"refused: {exc}"[:80]] += 1
            continue
        res = _residual(plain[tuple(m[k] for k in _KEY if k != "concurrency")], m)
        pred_r = (predicted_mtp_speedup(gpu=m["gpu"], weights_dtype=PRECISION[m["precision"]], tp=m["tp"],
                                        batch=int(m["concurrency"]), context_tokens=m["isl"] + m["osl"] / 2.0,
                                        draft_tokens=k, residual=res) if res is not None else float("nan"))
        out.append(MtpPair(gpu=m["gpu"], engine=m["engine"], precision=m["precision"], tp=m["tp"], isl=m["isl"],
                           osl=m["osl"], concurrency=int(m["concurrency"]), draft_tokens=k,
                           tpot_none_ms=pair["none"]["value"], tpot_mtp_ms=m["value"], predicted=pred,
                           predicted_residual=pred_r))
    return sorted(out, key=lambda p: (p.gpu, p.engine, p.precision, p.isl, p.osl, p.concurrency)), skipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="print the reasons pairs were left out")
    args = ap.parse_args()
    pairs, skipped = mtp_pairs()
    print(f"{'GPU':6} {'engine':13} {'prec':4} {'TP':>2} {'ISL/OSL':>9} {'conc':>4} {'k':>1} "
          f"{'TPOT off':>8} {'TPOT mtp':>8} {'measured':>8} {'predicted':>9} {'error':>6} {'+residual':>9}")
    for p in pairs:
        print(f"{p.gpu:6} {p.engine:13} {p.precision:4} {p.tp:>2} {p.isl:>4}/{p.osl:<4} {p.concurrency:>4} "
              f"{p.draft_tokens:>1} {p.tpot_none_ms:>8.2f} {p.tpot_mtp_ms:>8.2f} {p.measured:>7.3f}× "
              f"{p.predicted:>8.3f}× {p.predicted / p.measured - 1:>+6.0%} {p.predicted_residual:>8.3f}×")
    if pairs:
        errs = [abs(p.predicted / p.measured - 1) for p in pairs]
        print(f"\n{len(pairs)} pairs; median |predicted / measured − 1| = {statistics.median(errs):.0%}")
        for lo, hi in ((1, 8), (9, 32), (33, 128), (129, 1024)):
            sel = [p for p in pairs if lo <= p.concurrency <= hi]
            if sel:
                withr = [p.predicted_residual for p in sel if p.predicted_residual == p.predicted_residual]
                print(f"concurrency {lo}–{hi}: measured median {statistics.median(p.measured for p in sel):.3f}×, "
                      f"predicted median {statistics.median(p.predicted for p in sel):.3f}×"
                      + (f", + per-token residual {statistics.median(withr):.3f}×" if withr else "")
                      + f" ({len(sel)} pairs)")
    print(f"\nleft out: {sum(skipped.values())} pairs")
    if args.all:
        for reason, n in skipped.most_common():
            print(f"  {n:4}  {reason}")


if __name__ == "__main__":
    main()
