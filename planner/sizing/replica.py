"""One replica's numbers for a scenario: roofline, memory, decode, prefill.

These sections are the Plan's core; each number carries a Derivation with the
formula as the seeds write it and the values substituted.  The memory section and
the drafter's rows live in :mod:`planner.sizing.memory_ledger` and are re-exported here.
"""

from __future__ import annotations

import math

from numpy.typing import ArrayLike

from planner.physics.kernels import moe_slot_ranks
from planner.physics.memory import kv_bytes_per_token, weight_bytes
from planner.physics.roofline import (
    attainable_flops_per_s,
    bound,
    compute_dtype,
    decode_intensity,
    peak_flops_per_s,
    prefill_intensity,
    ridge_flop_per_byte,
)
from planner.physics.speculative import drafter_for
from planner.physics.step import DecodeCycle, PrefillStep, decode_cycle, prefill_chunks
from planner.physics.techniques import (
    chunked_prefill,
    mbu,
    mfu,
)
from planner.physics.terms import term
from planner.sizing.candidate_arrays import OperatingArrays, chunk_times_at
from planner.sizing.layout_section import layout_comm_derivations
from planner.sizing.memory_ledger import draft_section, memory_section
from planner.sizing.prefill_alone import MeanPrefill, mean_prefill
from planner.sizing.results import DecodeResult, MemoryResult, PrefillResult, RooflineResult
from planner.spec.context import Resolved
from planner.spec.defaults import DEFAULT_MAX_BATCH
from planner.spec.derivation import Derivation, Origin, fmt_num, put_derivation
from planner.spec.params import param_counts

__all__ = [
    "DecodeResult",
    "MemoryResult",
    "PrefillResult",
    "RooflineResult",
    "decode_at",
    "derive_context",
    "draft_section",
    "memory_section",
    "prefill_section",
    "roofline_section",
]

Deriv = dict[str, Derivation]


def derive_context(r: Resolved) -> tuple[int, float]:
    """(capacity context, mean live decode context) in tokens.

    Capacity: a sequence holds prompt + output tokens at its end.
    Mean live context while decoding: prompt + output / 2.
    ``serving.context_tokens`` overrides both.
    """
    s = r.scenario
    if s.serving.context_tokens is not None:
        return s.serving.context_tokens, float(s.serving.context_tokens)
    w = s.workload
    return w.prompt_tokens + w.output_tokens, w.prompt_tokens + w.output_tokens / 2.0


def roofline_section(r: Resolved, d: Deriv, *, batch_size: int, live_context: float) -> RooflineResult:
    s, gpu = r.scenario, r.gpu
    cdt = compute_dtype(gpu, s.weights_dtype)
    peak = peak_flops_per_s(gpu, s.weights_dtype)
    ridge = ridge_flop_per_byte(gpu, s.weights_dtype)
    w = weight_bytes(r.model, s.weights_dtype)
    k = kv_bytes_per_token(r.model, s.kv_dtype, live_context)  # at the live context (windowed layers)
    di = float(decode_intensity(params_active=r.params.active, weight_bytes=w, batch_size=batch_size,
                                context_tokens=live_context, kv_bytes_per_token=k))
    n = s.workload.prompt_tokens
    pi = float(prefill_intensity(params_active=r.params.active, weight_bytes=w, tokens=n))
    put_derivation(d, "roofline.ridge_flop_per_byte", "peak FLOP/s / HBM bytes/s",
                   f"{fmt_num(peak)} / {fmt_num(gpu.hbm_bytes_per_s)}", ridge, "FLOP/byte", "datasheet")
    put_derivation(d, "roofline.decode_intensity_flop_per_byte", "B × 2P / (W + B × S × K)",
                   f"{batch_size} × 2 × {fmt_num(r.params.active)} / ({fmt_num(w)} + {batch_size} × "
                   f"{fmt_num(live_context)} × {fmt_num(k)})", di, "FLOP/byte")
    put_derivation(d, "roofline.prefill_intensity_flop_per_byte", "2P × N / W",
                   f"2 × {fmt_num(r.params.active)} × {n} / {fmt_num(w)}", pi, "FLOP/byte")
    return RooflineResult(
        compute_dtype=cdt,
        peak_flops_per_s=peak,
        hbm_bytes_per_s=gpu.hbm_bytes_per_s,
        ridge_flop_per_byte=ridge,
        decode_intensity_flop_per_byte=di,
        decode_attainable_flops_per_s=float(attainable_flops_per_s(
            peak_flops_per_s=peak, hbm_bytes_per_s=gpu.hbm_bytes_per_s, intensity=di)),
        decode_bound=bound(intensity=di, ridge=ridge),
        prefill_intensity_flop_per_byte=pi,
        prefill_bound=bound(intensity=pi, ridge=ridge),
    )


def decode_at(r: Resolved, *, batch_size: ArrayLike, live_context: ArrayLike) -> DecodeCycle:
    """The scenario's decode cycle at a batch (speculation included): step, cycle, ITL."""
    sp = r.scenario.speculative
    return decode_cycle(batch_size=batch_size, context_tokens=live_context, draft_tokens=sp.draft_tokens,
                        drafter=drafter_for(sp, r.model, r.scenario.serving.engine), **r.step_kwargs())


def decode_section(r: Resolved, d: Deriv, *, batch_size: int, live_context: float,
                   cycle: DecodeCycle | None = None) -> DecodeResult:
    """The decode step at ``batch_size`` with its derivations; ``cycle``: that step as
    the operating point's arrays already hold it (``sizing.operating.cycle_at``)."""
    s, gpu = r.scenario, r.gpu
    cyc = cycle if cycle is not None else decode_at(r, batch_size=batch_size, live_context=live_context)
    st, itl = cyc.step, float(cyc.itl_s)
    tok_seq = 1.0 / itl
    step = float(st.step_s)
    tok_rep = batch_size * tok_seq
    g = r.gpus_per_replica
    peak = peak_flops_per_s(gpu, s.weights_dtype)
    u_b = float(mbu(bytes_per_s=float(st.bytes_per_gpu) / step, hbm_bytes_per_s=gpu.hbm_bytes_per_s))
    u_f = float(mfu(tokens_per_s=tok_rep / g, params=r.params.active, peak_flops_per_s=peak))
    k = s.speculative.draft_tokens
    tpp = cyc.tokens_per_pass
    ob, oc = r.origins["efficiency.bandwidth"], r.origins["efficiency.compute"]
    pp = s.parallel.pp
    put_derivation(d, "decode.step_s",
                   "PP × (t_gemm + t_experts + t_attention) + collectives + overhead, each kernel group on its own roofline "
                   "per GPU per pipeline stage: t_gemm = max(F_dense / (η_c × C_w), (W + activations) / (η_b × BW)), "
                   "t_attention = max(F_attention / (η_c × C_attn), KV bytes / (η_b × BW)); overhead = step "
                   "(decode replays a CUDA graph: no per-layer launches) [+ MoE: L_moe × (per layer + per routed slot × "
                   "B·k/EP_slots), EP_slots = EP with DP attention, else 1, physics.kernels.moe_overhead_s]",
                   f"{pp} × ({fmt_num(float(st.gemm_s))} + {fmt_num(float(st.expert_s))} + {fmt_num(float(st.attention_s))}) + "
                   f"{fmt_num(float(st.comm_s))} + {fmt_num(float(st.overhead_s))}",
                   step, "s", ob if st.memory_bound else oc)
    put_derivation(d, "decode.tok_s_per_sequence", "1 / ITL" + (" (speculative: tokens per pass / cycle)" if k else ""),
                   f"1 / {fmt_num(itl)}", tok_seq, "tok/s")
    if k:
        _speculative_rows(r, d, cyc, batch_size=batch_size)
    put_derivation(d, "decode.tok_s_per_replica", "B × tok/s per sequence", f"{batch_size} × {fmt_num(tok_seq)}",
                   tok_rep, "tok/s")
    put_derivation(d, "decode.mbu", "bytes per step per GPU / step / peak bandwidth",
                   f"{fmt_num(float(st.bytes_per_gpu))} / {fmt_num(step)} / {fmt_num(gpu.hbm_bytes_per_s)}", u_b, "fraction")
    put_derivation(d, "decode.mfu", "tok/s per GPU × 2 × P_active / peak FLOP/s",
                   f"{fmt_num(tok_rep / g)} × 2 × {fmt_num(r.params.active)} / {fmt_num(peak)}", u_f, "fraction")
    layout_comm_derivations(r, d, step=st, batch_size=batch_size)
    return DecodeResult(
        batch_size=batch_size,
        context_tokens=live_context,
        step_s=step,
        compute_s=float(st.compute_s),
        memory_s=float(st.memory_s),
        comm_s=float(st.comm_s),
        overhead_s=float(st.overhead_s),
        itl_s=itl,
        tok_s_per_sequence=tok_seq,
        tok_s_per_replica=tok_rep,
        tok_s_per_gpu=tok_rep / g,
        mbu=u_b,
        mfu=u_f,
        bound="memory" if st.memory_bound else "compute",
        speculative_tokens_per_pass=tpp,
        speculative_speedup=float(st.step_s) / itl,
        all_to_all_s=float(st.all_to_all_s),
    )


# How a drafter's acceptance origin reads in the derivation's formula, and its Origin there.
_ACCEPTANCE_WORDS: dict[str, str] = {"paper": "from the paper", "assumed": "assumed", "scenario": "the scenario's",
                                     "calibrated": "calibrated"}
_ACCEPTANCE_ORIGIN: dict[str, Origin] = {"scenario": "input", "calibrated": "calibrated"}


def _speculative_rows(r: Resolved, d: Deriv, cyc: DecodeCycle, *, batch_size: int) -> None:
    """decode.speculative_tokens_per_pass and decode.speculative_speedup with the method,
    the acceptance per position and its origin (paper, assumed, or the scenario's)."""
    sp = r.scenario.speculative
    dr = drafter_for(sp, r.model, r.scenario.serving.engine)
    if dr is None:
        return
    k = sp.draft_tokens
    acc = dr.acceptance
    terms = ["1"] + [" × ".join(fmt_num(a) for a in acc[:i]) for i in range(1, k + 1)]
    origin = _ACCEPTANCE_WORDS.get(dr.acceptance_origin, dr.acceptance_origin)
    put_derivation(d, "decode.speculative_tokens_per_pass",
                   f"1 + Σ_k Π_(i≤k) a_i over k = 1 … {k} draft tokens ({dr.method}: {dr.name}; acceptance per position "
                   f"{', '.join(fmt_num(a) for a in acc)}, {origin}: {dr.acceptance_source})",
                   " + ".join(terms), cyc.tokens_per_pass, "tokens", _ACCEPTANCE_ORIGIN.get(dr.acceptance_origin, "default"))
    step, cycle = float(cyc.step.step_s), float(cyc.cycle_s)
    how = (f"drafts = {k} × {fmt_num(dr.draft_cost)} × step (speculative.draft_cost)" if dr.draft_cost is not None
           else f"drafts = {dr.name}'s own forwards at batch {batch_size} by the step model, the first over the "
                f"{k + 1} settled positions, {k - 1} more over one")
    put_derivation(d, "decode.speculative_speedup",
                   f"tokens per verify × step / (verify step over {k + 1} positions per sequence + drafts); {how}",
                   f"{fmt_num(cyc.tokens_per_pass)} × {fmt_num(step)} / ({fmt_num(float(cyc.verify_s))} + "
                   f"{fmt_num(float(cyc.draft_s))})",
                   cyc.tokens_per_pass * step / cycle, "×")


def _prefill_working(r: Resolved, pf: PrefillStep, t: float, new_tokens: float) -> str:
    """The substituted kernel sum of one prefill of ``new_tokens``: t_gemm + t_experts +
    t_attention + collectives + overhead (step + per layer × L [+ the MoE layers' own cost])."""
    if t <= 0:
        return "0"  # every prompt token hits the prefix cache
    out = (f"{fmt_num(float(pf.gemm_s))} + {fmt_num(float(pf.expert_s))} + {fmt_num(float(pf.attention_s))} + "
           f"{fmt_num(float(pf.comm_s))} + {fmt_num(r.step_overhead_s)} + {fmt_num(r.layer_overhead_s)} × "
           f"{r.model.layers}")
    if r.model.is_moe:  # the MoE layers' routing, permute and slot kernels (physics.kernels.moe_overhead_s, fitted)
        m = r.model
        per_layer = term("moe_layer_overhead_s") + term("moe_prefill_layer_overhead_s")
        fixed = term("moe_prefill_token_overhead_s")
        slot = (f"{fmt_num(fixed)} + " if fixed else "") + (
            f"{fmt_num(term('moe_prefill_slot_passes'))} × {fmt_num(float(m.hidden_width))} × 2 / "
            f"({fmt_num(r.bandwidth_efficiency)} × {fmt_num(r.gpu.hbm_bytes_per_s)})")
        par = r.scenario.parallel
        ranks = float(moe_slot_ranks(ep=par.ep, dp_attention=par.dp_attention))  # EP with DP attention, else 1
        out += (f" + {param_counts(m).moe_layers} × ({fmt_num(per_layer)} + ({slot}) × {fmt_num(new_tokens)} × "
                f"{m.experts_per_token} / {fmt_num(ranks)})")
    return out


def prefill_section(r: Resolved, d: Deriv, *, decode_step_s: float, mean: MeanPrefill | None = None,
                    arrays: OperatingArrays | None = None) -> PrefillResult:
    """The mean prompt's prefill, run alone and chunked beside the decode batch,
    averaged over prefix-cache hits (prefix_tokens cached) and misses.  ``mean``: the
    prefills alone as ``sizing.operating.mean_prefill`` computed them; ``arrays``: the
    scenario's one-candidate operating arrays, whose chunk times are read where a prompt
    class is the mean prompt (fixed lengths) instead of computed again."""
    s, gpu = r.scenario, r.gpu
    w = s.workload
    h = w.prefix_hit_rate if w.prefix_tokens > 0 else 0.0
    mp = mean if mean is not None else mean_prefill(r)
    hit_cached = mp.hit_cached_tokens
    kw = r.step_kwargs()
    miss, hit = mp.miss, mp.hit
    t_miss, t_hit = float(miss.time_s), float(hit.time_s)
    t = h * t_hit + (1.0 - h) * t_miss if 0 < h < 1 else (t_hit if h == 1 else t_miss)
    chunk = s.serving.chunk_tokens
    cases = [(1.0 - h, 0.0), (h, hit_cached)] if 0 < h < 1 else [(1.0, hit_cached if h == 1 else 0.0)]
    parts = []
    for weight, cached in cases:
        times = (chunk_times_at(arrays, 0, prompt_tokens=float(w.prompt_tokens), cached_tokens=cached)
                 if arrays is not None else None)
        if times is None:
            pc = prefill_chunks(new_tokens=[w.prompt_tokens - cached], cached_tokens=[cached], chunk_tokens=chunk, **kw)
            times = [float(x) for x, m in zip(pc.marginal_s[0], pc.mask[0], strict=True) if m]
        cp = chunked_prefill(prompt_tokens=int(w.prompt_tokens - cached), chunk_tokens=chunk,
                             decode_step_s=decode_step_s, chunk_s=times, dedicated_prefill_s=t)
        parts.append((weight, cp, math.fsum(times)))
    chunked_ttft = math.fsum(wt * cp.ttft_s for wt, cp, _ in parts)
    longest = max(cp.iteration_s for _, cp, _ in parts)
    peak = peak_flops_per_s(gpu, s.weights_dtype)
    cached_mean = h * hit_cached
    new = w.prompt_tokens - cached_mean
    u = float(mfu(tokens_per_s=new / t, params=r.params.active, peak_flops_per_s=peak)) / r.gpus_per_replica if t else 0.0
    if 0 < h < 1:
        sub = (f"{h} × {fmt_num(t_hit)} + {fmt_num(1.0 - h)} × "
               f"({_prefill_working(r, miss, t_miss, float(w.prompt_tokens))})")
    else:
        sub = _prefill_working(r, hit if h == 1 else miss, t,
                               float(w.prompt_tokens) - (hit_cached if h == 1 else 0.0))
    pf = hit if h == 1 else miss
    put_derivation(d, "prefill.time_s",
                   "t_gemm + t_experts + t_attention (each max(FLOPs / (TP·EP × η_c × C), bytes / (η_b × BW)), attention "
                   "at the 16-bit rate) + collectives + overhead (step + per layer × L [+ MoE: L_moe × (per layer + t_slot × "
                   "n·k/EP_slots), t_slot = N_pass × h × 2 B / (η_b × BW), physics.kernels.moe_prefill_slot_s; EP_slots = EP with DP "
                   "attention, else 1, physics.kernels.moe_slot_ranks]), F = 2 × P × n + "
                   "2·(d_qk+d_v)·L·H·(n·c + n²/2)"
                   + ("; averaged over prefix hits and misses: h × t_hit + (1 − h) × t_miss" if 0 < h < 1 else ""),
                   sub, t, "s", r.origins["efficiency.compute"] if pf.compute_bound else r.origins["efficiency.bandwidth"])
    put_derivation(d, "prefill.mfu", "prompt tok/s × 2 × P_active / (GPUs × peak)",
                   f"{fmt_num(new / t if t else 0)} × 2 × {fmt_num(r.params.active)} / ({r.gpus_per_replica} × {fmt_num(peak)})",
                   u, "fraction")
    terms = [f"{cp.chunks} × {fmt_num(decode_step_s)} + {fmt_num(total)}" for _, cp, total in parts]
    put_derivation(d, "prefill.chunked_ttft_s",
                   "Σ_i (decode step + chunk i), chunk i attending to the cached tokens and i earlier chunks "
                   "(its cost inside the decode iteration: the GEMMs' compute + the attention and expert groups + "
                   "collectives + the eager launches)"
                   + (" (hits and misses weighted)" if len(parts) > 1 else ""),
                   " + ".join(f"{fmt_num(wt)} × ({t_})" for (wt, _, _), t_ in zip(parts, terms, strict=True))
                   if len(parts) > 1 else terms[0], chunked_ttft, "s")
    main = parts[0][1]
    return PrefillResult(
        tokens=w.prompt_tokens,
        cached_tokens=cached_mean,
        time_s=t,
        mfu=u,
        bound="compute" if pf.compute_bound else "memory",
        chunk_tokens=chunk,
        chunks=main.chunks,
        chunk_s=longest - decode_step_s,
        chunk_iteration_s=longest,
        chunked_ttft_s=chunked_ttft,
    )


def default_batch(*, max_sequences_value: float, requested: int | None) -> int:
    """``serving.batch_size`` if set, else the largest batch the KV budget holds
    (capped at the engine limit), at least 1."""
    if requested is not None:
        return requested
    return max(1, min(int(math.floor(max_sequences_value)), DEFAULT_MAX_BATCH))
