"""Names in published measurement files → catalog ids, number formats, engine families.

Published tables spell things their own way (``Llama-3.1-70B-Instruct``,
``h100_sxm``, ``TensorRT-LLM (PyTorch backend)``).  Each resolver returns the
catalog id or ``None`` with a reason; nothing here guesses a variant the text
does not state (``h100_unspecified`` stays unknown).
"""

from __future__ import annotations

import re
from typing import Literal

from planner.spec.catalog import load_catalog
from planner.spec.precision import KvDtype, WeightsDtype

__all__ = [
    "BENCHMARK_RANGE_RATIOS",
    "dynamo_stack",
    "COMMON_GPU_VARIANTS",
    "ENGINE_FAMILIES",
    "EngineFamily",
    "INFERENCEX_SOURCE",
    "PRECISIONS",
    "assumed_gpu_variant",
    "attention_dp_balance_iters",
    "engine_family",
    "length_range_ratio",
    "precision_dtypes",
    "resolve_gpu_name",
    "resolve_model_name",
    "row_kv_dtype",
    "scheduler_recv_interval",
]

EngineFamily = Literal["trtllm", "vllm"]
ENGINE_FAMILIES: tuple[EngineFamily, ...] = ("trtllm", "vllm")

# precision label → (weights_dtype, kv_dtype).  TensorRT-LLM's FP8/FP4 recipes
# quantize the KV cache to FP8 as well ("FP8 quantization also sets FP8 KV
# cache"); vLLM and SGLang keep ``kv_cache_dtype=auto`` (16-bit) unless told.
PRECISIONS: dict[str, tuple[WeightsDtype, KvDtype]] = {
    "fp32": ("fp32", "fp32"),
    "bf16": ("bf16", "bf16"),
    "fp16": ("fp16", "fp16"),
    "fp8": ("fp8", "fp8"),
    "int8": ("int8", "bf16"),
    "int4": ("int4", "bf16"),
    "awq": ("int4", "bf16"),
    "gptq": ("int4", "bf16"),
    "fp4": ("nvfp4", "fp8"),
    "nvfp4": ("nvfp4", "fp8"),
    "mxfp4": ("mxfp4", "fp8"),
}
_UNQUANTIZED_KV_FAMILIES: frozenset[str] = frozenset({"vllm"})

# Suffixes that name a fine-tune or a packaging of the same weights' shape.
_MODEL_SUFFIXES = ("-instruct", "-chat", "-hf", "-base", "-fp8", "-fp4", "-nvfp4", "-awq", "-gptq")


def _norm(text: str) -> str:
    t = text.strip().lower().replace("_", "-").replace(" ", "-")
    t = t.rsplit("/", 1)[-1]  # "meta-llama/Llama-3.1-8B" → "llama-3.1-8b"
    t = re.sub(r"^meta-", "", t)
    changed = True
    while changed:
        stripped = re.sub(r"-v\d+\.\d+$", "", t)  # "-v0.1" release tags, not "deepseek-v3"
        changed = stripped != t
        t = stripped
        for suffix in _MODEL_SUFFIXES:
            if t.endswith(suffix):
                t = t[: -len(suffix)]
                changed = True
    return t


def resolve_model_name(name: str) -> tuple[str | None, str | None]:
    """(catalog model id, None) or (None, reason).  Matches the catalog id, an
    alias or the name after dropping case, an org prefix and fine-tune suffixes
    (-Instruct, -Chat, -hf, ...): ``Llama-3.3-70B-Instruct`` → ``llama-3.3-70b``,
    ``DeepSeek-R1-0528`` → ``deepseek-r1``."""
    cat = load_catalog()
    key = _norm(name)
    for mid, spec in cat.models.items():
        if key in {_norm(mid), _norm(spec.name or mid), *(_norm(a) for a in spec.aliases)}:
            return mid, None
    return None, f"unknown model '{name}' (no catalog entry matches '{key}')"


def _gpu_key(text: str) -> str:
    """Order-free token set: ``a100_80gb_sxm`` and ``a100-sxm-80gb`` agree."""
    return "-".join(sorted(t for t in re.split(r"[-_\s]+", text.strip().lower()) if t))


def resolve_gpu_name(name: str) -> tuple[str | None, str | None]:
    """(catalog GPU id, None) or (None, reason).  ``h100_sxm`` → ``h100-sxm``;
    the tokens may come in any order (``a100_80gb_sxm`` → ``a100-sxm-80gb``)."""
    cat = load_catalog()
    key = _gpu_key(name)
    for gid, spec in cat.gpus.items():
        if key in {_gpu_key(gid), *(_gpu_key(a) for a in spec.aliases)}:
            return gid, None
    if "unspecified" in key or "unknown" in key:
        return None, f"GPU variant not stated ('{name}'): memory and bandwidth differ between variants"
    return None, f"unknown gpu '{name}' (known: {', '.join(sorted(cat.gpus))})"


# The variant a published row most likely ran when it names only the GPU family:
# the SXM board with the most memory, the one NVIDIA's and the clouds' benchmark
# tables use (DGX/HGX H100 SXM 80 GB, DGX A100 80 GB, HGX H200 SXM 141 GB).
COMMON_GPU_VARIANTS: dict[str, str] = {"h100": "h100-sxm", "a100": "a100-sxm-80gb", "h200": "h200-sxm"}


def assumed_gpu_variant(name: str) -> tuple[str, str] | None:
    """(catalog id, note) for a GPU named without its variant (``a100_unspecified``,
    ``A100``), else None: the prediction runs on the common variant and says so."""
    tokens = [t for t in re.split(r"[-_\s]+", name.strip().lower()) if t and t not in {"unspecified", "unknown"}]
    if len(tokens) != 1 or tokens[0] not in COMMON_GPU_VARIANTS:
        return None
    gid = COMMON_GPU_VARIANTS[tokens[0]]
    return gid, f"GPU variant not stated ('{name}'): assumed the common variant {gid}"


# Benchmarks known to draw random lengths, by the address their rows cite: InferenceX's
# workflow templates (.github/workflows/benchmark-tmpl.yml, benchmark-multinode-tmpl.yml) set
# RANDOM_RANGE_RATIO 0.8, and its benchmark_serving.py draws each length uniformly in
# [int(0.8 n), n] (utils/bench_serving/benchmark_serving.py, sample_random_requests).
BENCHMARK_RANGE_RATIOS: dict[str, float] = {"github.com/semianalysisai/inferencex": 0.8}


def length_range_ratio(ratio: float | None, source: str | None) -> tuple[float | None, str | None]:
    """(r, a note when it was not stated): the row's own ratio, else its benchmark's known one
    (:data:`BENCHMARK_RANGE_RATIOS`), else None (fixed lengths)."""
    if ratio is not None:
        return ratio, None
    text = (source or "").lower()
    for where, r in BENCHMARK_RANGE_RATIOS.items():
        if where in text:
            return r, (f"length_range_ratio not stated: {r} (the benchmark's own setting), so the mean lengths are "
                       f"{(1 + r) / 2:g} × isl and osl")
    return None, None


# InferenceX's single-node SGLang recipes for DeepSeek-R1 on B200 and B300
# (benchmarks/single_node/fixed_seq_len/dsr1_{fp4,fp8}_{b200,b300}[_mtp].sh, since September
# 2025) start the server with --scheduler-recv-interval: 10 below 16 clients and 30 from 16
# on ("relax to ~30 requests between scheduler recv polls"), 10 at any load for FP8 on TP4,
# and 1 with DP attention.  Other recipes (ROCm, Dynamo, TensorRT-LLM) leave SGLang's default 1.
INFERENCEX_SOURCE = "github.com/semianalysisai/inferencex"
_INFERENCEX_RECV_GPUS = frozenset({"b200", "b300"})


def scheduler_recv_interval(*, stated: int | None, engine: str, source: str | None, gpu: str, tp: int,
                            precision: str, concurrency: float | None, dp_attention: bool | None,
                            disaggregated: bool) -> tuple[int, str | None]:
    """(SGLang's --scheduler-recv-interval the row ran with, a note when it was not stated): the
    row's own value, else its recipe's known one (InferenceX's B200/B300 SGLang recipes), else 1."""
    if stated is not None:
        return stated, None
    if (INFERENCEX_SOURCE not in (source or "").lower() or engine.strip().lower() != "sglang"
            or gpu.strip().lower() not in _INFERENCEX_RECV_GPUS or disaggregated or concurrency is None):
        return 1, None
    if dp_attention:
        k = 1
    elif tp == 4 and precision.strip().lower() == "fp8":
        k = 10
    else:
        k = 30 if concurrency >= 16 else 10
    return k, (f"scheduler_recv_interval not stated: {k} (InferenceX's SGLang recipe for {gpu} at "
               f"{concurrency:g} clients)")


# InferenceX's single-node TensorRT-LLM recipes for DeepSeek-R1
# (benchmarks/single_node/fixed_seq_len/dsr1_{fp4,fp8}_{b200,h200}_trt[_mtp].sh) add, with
# DP_ATTENTION=true, "attention_dp_config: batching_wait_iters 0, enable_balance true,
# timeout_iters 60"; TensorRT-LLM's default leaves the balance off.
_INFERENCEX_BALANCE_ITERS = 60


def attention_dp_balance_iters(*, stated: int | None, engine: str, source: str | None, dp_attention: bool | None,
                               disaggregated: bool) -> tuple[int, str | None]:
    """(TensorRT-LLM's attention-DP balance timeout the row ran with, a note when it was not
    stated): the row's own value, else its recipe's known one (InferenceX's single-node
    TensorRT-LLM recipes with attention DP), else 0 (off)."""
    if stated is not None:
        return stated, None
    if (INFERENCEX_SOURCE not in (source or "").lower() or engine_family(engine) != "trtllm"
            or dynamo_stack(engine) or not dp_attention or disaggregated):
        return 0, None
    k = _INFERENCEX_BALANCE_ITERS
    return k, (f"attention_dp_balance_iters not stated: {k} (InferenceX's TensorRT-LLM recipe with attention DP: "
               f"attention_dp_config enable_balance, timeout_iters {k})")


# A source that quantizes the KV cache on some chip generations only says so in the row's
# notes: "FP8 KV on Blackwell" (TensorRT-LLM's perf tables: ``kv_cache_config: dtype: fp8  #
# Hopper: use auto``).  On another generation the engine keeps its default, ``auto``: the
# checkpoint's 16-bit KV.
_KV_ON_GENERATION = re.compile(r"\bfp8 kv(?: cache)? on ([a-z0-9]+)")


def row_kv_dtype(*, stated: KvDtype | None, notes: str | None, architecture: str,
                 label: KvDtype) -> tuple[KvDtype, str | None]:
    """(the KV cache precision a row ran with, a note when it was not ``stated``): the row's
    own, else 16-bit where its notes quantize the KV on another chip generation than its
    GPU's (a GPU of unstated generation keeps the label's), else the precision label's."""
    if stated is not None:
        return stated, None
    m = _KV_ON_GENERATION.search((notes or "").lower())
    if m is None or not architecture or m.group(1) == architecture or label != "fp8":
        return label, None
    return "bf16", (f"kv_dtype not stated: the row's notes quantize the KV cache on {m.group(1)} only; "
                    f"on this {architecture} GPU the engine's default (auto: the checkpoint's 16-bit) is used")


def dynamo_stack(engine: str) -> bool:
    """Whether an engine as published runs under NVIDIA Dynamo (its disaggregated serving:
    "Dynamo + SGLang", "Dynamo + TensorRT-LLM")."""
    return "dynamo" in engine.lower()


def engine_family(engine: str) -> EngineFamily:
    """``trtllm`` for TensorRT-LLM and NVIDIA NIM (whose LLM profiles run on
    TensorRT-LLM), ``vllm`` for vLLM, SGLang and every other engine."""
    e = engine.lower()
    if "tensorrt" in e or "trt-llm" in e or "trtllm" in e or re.search(r"\bnim\b", e):
        return "trtllm"
    return "vllm"


def precision_dtypes(precision: str, *, family: str) -> tuple[tuple[WeightsDtype, KvDtype] | None, str | None]:
    """((weights_dtype, kv_dtype), None) or (None, reason) for a precision label."""
    p = precision.strip().lower().replace("-", "").replace("_", "")
    if p not in PRECISIONS:
        return None, f"unknown precision '{precision}' (known: {', '.join(PRECISIONS)})"
    weights, kv = PRECISIONS[p]
    if family in _UNQUANTIZED_KV_FAMILIES and kv == "fp8" and weights != "fp32":
        kv = "bf16"
    return (weights, kv), None
