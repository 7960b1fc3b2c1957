"""Every worked number in ../shared/seed_examples.csv, through the public API.

The expected values are read from the CSV (never recomputed here); each id maps
to the planner call that should reproduce it, using the seeds' assumptions:
H100 SXM datasheet figures, efficiency 1 unless the seed says "at 50% MFU",
no per-step overhead, no fitted per-call collective latency (collective_call_s = 0),
the seeds' nominal 8B/70B/405B shapes.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest

from planner import (
    bits_per_weight,
    chunked_prefill,
    decode_intensity,
    decode_step,
    get_gpu,
    internal_fragmentation,
    kv_budget_bytes,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    kv_transfer_s,
    max_sequences,
    mbu,
    mfu,
    peak_flops_per_s,
    pipeline_bubble,
    prefill_step,
    prefix_sharing_bytes,
    ridge_flop_per_byte,
    speculative_tokens_per_pass,
    static_batch_utilization,
    weight_bytes,
    weight_bytes_per_gpu,
)
from planner.physics.roofline import attainable_flops_per_s, hbm_sweep_s
from planner.physics.step import collective_s
from planner.physics.terms import physics_terms
from planner.sizing.fleet import pool_groups
from tests.conftest import SEED_8B, SEED_70B, SEED_405B

# The shared copy beside the checkout is the source of truth; the committed copy
# keeps the test runnable in a clone without ../shared.
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "seed_examples.csv"
SEED_CSV = _SHARED if _SHARED.exists() else Path(__file__).parent / "data" / "seed_examples.csv"
H100 = get_gpu("h100-sxm")
BW = H100.hbm_bytes_per_s


def _rows() -> list[dict[str, str]]:
    with SEED_CSV.open() as f:
        return list(csv.DictReader(f))


def _decode(model, *, batch=1, context=0, dtype="bf16", tp=1):
    return decode_step(model=model, gpu=H100, weights_dtype=dtype, kv_dtype="bf16", batch_size=batch,
                       context_tokens=context, tp=tp)


def _prefill(tokens, *, eff=0.5, cached=0):
    return prefill_step(model=SEED_8B, gpu=H100, weights_dtype="bf16", kv_dtype="bf16", tokens=tokens,
                        cached_tokens=cached, compute_efficiency=eff, include_attention=False).time_s


def _kv8(ctx: int) -> float:
    return kv_bytes_per_token(SEED_8B, "bf16") * ctx


def _kv70(ctx: int) -> float:
    return kv_bytes_per_token(SEED_70B, "bf16") * ctx


def _maxconc_70b_tp4() -> float:
    wg = weight_bytes_per_gpu(model=SEED_70B, weights_dtype="bf16", tp=4)
    budget = kv_budget_bytes(gpu=H100, weight_bytes_per_gpu=wg, reserved_bytes=4e9)
    kg = kv_bytes_per_token_per_gpu(model=SEED_70B, kv_dtype="bf16", tp=4)
    return max_sequences(kv_budget_bytes=budget, kv_bytes_per_token_per_gpu=kg, context_tokens=8000)


def _seed_comm(fn: Callable[[], float]) -> Callable[[], float]:
    """``fn`` without the fitted latency per TP all-reduce call: the seeds' worked TP numbers
    (160 × 5 µs NVLink floor) have no such term, as they have no per-step overhead and
    efficiency 1, so these rows pin ``collective_call_s`` to 0 the way the others pin those."""
    def run() -> float:
        with physics_terms(collective_call_s=0.0):
            return float(fn())
    return run


def _chunk():
    return chunked_prefill(prompt_tokens=8000, chunk_tokens=512, decode_step_s=0.0061,
                           chunk_s=_prefill(512), dedicated_prefill_s=_prefill(8000))


COMPUTE: dict[str, Callable[[], float]] = {
    "ridge_h100_bf16": lambda: ridge_flop_per_byte(H100, "bf16"),
    "ridge_h100_fp8": lambda: ridge_flop_per_byte(H100, "fp8"),
    "ridge_h200_bf16": lambda: ridge_flop_per_byte(get_gpu("h200-sxm"), "bf16"),
    "hbm_sweep_h100": lambda: hbm_sweep_s(H100),
    "kv_8b_per_token": lambda: kv_bytes_per_token(SEED_8B, "bf16"),  # 2 × 32 × 8 × 128 × 2 = 131,072
    "kv_70b_per_token": lambda: kv_bytes_per_token(SEED_70B, "bf16"),  # 2 × 80 × 8 × 128 × 2 = 327,680
    "kv_70b_8000": lambda: _kv70(8000),
    "kv_8b_8000": lambda: _kv8(8000),
    "kv_70b_128k": lambda: _kv70(131072),
    "decode_8b_b1_step": lambda: _decode(SEED_8B).step_s,  # 16e9 / 3.35e12
    "decode_8b_b1_toks": lambda: 1 / _decode(SEED_8B).step_s,
    "decode_8b_b1_frac": lambda: attainable_flops_per_s(
        peak_flops_per_s=peak_flops_per_s(H100, "bf16"), hbm_bytes_per_s=BW,
        intensity=decode_intensity(params_active=8e9, weight_bytes=16e9, batch_size=1, context_tokens=0,
                                   kv_bytes_per_token=131072)) / peak_flops_per_s(H100, "bf16"),
    "decode_8b_1k_toks": lambda: 1 / _decode(SEED_8B, context=1000).step_s,
    "decode_8b_100k_toks": lambda: 1 / _decode(SEED_8B, context=100_000).step_s,
    "kv_crossover_8b": lambda: weight_bytes(SEED_8B, "bf16") / kv_bytes_per_token(SEED_8B, "bf16"),
    "decode_70b_fp8_b1": lambda: 1 / _decode(SEED_70B, dtype="fp8").step_s,  # 3.35e12 / 70e9
    "prefill_8b_2048_roof": lambda: _prefill(2048, eff=1.0),  # 2 × 8e9 × 2048 / 989e12
    "prefill_8b_2048_50": lambda: _prefill(2048),
    "eff_int_8b_b64_600": lambda: decode_intensity(params_active=8e9, weight_bytes=16e9, batch_size=64,
                                                   context_tokens=600, kv_bytes_per_token=131072),
    "eff_int_8b_b64_8000": lambda: decode_intensity(params_active=8e9, weight_bytes=16e9, batch_size=64,
                                                    context_tokens=8000, kv_bytes_per_token=131072),
    "hol_8b_8000": lambda: _prefill(8000),  # 128 TFLOP / 494.5 TFLOP/s
    "maxconc_8b_8k": lambda: max_sequences(
        kv_budget_bytes=kv_budget_bytes(gpu=H100, weight_bytes_per_gpu=16e9, reserved_bytes=4e9),
        kv_bytes_per_token_per_gpu=131072, context_tokens=8000),  # (80 − 16 − 4) GB / 1.05 GB
    "maxconc_70b_tp4_8k": _maxconc_70b_tp4,  # 41 GB × 4 / 2.62 GB
    "paged_seqs": lambda: max_sequences(kv_budget_bytes=60e9, kv_bytes_per_token_per_gpu=131072,
                                        context_tokens=600),
    "naive_toks": lambda: 57 / _decode(SEED_8B, batch=57, context=600).step_s,
    # The seed's step is its memory roof, (weights + KV) / BW; the kernel sum is longer (30 ms:
    # at B = 760 the GEMMs are compute-bound, 12.3 ms, and attention reads 60 GB, 17.8 ms).
    "paged_toks": lambda: 760 / (_decode(SEED_8B, batch=760, context=600).bytes_per_gpu / H100.hbm_bytes_per_s),
    "prefix_share": lambda: prefix_sharing_bytes(kv_bytes_per_token=131072, prefix_tokens=2000, sequences=100)[0],
    "static_util": lambda: static_batch_utilization([100, 200, 300, 400, 500, 600, 700, 800]),
    "chunk_512_8b": lambda: _prefill(512),
    "chunk_iter": lambda: _chunk().iteration_s,  # 6.1 ms + 16.6 ms
    "chunk_ttft": lambda: _chunk().ttft_s,  # 16 × 22.7 ms
    # The TP rows pin collective_call_s = 0 (the seed has no per-call latency term; _seed_comm).
    "tp4_comm": _seed_comm(lambda: collective_s(gpu=H100, group=4, message_bytes=0, count=2 * 80)),  # 160 × 5 µs
    "tp4_step": _seed_comm(lambda: _decode(SEED_70B, tp=4).step_s),  # 35 GB / 3.35 TB/s + 0.8 ms
    "tp4_toks": _seed_comm(lambda: 1 / _decode(SEED_70B, tp=4).step_s),
    "pp_bubble_16": lambda: pipeline_bubble(stages=4, microbatches=16),
    "pp_bubble_64": lambda: pipeline_bubble(stages=4, microbatches=64),
    "405b_tp8": lambda: weight_bytes_per_gpu(model=SEED_405B, weights_dtype="bf16", tp=8),
    "405b_tp8pp2": lambda: weight_bytes_per_gpu(model=SEED_405B, weights_dtype="bf16", tp=8, pp=2),
    "pool_prefill": lambda: pool_groups(requests_per_s=100, prompt_tokens=2000, output_tokens=250,
                                        prefill_tok_s_per_group=10_000, decode_tok_s_per_group=2_500)[0],
    "pool_decode": lambda: pool_groups(requests_per_s=100, prompt_tokens=2000, output_tokens=250,
                                       prefill_tok_s_per_group=10_000, decode_tok_s_per_group=2_500)[1],
    "kv_xfer_nvlink": lambda: kv_transfer_s(kv_bytes=_kv70(8000), link_bytes_per_s=H100.scaleup_bytes_per_s),
    "kv_xfer_rdma": lambda: kv_transfer_s(kv_bytes=_kv70(8000), link_bytes_per_s=400e9 / 8),
    "route_cold": lambda: _prefill(28_800),
    "route_warm": lambda: _prefill(28_800, cached=27_600),
    "mbu_146": lambda: mbu(bytes_per_s=146 * 16e9, hbm_bytes_per_s=BW),
    "mfu_146": lambda: mfu(tokens_per_s=146, params=8e9, peak_flops_per_s=peak_flops_per_s(H100, "bf16")),
    "mfu_prefill_20k": lambda: mfu(tokens_per_s=20_000, params=8e9, peak_flops_per_s=peak_flops_per_s(H100, "bf16")),
    "int8_8b_toks": lambda: 1 / _decode(SEED_8B, dtype="int8").step_s,  # 3.35e12 / 8e9
    "spec_k4_a07": lambda: speculative_tokens_per_pass(draft_tokens=4, acceptance=0.7),
    "nvfp4_bits": lambda: bits_per_weight("nvfp4"),
    "naive_frag": lambda: internal_fragmentation(reserved_tokens=8192, used_tokens=300),
}


def test_every_seed_row_has_a_computation() -> None:
    ids = [row["id"] for row in _rows()]
    assert ids, "seed_examples.csv is empty"
    missing = sorted(set(ids) - set(COMPUTE))
    assert not missing, f"seed rows without a computation: {missing}"


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["id"])
def test_seed_example(row: dict[str, str]) -> None:
    expected = float(row["expected"])
    tol = float(row["rel_tol"])
    got = float(COMPUTE[row["id"]]())
    if tol == 0:
        assert got == expected, f"{row['what']}: {got} != {expected}"
    else:
        assert got == pytest.approx(expected, rel=tol), f"{row['what']} ({row['unit']})"
