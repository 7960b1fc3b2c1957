"""Curves for the dashboard's charts: tables of points from the one physics.

Every function here evaluates the planner's own formulas (``decode_step``,
``prefill_step``, the memory and roofline functions) over numpy arrays and
returns a list of plain dicts (SI units in the keys), ready for a chart or a
table.  Pages draw them; no formula lives in a page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from planner.errors import PlannerError
from planner.physics.memory import (
    DEFAULT_NON_TORCH_BYTES,
    engine_hbm_bytes,
    kv_bytes_per_token_per_gpu,
    max_sequences,
    weight_bytes,
)
from planner.physics.roofline import (
    attainable_flops_per_s,
    compute_dtype,
    decode_intensity,
    peak_flops_per_s,
    prefill_intensity,
    ridge_flop_per_byte,
)
from planner.physics.speculative import drafter_for
from planner.physics.step import decode_cycle, prefill_chunks, prefill_step
from planner.physics.techniques import chunked_prefill, speculative_tokens_per_pass
from planner.sizing.plan import plan_resolved
from planner.sizing.replica import decode_at, derive_context, memory_section
from planner.spec.context import Resolved, resolve
from planner.spec.precision import bytes_per_kv_element
from planner.spec.scenario import Scenario, scenario_from_dict
from planner.spec.specs import GpuSpec

__all__ = [
    "Row",
    "batch_curve",
    "chunk_curve",
    "hbm_accounting",
    "log_grid",
    "max_sequences_curve",
    "memory_breakdown",
    "parallel_options",
    "roof_lines",
    "roofline_points",
    "speculative_curve",
    "ttft_curve",
]

Row = dict[str, Any]


def _arr(values: Sequence[float]) -> np.ndarray:
    return np.asarray(values, dtype=float)


def roof_lines(
    *, gpus: Sequence[GpuSpec], weights_dtypes: Sequence[str], intensities: Sequence[float]
) -> tuple[list[Row], list[Row]]:
    """(roof points, ridge points) for each GPU × compute format.

    attainable = min(peak, intensity × bandwidth); ridge = peak / bandwidth.
    A weights format the chip cannot compute in falls back to its compute format
    (FP8 on an A100 runs at the BF16 rate); duplicate series are dropped.
    """
    x = _arr(intensities)
    roofs: list[Row] = []
    ridges: list[Row] = []
    seen: set[str] = set()
    for gpu in gpus:
        for wd in weights_dtypes:
            cdt = compute_dtype(gpu, wd)
            series = f"{gpu.id} {cdt}"
            if series in seen:
                continue
            seen.add(series)
            peak = peak_flops_per_s(gpu, wd)
            y = attainable_flops_per_s(peak_flops_per_s=peak, hbm_bytes_per_s=gpu.hbm_bytes_per_s, intensity=x)
            ridge = ridge_flop_per_byte(gpu, wd)
            roofs += [{"series": series, "intensity_flop_per_byte": float(i),
                       "attainable_flops_per_s": float(a),
                       "bound": "memory" if i < ridge else "compute"} for i, a in zip(x, np.asarray(y), strict=True)]
            ridges.append({"series": series, "intensity_flop_per_byte": ridge, "attainable_flops_per_s": peak,
                           "label": f"ridge {ridge:,.0f} FLOP/B"})
    return roofs, ridges


def roofline_points(
    scenario: Scenario, *, batches: Sequence[int], contexts: Sequence[int], prompt_lengths: Sequence[int]
) -> list[Row]:
    """Decode points (batch × context) and prefill points (prompt length) of the
    scenario on its own GPU's roof.

    decode intensity = B × 2P / (W + B × S × K); prefill intensity = 2P × N / W.
    """
    r = resolve(scenario)
    s, gpu = r.scenario, r.gpu
    w = weight_bytes(r.model, s.weights_dtype)
    b, c = np.meshgrid(_arr(batches), _arr(contexts))
    # KV/token at each context (the ledger's for windowed layers; constant otherwise).
    k = np.asarray(kv_bytes_per_token_per_gpu(model=r.model, kv_dtype=s.kv_dtype, context_tokens=c.ravel()))
    peak = peak_flops_per_s(gpu, s.weights_dtype)
    ridge = ridge_flop_per_byte(gpu, s.weights_dtype)
    series = f"{gpu.id} {compute_dtype(gpu, s.weights_dtype)}"
    di = np.asarray(decode_intensity(params_active=r.params.active, weight_bytes=w, batch_size=b.ravel(),
                                     context_tokens=c.ravel(), kv_bytes_per_token=k))
    pi = np.asarray(prefill_intensity(params_active=r.params.active, weight_bytes=w, tokens=_arr(prompt_lengths)))
    att_d = np.asarray(attainable_flops_per_s(peak_flops_per_s=peak, hbm_bytes_per_s=gpu.hbm_bytes_per_s,
                                              intensity=di))
    att_p = np.asarray(attainable_flops_per_s(peak_flops_per_s=peak, hbm_bytes_per_s=gpu.hbm_bytes_per_s,
                                              intensity=pi))
    rows: list[Row] = []
    for bb, cc, i, a in zip(b.ravel(), c.ravel(), di, att_d, strict=True):
        rows.append({"kind": "decode", "label": f"decode B={int(bb)} S={int(cc)}", "series": series,
                     "batch_size": int(bb), "context_tokens": int(cc), "prompt_tokens": None,
                     "intensity_flop_per_byte": float(i), "attainable_flops_per_s": float(a),
                     "bound": "memory" if i < ridge else "compute"})
    for n, i, a in zip(prompt_lengths, pi, att_p, strict=True):
        rows.append({"kind": "prefill", "label": f"prefill N={int(n)}", "series": series,
                     "batch_size": None, "context_tokens": None, "prompt_tokens": int(n),
                     "intensity_flop_per_byte": float(i), "attainable_flops_per_s": float(a),
                     "bound": "memory" if i < ridge else "compute"})
    return rows


def hbm_accounting(scenario: Scenario) -> Row:
    """The one HBM figure a page shows beside the memory split, and what it means.

    With ``memory_utilization`` set the accounting starts from the bytes the CUDA
    runtime reports (an engine's ``gpu_memory_utilization`` is a fraction of them:
    85.0 GB on an H100 SXM, whose datasheet says 80 GB); without it, from the
    datasheet figure (the seeds' HBM − weights − reserved).  Both are decimal
    GB (10⁹ bytes); ``datasheet_bytes`` is kept for the note."""
    gpu, memory_utilization = resolve(scenario).gpu, scenario.serving.memory_utilization
    cuda = memory_utilization is not None and gpu.cuda_visible_hbm_bytes is not None
    total = engine_hbm_bytes(gpu) if memory_utilization is not None else gpu.hbm_bytes
    basis = "CUDA-visible" if cuda else "datasheet"
    if cuda:
        note = (f"what the CUDA runtime reports ({total / 2**20:,.0f} MiB), which the engine's memory utilization "
                f"is a fraction of; the datasheet says {gpu.hbm_bytes / 1e9:,.0f} GB")
    elif memory_utilization is not None:
        note = "the datasheet figure (no CUDA-reported size is recorded for this GPU)"
    else:
        note = "the datasheet figure: the KV budget is HBM − weights − reserved"
    return {"bytes": float(total), "basis": basis, "label": f"HBM per GPU ({basis})",
            "datasheet_bytes": float(gpu.hbm_bytes), "note": note}


def memory_breakdown(scenario: Scenario) -> list[Row]:
    """One GPU's memory split into weights, reserved/activations, KV budget and
    the rest (the 1 − memory_utilization headroom); the parts sum to the memory
    the accounting starts from: the CUDA-visible bytes with memory_utilization,
    the datasheet HBM with the seeds' HBM − weights − reserved."""
    r = resolve(scenario)
    cap, _ = derive_context(r)
    mem = memory_section(r, {}, context_tokens=cap)
    util = scenario.serving.memory_utilization
    # An engine budgets a fraction of the memory CUDA reports, not the datasheet figure.
    total = hbm_accounting(scenario)["bytes"]
    rows: list[Row] = [{"part": "weights", "bytes": mem.weight_bytes_per_gpu}]
    if mem.draft_weight_bytes_per_gpu > 0:  # speculative decoding's drafter
        rows.append({"part": "draft weights", "bytes": mem.draft_weight_bytes_per_gpu})
    if util is None:
        rows.append({"part": "reserved", "bytes": mem.reserved_bytes})
    else:
        rows.append({"part": "activations + CUDA graphs", "bytes": mem.activation_bytes})
        rows.append({"part": "non-torch (CUDA, NCCL)", "bytes": DEFAULT_NON_TORCH_BYTES})
    rows.append({"part": "KV budget", "bytes": mem.kv_budget_bytes})
    rest = total - sum(float(row["bytes"]) for row in rows)
    if rest > 0:
        rows.append({"part": "headroom (1 − utilization)" if util is not None else "unused", "bytes": rest})
    return rows


def max_sequences_curve(scenario: Scenario, *, contexts: Sequence[int], kv_dtypes: Sequence[str]) -> list[Row]:
    """max sequences = KV budget per GPU / (context × KV bytes/token per GPU) × EP,
    for each KV dtype over the given context lengths."""
    r = resolve(scenario)
    cap, _ = derive_context(r)
    mem = memory_section(r, {}, context_tokens=cap)
    p = scenario.parallel
    ctx = _arr(contexts)
    rows: list[Row] = []
    for kd in kv_dtypes:
        kg = kv_bytes_per_token_per_gpu(model=r.model, kv_dtype=kd, tp=p.attention_tp, pp=p.pp, context_tokens=ctx)
        # + the speculative drafter's KV (0 off), in the same KV dtype
        kg = kg + mem.draft_kv_bytes_per_token_per_gpu * bytes_per_kv_element(kd) / bytes_per_kv_element(
            scenario.kv_dtype)
        w = scenario.workload
        seqs = np.asarray(max_sequences(kv_budget_bytes=mem.kv_budget_bytes, kv_bytes_per_token_per_gpu=kg,
                                        context_tokens=ctx, prefix_tokens=float(w.prefix_tokens),
                                        prefix_hit_rate=w.prefix_hit_rate)) * p.attention_dp
        rows += [{"kv_dtype": kd, "kv_bytes_per_element": bytes_per_kv_element(kd), "context_tokens": int(c),
                  "max_sequences": float(n)} for c, n in zip(ctx, seqs, strict=True)]
    return rows


def _decode_rows(r: Resolved, batch: np.ndarray, live_context: float) -> dict[str, np.ndarray]:
    """ITL and tok/s over batch sizes, speculation included."""
    cyc = decode_at(r, batch_size=batch, live_context=live_context)
    return {"step_s": np.asarray(cyc.step.step_s, float), "itl_s": np.asarray(cyc.itl_s, float),
            "memory_bound": np.asarray(cyc.step.memory_bound)}


def batch_curve(scenario: Scenario, *, batches: Sequence[int]) -> list[Row]:
    """ITL and tok/s per replica as the decode batch grows (tok/s = B / ITL);
    ``fits`` says whether the KV budget holds B sequences."""
    r = resolve(scenario)
    cap, live = derive_context(r)
    mem = memory_section(r, {}, context_tokens=cap)
    b = _arr(batches)
    d = _decode_rows(r, b, live)
    g = r.gpus_per_replica
    return [{"batch_size": int(bb), "itl_s": float(i), "tok_s_per_sequence": 1.0 / float(i),
             "tok_s_per_replica": float(bb / i), "tok_s_per_gpu": float(bb / i / g),
             "bound": "memory" if mb else "compute", "fits": bool(bb <= mem.max_sequences)}
            for bb, i, mb in zip(b, d["itl_s"], d["memory_bound"], strict=True)]


def ttft_curve(scenario: Scenario, *, prompt_lengths: Sequence[int]) -> list[Row]:
    """Prefill time (TTFT without queueing) over prompt lengths, averaged over the
    scenario's prefix-cache hits (prefix tokens cached, share = hit rate) and misses."""
    r = resolve(scenario)
    w = scenario.workload
    n = _arr(prompt_lengths)
    h = w.prefix_hit_rate if w.prefix_tokens > 0 else 0.0
    kw = r.step_kwargs()
    miss = prefill_step(tokens=n, **kw)
    hit = prefill_step(tokens=n, cached_tokens=np.minimum(float(w.prefix_tokens), n - 1.0), **kw)
    t = h * np.asarray(hit.time_s) + (1.0 - h) * np.asarray(miss.time_s)
    return [{"prompt_tokens": int(x), "ttft_s": float(tt), "bound": "compute" if cb else "memory"}
            for x, tt, cb in zip(n, t, np.asarray(miss.compute_bound), strict=True)]


def chunk_curve(scenario: Scenario, *, chunk_sizes: Sequence[int]) -> list[Row]:
    """Chunked prefill trade-off at the plan's decode batch: a bigger chunk
    shortens TTFT (fewer iterations) and lengthens the worst ITL (iteration i =
    decode step + chunk i, chunk i attending to the i earlier chunks; TTFT = Σ_i
    iteration i), for a prefix-cache miss of the mean prompt."""
    r = resolve(scenario)
    p = plan_resolved(r)
    w = scenario.workload
    rows: list[Row] = []
    for size in chunk_sizes:
        pc = prefill_chunks(new_tokens=[w.prompt_tokens], cached_tokens=[0.0], chunk_tokens=int(size),
                            **r.step_kwargs())
        times = [float(x) for x, m in zip(pc.marginal_s[0], pc.mask[0], strict=True) if m]
        cp = chunked_prefill(prompt_tokens=w.prompt_tokens, chunk_tokens=int(size), decode_step_s=p.decode.step_s,
                             chunk_s=times, dedicated_prefill_s=p.prefill.time_s)
        rows.append({"chunk_tokens": int(size), "chunks": cp.chunks, "iteration_s": cp.iteration_s,
                     "ttft_s": cp.ttft_s, "dedicated_ttft_s": cp.dedicated_ttft_s})
    return rows


def speculative_curve(
    scenario: Scenario, *, acceptances: Sequence[float], draft_tokens: Sequence[int]
) -> list[Row]:
    """Speculative speedup at the plan's batch and context over acceptance α:
    tokens per pass (1 + α + … + α^k) × step / (verify step + k × draft step), the draft
    step the scenario's method's own (``physics.step.decode_cycle``, as the plan times it)."""
    r = resolve(scenario)
    p = plan_resolved(r)
    kw = r.step_kwargs()
    b, live = p.decode.batch_size, p.decode.context_tokens
    a = _arr(acceptances)
    rows: list[Row] = []
    for k in draft_tokens:
        drafter = drafter_for(scenario.speculative.model_copy(update={"draft_tokens": int(k)}), r.model,
                              r.scenario.serving.engine)
        cyc = decode_cycle(batch_size=b, context_tokens=live, draft_tokens=int(k), drafter=drafter, **kw)
        step, cycle = float(cyc.step.step_s), float(cyc.cycle_s)
        tpp = np.asarray(speculative_tokens_per_pass(draft_tokens=k, acceptance=a))
        rows += [{"draft_tokens": int(k), "acceptance": float(x), "tokens_per_pass": float(t),
                  "speedup": float(t) * step / cycle} for x, t in zip(a, tpp, strict=True)]
    return rows


def parallel_options(
    scenario: Scenario, *, tps: Sequence[int] = (1, 2, 4, 8, 16), pps: Sequence[int] = (1, 2, 4),
    eps: Sequence[int] = (1, 2, 4, 8, 16), dp_attentions: Sequence[bool] = (False, True),
) -> list[Row]:
    """Every TP × PP layout, with EP dividing TP and data-parallel attention off and on
    (mixture-of-experts models, at EP = 1 or EP = TP; dense: off only), that the scenario's checks accept,
    planned with the same physics as ``plan``: GPUs and nodes per replica, per-GPU bytes,
    KV budget, max sequences, collective time (all-to-all apart) and per-token latency at
    each layout's own batch."""
    base = scenario.model_dump(mode="json")
    moe = resolve(scenario).model.is_moe
    cur = scenario.parallel
    rows: list[Row] = []
    for tp in tps:
        for pp in pps:
            for ep in eps:
                for dp in (dp_attentions if moe else (False,)):
                    if tp % ep or (dp and (tp == 1 or ep not in (1, tp))):
                        continue  # EP lays the experts over the TP GPUs; DP attention as engines run it: EP = TP
                    # redundant experts kept only on the scenario's own layout
                    red = cur.redundant_experts if (tp, ep) == (cur.tp, cur.ep) else 0
                    data = {**base, "parallel": {"tp": tp, "pp": pp, "ep": ep, "dp_attention": dp,
                                                 "redundant_experts": red}}
                    try:
                        r = resolve(scenario_from_dict(data))
                    except PlannerError:
                        continue
                    rows.append(_layout_row(scenario, r))
    return rows


def _layout_row(scenario: Scenario, r: Resolved) -> Row:
    """One layout of ``parallel_options``."""
    p = r.scenario.parallel
    tp, pp, ep = p.tp, p.pp, p.ep
    pl = plan_resolved(r)
    m, d = pl.memory, pl.decode
    cur = scenario.parallel
    return {
        "tp": tp, "pp": pp, "ep": ep, "dp_attention": p.dp_attention, "layout": p.label(), "gpus": p.gpus,
        "nodes": m.nodes_per_replica, "fits": m.fits, "all_to_all_s": d.all_to_all_s,
        "weight_bytes_per_gpu": m.weight_bytes_per_gpu, "kv_budget_bytes": m.kv_budget_bytes,
        "max_sequences": m.max_sequences, "batch_size": d.batch_size, "comm_s": d.comm_s,
        # The ITL mean the Plan shows (the operating point's, chunk stalls included when
        # colocated); the decode step alone where no operating point meets the SLO.
        "itl_s": pl.operating_point.itl_s if pl.operating_point.feasible else d.itl_s,
        "step_s": d.step_s, "tok_s_per_replica": d.tok_s_per_replica, "tok_s_per_gpu": d.tok_s_per_gpu,
        # within a node but past the NVLink domain (a group spanning nodes talks over the NICs)
        "tp_over_pcie": r.gpu.scaleup_domain_gpus < tp <= r.gpu.gpus_per_node,
        "multi_node": m.nodes_per_replica > 1,
        "current": (tp, pp, ep, p.dp_attention) == (cur.tp, cur.pp, cur.ep, cur.dp_attention),
    }


def log_grid(*, low: float, high: float, points: int) -> list[float]:
    """Log-spaced values from low to high (inclusive)."""
    return [float(v) for v in np.logspace(math.log10(low), math.log10(high), points)]

