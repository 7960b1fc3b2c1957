"""Engine commands: ``vllm serve``, ``python -m sglang.launch_server`` and
``trtllm-serve`` with its ``extra_llm_api_options`` YAML, one per pool.

Every flag goes through :func:`planner.deploy.flags.flag` (a name not in the
table is a bug, never emitted).  What an engine cannot express raises
:class:`DeployError`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from planner.deploy.flags import flag
from planner.deploy.layout import DeployError, DeployInputs, Pool, memory_fraction
from planner.spec.scenario import resolve_model

__all__ = ["ENGINES", "PREQUANTIZED_DTYPES", "EngineCommand", "engine_commands", "flatten_keys", "nested_value"]

ENGINES = ("vllm", "sglang", "trtllm")
# Weight formats an engine quantizes to online from a 16-bit checkpoint (vLLM, SGLang: --quantization fp8);
# every other non-16-bit format needs a pre-quantized checkpoint (deploy's ``weights``).
ONLINE_QUANT = {"fp8": "fp8"}
PREQUANTIZED_DTYPES = ("fp8", "int8", "int4", "nvfp4", "mxfp4")
NIXL = "NixlConnector"  # vLLM's KV connector for disaggregated prefill (vllm/config/kv_transfer.py)
EAGLE_HEAD = "EAGLE_HEAD"  # placeholder: the EAGLE head trained for the target (named in the file's header)


@dataclass(frozen=True)
class EngineCommand:
    """One pool's engine: its argv and (TensorRT-LLM) its YAML config."""

    engine: str
    pool: Pool
    argv: tuple[str, ...]
    config: dict[str, Any] = field(default_factory=dict)
    config_name: str = ""
    notes: tuple[str, ...] = ()


def _has_mtp(inputs: DeployInputs) -> bool:
    return resolve_model(inputs.scenario).mtp_layers > 0


def _check_common(inputs: DeployInputs, engine: str, weights: str | None) -> None:
    s = inputs.scenario
    if s.weights_dtype == "fp32" or s.kv_dtype == "fp32":
        raise DeployError(f"{engine}: fp32 weights or KV are not a serving format the deploy targets emit; "
                          "re-plan with bf16")
    if s.weights_dtype in PREQUANTIZED_DTYPES and weights is None and (
            engine == "trtllm" or s.weights_dtype not in ONLINE_QUANT):
        raise DeployError(f"{engine}: weights_dtype {s.weights_dtype} needs a pre-quantized checkpoint of "
                          f"{inputs.model_ref}; name it with --weights REPO_OR_PATH")
    if inputs.spec is not None and inputs.spec.method == "mtp" and not _has_mtp(inputs):
        raise DeployError(f"{engine}: speculative.method mtp needs a model with MTP layers; "
                          f"{resolve_model(s).id} has none")


def _quant_args(engine: str, inputs: DeployInputs, weights: str | None) -> list[str]:
    wd = inputs.scenario.weights_dtype
    if weights is None and wd in ONLINE_QUANT:
        return [flag(engine, "--quantization"), ONLINE_QUANT[wd]]
    return []  # 16-bit, or a pre-quantized checkpoint that carries its own quantization config


def _vllm(inputs: DeployInputs, pool: Pool, model: str, weights: str | None) -> EngineCommand:
    e = "vllm"
    if pool.ep > 1 and pool.ep != pool.tp:
        raise DeployError(f"vllm: --enable-expert-parallel lays experts over all TP × DP ranks ({pool.tp}); "
                          f"parallel.ep={pool.ep} is not expressible: use ep={pool.tp} or sglang/trtllm")
    if pool.dp_attention and pool.ep <= 1:
        raise DeployError("vllm: DP attention (--data-parallel-size with --enable-expert-parallel) is for MoE "
                          "models with parallel.ep > 1")
    dp = pool.tp if pool.dp_attention else 1
    tp = 1 if pool.dp_attention else pool.tp
    a = ["vllm", "serve", model, flag(e, "--tensor-parallel-size"), str(tp),
         flag(e, "--pipeline-parallel-size"), str(pool.pp)]
    if dp > 1:
        a += [flag(e, "--data-parallel-size"), str(dp)]
    if pool.ep > 1:
        a.append(flag(e, "--enable-expert-parallel"))
    if pool.redundant_experts:
        a += [flag(e, "--enable-eplb"), flag(e, "--eplb-config"),
              json.dumps({"num_redundant_experts": pool.redundant_experts}, separators=(",", ":"))]
    if pool.batch is not None:
        a += [flag(e, "--max-num-seqs"), str(math.ceil(pool.batch / dp))]  # per DP rank
    a += [flag(e, "--max-num-batched-tokens"), str(pool.chunk_tokens),
          flag(e, "--gpu-memory-utilization"), str(memory_fraction(inputs, e, pool)),
          flag(e, "--max-model-len"), str(pool.context_tokens)]
    if inputs.scenario.kv_dtype == "fp8":
        a += [flag(e, "--kv-cache-dtype"), "fp8"]
    a += _quant_args(e, inputs, weights)
    sp = inputs.spec
    if sp is not None:
        cfg: dict[str, Any] = {"method": sp.method, "num_speculative_tokens": sp.draft_tokens}
        if sp.method == "eagle":
            cfg["model"] = EAGLE_HEAD
        elif sp.method == "draft_model":
            cfg["model"] = sp.draft_ref
        a += [flag(e, "--speculative-config"), json.dumps(cfg, separators=(",", ":"))]
    if inputs.prefix_caching:
        a.append(flag(e, "--enable-prefix-caching"))
    if pool.role != "colocated":
        role = "kv_producer" if pool.role == "prefill" else "kv_consumer"
        a += [flag(e, "--kv-transfer-config"),
              json.dumps({"kv_connector": NIXL, "kv_role": role}, separators=(",", ":"))]
    return EngineCommand(e, pool, tuple(a), notes=("--max-num-seqs is per data-parallel rank",) if dp > 1 else ())


def _sglang(inputs: DeployInputs, pool: Pool, model: str, weights: str | None) -> EngineCommand:
    e = "sglang"
    if pool.ep > 1 and pool.tp % pool.ep:
        raise DeployError(f"sglang: --ep {pool.ep} must divide --tp {pool.tp}")
    a = ["python", "-m", "sglang.launch_server", flag(e, "--model-path"), model, flag(e, "--tp"), str(pool.tp)]
    if pool.pp > 1:
        a += [flag(e, "--pp-size"), str(pool.pp)]
    if pool.ep > 1:
        a += [flag(e, "--ep"), str(pool.ep)]
    if pool.dp_attention:
        a += [flag(e, "--enable-dp-attention"), flag(e, "--dp"), str(pool.tp)]
    if pool.redundant_experts:
        a += [flag(e, "--enable-eplb"), flag(e, "--ep-num-redundant-experts"), str(pool.redundant_experts)]
    if pool.batch is not None:
        a += [flag(e, "--max-running-requests"), str(pool.batch)]
    a += [flag(e, "--chunked-prefill-size"), str(pool.chunk_tokens),
          flag(e, "--mem-fraction-static"), str(memory_fraction(inputs, e, pool)),
          flag(e, "--context-length"), str(pool.context_tokens)]
    if inputs.scenario.kv_dtype == "fp8":
        a += [flag(e, "--kv-cache-dtype"), "fp8_e4m3"]
    recv = inputs.scenario.serving.scheduler_recv_interval
    if recv > 1:  # the plan's TTFT includes the wait it costs (operating_point.ttft_recv_wait_s)
        a += [flag(e, "--scheduler-recv-interval"), str(recv)]
    a += _quant_args(e, inputs, weights)
    sp = inputs.spec
    if sp is not None:
        algo = {"mtp": "NEXTN", "eagle": "EAGLE", "draft_model": "STANDALONE"}[sp.method]
        a += [flag(e, "--speculative-algorithm"), algo, flag(e, "--speculative-num-steps"), str(sp.draft_tokens),
              flag(e, "--speculative-eagle-topk"), "1",
              flag(e, "--speculative-num-draft-tokens"), str(sp.draft_tokens + 1)]
        if sp.method != "mtp":
            a += [flag(e, "--speculative-draft-model-path"), sp.draft_ref or EAGLE_HEAD]
    if pool.role != "colocated":
        a += [flag(e, "--disaggregation-mode"), pool.role, flag(e, "--disaggregation-transfer-backend"), "nixl"]
    notes = ("prefix caching: SGLang's radix cache is on by default",) if inputs.prefix_caching else ()
    return EngineCommand(e, pool, tuple(a), notes=notes)


def _put(cfg: dict[str, Any], key: str, value: Any) -> None:
    flag("trtllm", key)
    head, _, rest = key.partition(".")
    if rest:
        cfg.setdefault(head, {})[rest] = value
    else:
        cfg[head] = value


def _trtllm(inputs: DeployInputs, pool: Pool, model: str, weights: str | None) -> EngineCommand:
    e = "trtllm"
    if pool.ep > 1 and pool.tp % pool.ep:
        raise DeployError(f"trtllm: moe_expert_parallel_size {pool.ep} must divide tensor_parallel_size {pool.tp}")
    if pool.redundant_experts:
        raise DeployError(f"trtllm: parallel.redundant_experts={pool.redundant_experts}: TensorRT-LLM's MoE load "
                          "balancer (its slot count) is not in planner/deploy/flags.py; use vllm or sglang")
    cfg: dict[str, Any] = {}
    _put(cfg, "tensor_parallel_size", pool.tp)
    _put(cfg, "pipeline_parallel_size", pool.pp)
    if pool.ep > 1:
        _put(cfg, "moe_expert_parallel_size", pool.ep)
    _put(cfg, "enable_attention_dp", pool.dp_attention)
    balance = inputs.scenario.serving.attention_dp_balance_iters
    if balance > 0 and pool.dp_attention and pool.role == "colocated":
        # the plan's TTFT includes the wait it costs (operating_point.ttft_recv_wait_s)
        _put(cfg, "attention_dp_config.enable_balance", True)
        _put(cfg, "attention_dp_config.timeout_iters", balance)
        _put(cfg, "attention_dp_config.batching_wait_iters", 0)
    if pool.batch is not None:
        _put(cfg, "max_batch_size", pool.batch)
    _put(cfg, "max_num_tokens", pool.chunk_tokens)
    _put(cfg, "max_seq_len", pool.context_tokens)
    _put(cfg, "kv_cache_config.free_gpu_memory_fraction", memory_fraction(inputs, e, pool))
    if inputs.scenario.kv_dtype == "fp8":
        _put(cfg, "kv_cache_config.dtype", "fp8")
    _put(cfg, "kv_cache_config.enable_block_reuse", inputs.prefix_caching)
    sp = inputs.spec
    if sp is not None:
        if sp.method == "mtp":
            _put(cfg, "speculative_config.decoding_type", "MTP")
            _put(cfg, "speculative_config.num_nextn_predict_layers", sp.draft_tokens)
        else:
            _put(cfg, "speculative_config.decoding_type", "Eagle" if sp.method == "eagle" else "Draft_Target")
            _put(cfg, "speculative_config.max_draft_len", sp.draft_tokens)
            _put(cfg, "speculative_config.speculative_model", sp.draft_ref or EAGLE_HEAD)
    if pool.role != "colocated":
        _put(cfg, "cache_transceiver_config.backend", "NIXL")
        _put(cfg, "disable_overlap_scheduler", pool.role == "prefill")
    name = f"trtllm-{pool.role}.yaml"
    argv = ("trtllm-serve", model, flag(e, "--backend"), "pytorch", flag(e, "--extra_llm_api_options"), name)
    notes = ("disaggregated: run the context (prefill) and generation (decode) servers behind "
             "`trtllm-serve disaggregated`",) if pool.role != "colocated" else ()
    return EngineCommand(e, pool, argv, config=cfg, config_name=name, notes=notes)


_BUILDERS = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}


def engine_commands(inputs: DeployInputs, engine: str, *, weights: str | None = None) -> tuple[EngineCommand, ...]:
    """One command per pool for ``engine`` (``weights``: a pre-quantized checkpoint to load instead of the
    catalog model's repo)."""
    if engine not in _BUILDERS:
        raise DeployError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
    _check_common(inputs, engine, weights)
    model = weights or inputs.model_ref
    out = tuple(_BUILDERS[engine](inputs, p, model, weights) for p in inputs.pools)
    recv = inputs.scenario.serving.scheduler_recv_interval
    if recv > 1 and engine != "sglang":
        note = (f"serving.scheduler_recv_interval {recv} is SGLang's --scheduler-recv-interval: {engine} takes new "
                f"requests every iteration, so its TTFT runs below the plan's (operating_point.ttft_recv_wait_s)")
        out = tuple(replace(c, notes=(*c.notes, note)) for c in out)
    balance = inputs.scenario.serving.attention_dp_balance_iters
    if balance > 0 and engine != "trtllm":
        note = (f"serving.attention_dp_balance_iters {balance} is TensorRT-LLM's attention_dp_config (enable_balance, "
                f"timeout_iters): {engine} takes new requests without it, so its TTFT runs below the plan's "
                f"(operating_point.ttft_recv_wait_s)")
        out = tuple(replace(c, notes=(*c.notes, note)) for c in out)
    return out


def flatten_keys(cfg: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: the dotted keys the flag table records."""
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_keys(v, key + "."))
        else:
            out[key] = v
    return out


def nested_value(cfg: dict[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    return node
