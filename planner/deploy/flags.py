"""The flag table: every engine flag and config field that ``planner.deploy`` emits,
with the engine, the version it was checked against and the source file (or
documentation page) that defines it.

Nothing is emitted that is not here: ``tests/test_deploy_flags.py`` holds every
flag in every generated command and every key in every generated engine YAML to
this table, and builds the round-trip parsers from the names recorded here.

Sources were read at the commits recorded in ``SOURCES`` (public repositories:
vllm-project/vllm, sgl-project/sglang, NVIDIA/TensorRT-LLM, ai-dynamo/dynamo).
vLLM generates its CLI flags from config dataclass fields (``--tensor-parallel-size``
from ``ParallelConfig.tensor_parallel_size``; ``vllm/engine/arg_utils.py`` adds them),
so the file named is the dataclass's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ENGINE_FLAGS", "FLAG_SOURCES", "FlagSpec", "SourceFile", "flag", "flags_of"]

Engine = Literal["vllm", "sglang", "trtllm", "dynamo"]


@dataclass(frozen=True)
class SourceFile:
    """Where a flag is defined: a file at a commit, or a documentation page."""

    repo: str
    path: str
    commit: str
    url: str


@dataclass(frozen=True)
class FlagSpec:
    """One command-line flag (``--name``) or engine-config key (``a.b``)."""

    engine: Engine
    name: str  # "--max-num-seqs" (a flag) or "kv_cache_config.free_gpu_memory_fraction" (a YAML key)
    takes_value: bool  # False: a boolean switch (store_true)
    source: str  # key of FLAG_SOURCES
    checked_version: str  # the engine version (or commit) the name was checked against
    meaning: str
    choices: tuple[str, ...] = ()  # the values the engine accepts, where it lists them and we emit a subset

    @property
    def is_cli(self) -> bool:
        return self.name.startswith("--")


_VLLM = "vllm main (each file at the commit recorded in FLAG_SOURCES)"
_SGL = "sglang main @ 469c63e5"
_TRT = "TensorRT-LLM main @ fcd3f316 (PyTorch backend)"
_DYN = "dynamo main @ b6d5e487 (dynamo.vllm worker)"

FLAG_SOURCES: dict[str, SourceFile] = {
    "vllm.parallel": SourceFile("vllm-project/vllm", "vllm/config/parallel.py", "840e7972c6ab74061696e81e17d8a74db2aefd7e",
                                "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    "vllm.scheduler": SourceFile("vllm-project/vllm", "vllm/config/scheduler.py", "1f8758d584e8f599219d75adf658e182ed809a43",
                                 "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    "vllm.cache": SourceFile("vllm-project/vllm", "vllm/config/cache.py", "c1d86421174a87056edc90a41dc9942391509e84",
                             "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    "vllm.model": SourceFile("vllm-project/vllm", "vllm/config/model.py", "18ec6629253632af0a384f2ffbb8c6b28af322e7",
                             "https://docs.vllm.ai/en/latest/configuration/engine_args.html"),
    "vllm.speculative": SourceFile("vllm-project/vllm", "vllm/config/speculative.py",
                                   "f19b16d95e4395790661f4835e4436bc3dd5d9c7",
                                   "https://docs.vllm.ai/en/latest/features/spec_decode.html"),
    "vllm.kv_transfer": SourceFile("vllm-project/vllm", "vllm/config/kv_transfer.py",
                                   "9dc4946457fb6963f05e08b04382013a745cad8a",
                                   "https://docs.vllm.ai/en/latest/features/disagg_prefill.html"),
    "vllm.cli": SourceFile("vllm-project/vllm", "vllm/engine/arg_utils.py", "a4cd9d0d28bdb41db8dfe0acdafac2bf2f608630",
                           "https://docs.vllm.ai/en/latest/cli/serve.html"),
    "sglang.server_args": SourceFile("sgl-project/sglang", "python/sglang/srt/server_args.py",
                                     "469c63e54e7d94591617ef9590c6aa26d54dc1bb",
                                     "https://docs.sglang.ai/advanced_features/server_arguments.html"),
    "trtllm.llm_args": SourceFile("NVIDIA/TensorRT-LLM", "tensorrt_llm/llmapi/llm_args.py",
                                  "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
                                  "https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve/trtllm-serve.html"),
    "trtllm.serve": SourceFile("NVIDIA/TensorRT-LLM", "tensorrt_llm/commands/serve.py",
                               "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
                               "https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve/trtllm-serve.html"),
    "dynamo.vllm": SourceFile("ai-dynamo/dynamo", "components/src/dynamo/vllm/args.py",
                              "b6d5e48722e494c650c285c0f2370c3e28f37a1b",
                              "https://docs.nvidia.com/dynamo/latest/backends/vllm/README.html"),
}

_TABLE: tuple[FlagSpec, ...] = (
    # vLLM: `vllm serve MODEL ...`
    FlagSpec("vllm", "--tensor-parallel-size", True, "vllm.parallel", _VLLM, "ParallelConfig.tensor_parallel_size"),
    FlagSpec("vllm", "--pipeline-parallel-size", True, "vllm.parallel", _VLLM,
             "ParallelConfig.pipeline_parallel_size"),
    FlagSpec("vllm", "--data-parallel-size", True, "vllm.parallel", _VLLM,
             "ParallelConfig.data_parallel_size: attention data-parallel ranks (with EP: DP attention)"),
    FlagSpec("vllm", "--enable-expert-parallel", False, "vllm.parallel", _VLLM,
             "ParallelConfig.enable_expert_parallel: experts laid over TP × DP ranks instead of TP-sharded"),
    FlagSpec("vllm", "--enable-eplb", False, "vllm.parallel", _VLLM,
             "ParallelConfig.enable_eplb: expert-parallel load balancing (redundant expert copies)"),
    FlagSpec("vllm", "--eplb-config", True, "vllm.parallel", _VLLM,
             "EPLBConfig as JSON: num_redundant_experts (extra expert copies per MoE layer)"),
    FlagSpec("vllm", "--max-num-seqs", True, "vllm.scheduler", _VLLM,
             "SchedulerConfig.max_num_seqs: sequences per step (per DP rank)"),
    FlagSpec("vllm", "--max-num-batched-tokens", True, "vllm.scheduler", _VLLM,
             "SchedulerConfig.max_num_batched_tokens: tokens per step, the chunked-prefill budget"),
    FlagSpec("vllm", "--gpu-memory-utilization", True, "vllm.cache", _VLLM,
             "CacheConfig.gpu_memory_utilization: fraction of the GPU's memory the engine may use"),
    FlagSpec("vllm", "--kv-cache-dtype", True, "vllm.cache", _VLLM, "CacheConfig.cache_dtype", ("auto", "fp8")),
    FlagSpec("vllm", "--enable-prefix-caching", False, "vllm.cache", _VLLM, "CacheConfig.enable_prefix_caching"),
    FlagSpec("vllm", "--quantization", True, "vllm.model", _VLLM, "ModelConfig.quantization", ("fp8",)),
    FlagSpec("vllm", "--speculative-config", True, "vllm.speculative", _VLLM,
             "SpeculativeConfig as JSON: method (mtp | eagle | draft_model), num_speculative_tokens, model"),
    FlagSpec("vllm", "--kv-transfer-config", True, "vllm.kv_transfer", _VLLM,
             "KVTransferConfig as JSON: kv_connector (NixlConnector), kv_role (kv_producer | kv_consumer | kv_both)"),
    FlagSpec("vllm", "--model", True, "vllm.model", _VLLM,
             "ModelConfig.model (how a Dynamo vLLM worker names the model; vllm serve takes it as a positional)"),
    FlagSpec("vllm", "--max-model-len", True, "vllm.model", _VLLM, "ModelConfig.max_model_len: the context"),
    # SGLang: `python -m sglang.launch_server --model-path MODEL ...`
    FlagSpec("sglang", "--model-path", True, "sglang.server_args", _SGL, "ServerArgs.model_path"),
    FlagSpec("sglang", "--tp", True, "sglang.server_args", _SGL, "ServerArgs.tp_size (alias of --tp-size)"),
    FlagSpec("sglang", "--pp-size", True, "sglang.server_args", _SGL, "ServerArgs.pp_size"),
    FlagSpec("sglang", "--ep", True, "sglang.server_args", _SGL, "ServerArgs.ep_size (alias of --ep-size)"),
    FlagSpec("sglang", "--dp", True, "sglang.server_args", _SGL, "ServerArgs.dp_size (alias of --dp-size)"),
    FlagSpec("sglang", "--enable-dp-attention", False, "sglang.server_args", _SGL,
             "ServerArgs.enable_dp_attention: attention data-parallel over --dp ranks, MoE over --ep"),
    FlagSpec("sglang", "--enable-eplb", False, "sglang.server_args", _SGL,
             "ServerArgs.enable_eplb: expert-parallel load balancing"),
    FlagSpec("sglang", "--ep-num-redundant-experts", True, "sglang.server_args", _SGL,
             "ServerArgs.ep_num_redundant_experts: extra expert copies per MoE layer"),
    FlagSpec("sglang", "--max-running-requests", True, "sglang.server_args", _SGL,
             "ServerArgs.max_running_requests: the running batch"),
    FlagSpec("sglang", "--chunked-prefill-size", True, "sglang.server_args", _SGL,
             "ServerArgs.chunked_prefill_size: tokens per prefill chunk"),
    FlagSpec("sglang", "--mem-fraction-static", True, "sglang.server_args", _SGL,
             "ServerArgs.mem_fraction_static: fraction of GPU memory for weights and KV pool"),
    FlagSpec("sglang", "--kv-cache-dtype", True, "sglang.server_args", _SGL, "ServerArgs.kv_cache_dtype",
             ("auto", "fp8_e4m3", "fp8_e5m2")),
    FlagSpec("sglang", "--quantization", True, "sglang.server_args", _SGL, "ServerArgs.quantization", ("fp8",)),
    FlagSpec("sglang", "--speculative-algorithm", True, "sglang.server_args", _SGL,
             "ServerArgs.speculative_algorithm", ("EAGLE", "NEXTN", "STANDALONE")),
    FlagSpec("sglang", "--speculative-num-steps", True, "sglang.server_args", _SGL,
             "ServerArgs.speculative_num_steps: draft steps per verify"),
    FlagSpec("sglang", "--speculative-eagle-topk", True, "sglang.server_args", _SGL,
             "ServerArgs.speculative_eagle_topk: 1 = a chain of drafts (no tree)"),
    FlagSpec("sglang", "--speculative-num-draft-tokens", True, "sglang.server_args", _SGL,
             "ServerArgs.speculative_num_draft_tokens: draft tokens verified per step (steps + 1 with topk 1)"),
    FlagSpec("sglang", "--speculative-draft-model-path", True, "sglang.server_args", _SGL,
             "ServerArgs.speculative_draft_model_path"),
    FlagSpec("sglang", "--disaggregation-mode", True, "sglang.server_args", _SGL,
             "ServerArgs.disaggregation_mode", ("prefill", "decode")),
    FlagSpec("sglang", "--disaggregation-transfer-backend", True, "sglang.server_args", _SGL,
             "ServerArgs.disaggregation_transfer_backend", ("nixl", "mooncake")),
    FlagSpec("sglang", "--context-length", True, "sglang.server_args", _SGL, "ServerArgs.context_length"),
    FlagSpec("sglang", "--scheduler-recv-interval", True, "sglang.server_args", _SGL,
             "ServerArgs.scheduler_recv_interval: take in new requests every N forward passes (decode passes count "
             "1; serving.scheduler_recv_interval)"),
    # TensorRT-LLM: `trtllm-serve MODEL --extra_llm_api_options FILE.yaml`, and the YAML's keys (LlmArgs fields)
    FlagSpec("trtllm", "--backend", True, "trtllm.serve", _TRT, "trtllm-serve --backend", ("pytorch",)),
    FlagSpec("trtllm", "--extra_llm_api_options", True, "trtllm.serve", _TRT,
             "trtllm-serve: a YAML of LlmArgs fields"),
    FlagSpec("trtllm", "tensor_parallel_size", True, "trtllm.llm_args", _TRT, "LlmArgs.tensor_parallel_size"),
    FlagSpec("trtllm", "pipeline_parallel_size", True, "trtllm.llm_args", _TRT, "LlmArgs.pipeline_parallel_size"),
    FlagSpec("trtllm", "moe_expert_parallel_size", True, "trtllm.llm_args", _TRT, "LlmArgs.moe_expert_parallel_size"),
    FlagSpec("trtllm", "enable_attention_dp", True, "trtllm.llm_args", _TRT,
             "LlmArgs.enable_attention_dp: attention data-parallel over the TP ranks"),
    FlagSpec("trtllm", "attention_dp_config.enable_balance", True, "trtllm.llm_args", _TRT,
             "AttentionDpConfig.enable_balance: hold new prompts until every attention-DP rank has one "
             "(serving.attention_dp_balance_iters)"),
    FlagSpec("trtllm", "attention_dp_config.timeout_iters", True, "trtllm.llm_args", _TRT,
             "AttentionDpConfig.timeout_iters: or until this many iterations (default 50)"),
    FlagSpec("trtllm", "attention_dp_config.batching_wait_iters", True, "trtllm.llm_args", _TRT,
             "AttentionDpConfig.batching_wait_iters: further waits once every rank has one (default 10; the plan "
             "models 0)"),
    FlagSpec("trtllm", "max_batch_size", True, "trtllm.llm_args", _TRT, "LlmArgs.max_batch_size"),
    FlagSpec("trtllm", "max_num_tokens", True, "trtllm.llm_args", _TRT, "LlmArgs.max_num_tokens: tokens per step"),
    FlagSpec("trtllm", "max_seq_len", True, "trtllm.llm_args", _TRT, "LlmArgs.max_seq_len: the context"),
    FlagSpec("trtllm", "kv_cache_config.free_gpu_memory_fraction", True, "trtllm.llm_args", _TRT,
             "KvCacheConfig.free_gpu_memory_fraction: of the memory left after weights and activations"),
    FlagSpec("trtllm", "kv_cache_config.dtype", True, "trtllm.llm_args", _TRT, "KvCacheConfig.dtype", ("auto", "fp8")),
    FlagSpec("trtllm", "kv_cache_config.enable_block_reuse", True, "trtllm.llm_args", _TRT,
             "KvCacheConfig.enable_block_reuse: prefix reuse"),
    FlagSpec("trtllm", "speculative_config.decoding_type", True, "trtllm.llm_args", _TRT,
             "DecodingBaseConfig.decoding_type", ("MTP", "Eagle", "Draft_Target")),
    FlagSpec("trtllm", "speculative_config.num_nextn_predict_layers", True, "trtllm.llm_args", _TRT,
             "MTPDecodingConfig.num_nextn_predict_layers: MTP modules = draft tokens"),
    FlagSpec("trtllm", "speculative_config.max_draft_len", True, "trtllm.llm_args", _TRT,
             "DecodingBaseConfig.max_draft_len"),
    FlagSpec("trtllm", "speculative_config.speculative_model", True, "trtllm.llm_args", _TRT,
             "DecodingBaseConfig.speculative_model: the draft or EAGLE head"),
    FlagSpec("trtllm", "disable_overlap_scheduler", True, "trtllm.llm_args", _TRT,
             "TorchLlmArgs.disable_overlap_scheduler (true on a disaggregated context server)"),
    FlagSpec("trtllm", "cache_transceiver_config.backend", True, "trtllm.llm_args", _TRT,
             "CacheTransceiverConfig.backend: the KV transfer of a disaggregated pool", ("NIXL", "UCX", "DEFAULT")),
    # Dynamo's own worker flag (its workers pass every other flag to the engine)
    FlagSpec("dynamo", "--disaggregation-mode", True, "dynamo.vllm", _DYN,
             "Dynamo worker role", ("prefill", "decode")),
)

ENGINE_FLAGS: dict[tuple[str, str], FlagSpec] = {(f.engine, f.name): f for f in _TABLE}


def flag(engine: str, name: str) -> str:
    """``name``, after checking that the table records it for ``engine`` (KeyError otherwise:
    a flag nobody looked up is a bug, never emitted)."""
    if (engine, name) not in ENGINE_FLAGS:
        raise KeyError(f"{engine} {name}: not in planner.deploy.flags (look it up and record its source first)")
    return name


def flags_of(engine: str) -> tuple[FlagSpec, ...]:
    """Every recorded flag and key of ``engine``."""
    return tuple(f for f in _TABLE if f.engine == engine)
