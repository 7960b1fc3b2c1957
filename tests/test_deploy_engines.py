"""Issue 27: the engine commands of the three golden plans, checked field by field against the
plan's numbers (not frozen text), parsed back with parsers built from the flag table's names."""

from __future__ import annotations

import json

import pytest
from deploy_support import LLAMA_DISAGG, deepseek_dict, golden, parse_command

from planner.deploy import DeployError, deploy, flatten_keys
from planner.physics.memory import kv_budget_bytes
from planner.sizing.plan import Plan, plan
from planner.spec.scenario import Scenario, resolve_gpu

FP8_CHECKPOINT = "nvidia/Llama-3.1-70B-Instruct-FP8"  # a pre-quantized checkpoint, for TensorRT-LLM


def _kv_from_fraction(s: Scenario, p: Plan, engine: str, u: float) -> float:
    m = p.memory
    return float(kv_budget_bytes(gpu=resolve_gpu(s), weight_bytes_per_gpu=m.weight_bytes_per_gpu
                                 + m.draft_weight_bytes_per_gpu, memory_utilization=u,
                                 activation_bytes=m.activation_bytes, engine=engine))


def _assert_memory(s: Scenario, p: Plan, engine: str, u: float) -> None:
    """The emitted fraction gives the engine the KV budget per GPU the plan sized (to the 0.1% rounding)."""
    if s.serving.engine == engine and s.serving.memory_utilization is not None:
        assert u == s.serving.memory_utilization
    hbm = resolve_gpu(s).cuda_visible_hbm_bytes or resolve_gpu(s).hbm_bytes
    assert abs(_kv_from_fraction(s, p, engine, u) - p.memory.kv_budget_bytes) <= 0.001 * hbm


def _pools(p: Plan) -> list[tuple[str, int]]:
    f = p.fleet
    if f.mode == "disaggregated":
        return [("prefill", int(f.prefill_replicas)), ("decode", int(f.decode_replicas))]
    return [("colocated", int(f.replicas))]


@pytest.mark.parametrize("name", ["llama", "disagg"])
def test_vllm_command_is_the_plan(name: str) -> None:
    s, p = golden(name)
    d = deploy(s, "vllm", result=p)
    assert [(c.pool.role, c.pool.replicas) for c in d.commands] == _pools(p)
    for c in d.commands:
        ns = parse_command("vllm", c.argv)
        assert ns.positional == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]
        assert int(ns.tensor_parallel_size) == s.parallel.tp
        assert int(ns.pipeline_parallel_size) == s.parallel.pp
        assert ns.data_parallel_size is None and not ns.enable_expert_parallel
        assert int(ns.max_num_batched_tokens) == s.serving.chunk_tokens
        assert int(ns.max_model_len) == p.memory.context_tokens
        _assert_memory(s, p, "vllm", float(ns.gpu_memory_utilization))
        assert ns.kv_cache_dtype == "fp8" and ns.quantization == "fp8"
        assert ns.speculative_config is None and not ns.enable_prefix_caching
        if c.pool.role == "prefill":
            assert ns.max_num_seqs is None  # a prefill pool is sized by its chunk
        else:
            assert int(ns.max_num_seqs) == p.operating_point.batch_size
        if c.pool.role == "colocated":
            assert ns.kv_transfer_config is None
        else:
            kv = json.loads(ns.kv_transfer_config)
            assert kv == {"kv_connector": "NixlConnector",
                          "kv_role": "kv_producer" if c.pool.role == "prefill" else "kv_consumer"}
        assert c.pool.gpus_per_replica == p.fleet.gpus_per_replica


def test_disaggregated_golden_has_11_prefill_and_3_decode_replicas() -> None:
    s, p = golden("disagg")
    d = deploy(s, "sglang", result=p)
    assert [(c.pool.role, c.pool.replicas, c.pool.tp) for c in d.commands] == [("prefill", 11, 4), ("decode", 3, 4)]


@pytest.mark.parametrize("name", ["llama", "disagg"])
def test_sglang_command_is_the_plan(name: str) -> None:
    s, p = golden(name)
    d = deploy(s, "sglang", result=p)
    assert [(c.pool.role, c.pool.replicas) for c in d.commands] == _pools(p)
    for c in d.commands:
        ns = parse_command("sglang", c.argv)
        assert ns.positional == ["python", "-m", "sglang.launch_server"]
        assert ns.model_path == "meta-llama/Llama-3.1-70B"
        assert int(ns.tp) == s.parallel.tp and ns.ep is None and not ns.enable_dp_attention
        assert int(ns.chunked_prefill_size) == s.serving.chunk_tokens
        assert int(ns.context_length) == p.memory.context_tokens
        _assert_memory(s, p, "sglang", float(ns.mem_fraction_static))
        assert ns.kv_cache_dtype == "fp8_e4m3" and ns.quantization == "fp8"
        if c.pool.role == "prefill":
            assert ns.max_running_requests is None
        else:
            assert int(ns.max_running_requests) == p.operating_point.batch_size
        assert ns.disaggregation_mode == (None if c.pool.role == "colocated" else c.pool.role)


@pytest.mark.parametrize("name", ["llama", "disagg"])
def test_trtllm_config_is_the_plan(name: str) -> None:
    s, p = golden(name)
    with pytest.raises(DeployError, match="pre-quantized checkpoint"):
        deploy(s, "trtllm", result=p)  # TensorRT-LLM does not quantize a 16-bit checkpoint online
    d = deploy(s, "trtllm", result=p, weights=FP8_CHECKPOINT)
    assert [(c.pool.role, c.pool.replicas) for c in d.commands] == _pools(p)
    for c in d.commands:
        ns = parse_command("trtllm", c.argv)
        assert ns.positional == ["trtllm-serve", FP8_CHECKPOINT] and ns.backend == "pytorch"
        assert ns.extra_llm_api_options == c.config_name
        cfg = flatten_keys(c.config)
        assert cfg["tensor_parallel_size"] == s.parallel.tp and cfg["pipeline_parallel_size"] == s.parallel.pp
        assert cfg["enable_attention_dp"] is False and "moe_expert_parallel_size" not in cfg
        assert cfg["max_num_tokens"] == s.serving.chunk_tokens and cfg["max_seq_len"] == p.memory.context_tokens
        assert cfg.get("max_batch_size") == (None if c.pool.role == "prefill" else p.operating_point.batch_size)
        _assert_memory(s, p, "trtllm", cfg["kv_cache_config.free_gpu_memory_fraction"])
        assert cfg["kv_cache_config.dtype"] == "fp8"
        if c.pool.role != "colocated":
            assert cfg["cache_transceiver_config.backend"] == "NIXL"
        # the YAML file carries the same config
        f = next(f for f in d.files if f.name == c.config_name)
        import yaml
        assert yaml.safe_load(f.text) == c.config


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_deepseek_tp8_ep8_dp_attention_mtp(engine: str) -> None:
    s, p = golden("deepseek")
    assert p.fleet.gpus_per_replica == 8  # EP lays the experts over the TP GPUs
    d = deploy(s, engine, result=p, weights="deepseek-ai/DeepSeek-R1" if engine == "trtllm" else None)
    (c,) = d.commands
    dpa = s.parallel.dp_attention
    assert dpa
    assert s.speculative.method == "mtp"
    method = "mtp"
    batch = p.operating_point.batch_size
    if engine == "trtllm":
        cfg = flatten_keys(c.config)
        assert cfg["tensor_parallel_size"] == 8 and cfg["moe_expert_parallel_size"] == 8
        assert cfg["enable_attention_dp"] is dpa and cfg["max_batch_size"] == batch
        if method == "mtp":
            assert cfg["speculative_config.decoding_type"] == "MTP"
            assert cfg["speculative_config.num_nextn_predict_layers"] == s.speculative.draft_tokens
        else:
            assert cfg["speculative_config.decoding_type"] == "Eagle"
            assert cfg["speculative_config.max_draft_len"] == s.speculative.draft_tokens
        return
    ns = parse_command(engine, c.argv)
    if engine == "vllm":
        assert ns.enable_expert_parallel
        if dpa:
            assert int(ns.tensor_parallel_size) == 1 and int(ns.data_parallel_size) == 8
            assert int(ns.max_num_seqs) == -(-batch // 8)  # per data-parallel rank
        else:
            assert int(ns.tensor_parallel_size) == 8 and int(ns.max_num_seqs) == batch
        spec = json.loads(ns.speculative_config)
        assert spec["method"] == method and spec["num_speculative_tokens"] == s.speculative.draft_tokens
    else:
        assert int(ns.tp) == 8 and int(ns.ep) == 8 and ns.enable_dp_attention is dpa
        assert (int(ns.dp) if ns.dp else None) == (8 if dpa else None)
        assert int(ns.max_running_requests) == batch
        assert ns.speculative_algorithm == ("NEXTN" if method == "mtp" else "EAGLE")
        assert int(ns.speculative_num_steps) == s.speculative.draft_tokens


def test_speculative_method_per_engine() -> None:
    """MTP on a model without MTP layers is refused; an EAGLE head (the default drafter) is named by a
    placeholder the header explains, never left out."""
    from planner.spec.scenario import scenario_from_dict
    base = {"model": "llama-3.1-70b", "gpu": "h200-sxm", "parallel": {"tp": 2}}
    from dataclasses import replace

    from planner.deploy import SpecDecode, engine_commands
    from planner.errors import ScenarioError
    with pytest.raises(ScenarioError, match="mtp"):  # the scenario already refuses it...
        scenario_from_dict({**base, "speculative": {"draft_tokens": 2, "method": "mtp"}})
    inputs = deploy(scenario_from_dict(base), "vllm").inputs  # ...and so does the deploy, given such inputs
    with pytest.raises(DeployError, match="MTP layers"):
        engine_commands(replace(inputs, spec=SpecDecode("mtp", 2, "")), "sglang")
    s = scenario_from_dict({**base, "speculative": {"draft_tokens": 3}})
    d = deploy(s, "vllm")
    spec = json.loads(parse_command("vllm", d.commands[0].argv).speculative_config)
    assert spec == {"method": "eagle", "num_speculative_tokens": 3, "model": "EAGLE_HEAD"}
    assert "set EAGLE_HEAD to the EAGLE head trained for meta-llama/Llama-3.1-70B" in d.files[0].text
    ns = parse_command("sglang", deploy(s, "sglang").commands[0].argv)
    assert (ns.speculative_algorithm, ns.speculative_num_steps, ns.speculative_num_draft_tokens) == ("EAGLE", "3", "4")


def test_vllm_refuses_an_ep_it_cannot_lay_out() -> None:
    from planner.deploy.engines import engine_commands
    from planner.deploy.layout import Pool
    s, p = golden("llama")
    d = deploy(s, "vllm", result=p)
    bad = Pool(role="colocated", replicas=1, tp=8, pp=1, ep=4, dp_attention=False, redundant_experts=0,
               gpus_per_replica=8, gpu="h200-sxm", batch=8,
               chunk_tokens=2048, context_tokens=4096)
    inputs = d.inputs.__class__(**{**d.inputs.__dict__, "pools": (bad,)})
    with pytest.raises(DeployError, match="not expressible"):
        engine_commands(inputs, "vllm")


def test_an_infeasible_plan_is_not_deployed() -> None:
    from planner.spec.scenario import scenario_from_dict
    s = scenario_from_dict({"model": "llama-3.1-70b", "gpu": "h200-sxm", "parallel": {"tp": 2},
                            "slo": {"itl_s": 0.001}})
    with pytest.raises(DeployError, match="no operating point"):
        deploy(s, "vllm")


def test_redundant_experts_are_emitted_or_refused() -> None:
    from planner.spec.scenario import scenario_from_dict
    data = deepseek_dict()
    data["parallel"] = {**data["parallel"], "redundant_experts": 32}
    s = scenario_from_dict(data)
    ns = parse_command("vllm", deploy(s, "vllm").commands[0].argv)
    assert ns.enable_eplb and json.loads(ns.eplb_config) == {"num_redundant_experts": 32}
    ns = parse_command("sglang", deploy(s, "sglang").commands[0].argv)
    assert ns.enable_eplb and ns.ep_num_redundant_experts == "32"
    with pytest.raises(DeployError, match="redundant_experts=32"):
        deploy(s, "trtllm", weights="deepseek-ai/DeepSeek-R1")


def test_pools_with_their_own_gpu_and_layout() -> None:
    """Per-pool layouts (prefill.gpu/parallel, decode.parallel): each pool's command carries its own TP and
    replicas; the prefill pool's memory fraction is the stated engine's own knob, and another engine,
    whose fraction the plan cannot solve for a pool it has no memory section of, is refused in one line."""
    from planner.spec.scenario import scenario_from_dict
    data = {**LLAMA_DISAGG, "prefill": {"gpu": "h100-sxm", "parallel": {"tp": 2}}, "decode": {"parallel": {"tp": 4}}}
    s = scenario_from_dict(data)
    p = plan(s)
    assert p.pools is not None
    d = deploy(s, "vllm", result=p)
    for c in d.commands:
        pr = p.pools.prefill if c.pool.role == "prefill" else p.pools.decode
        ns = parse_command("vllm", c.argv)
        assert int(ns.tensor_parallel_size) == pr.tp and c.pool.replicas == int(pr.replicas)
        assert c.pool.gpu == pr.gpu and c.pool.gpus_per_replica == pr.gpus_per_replica
        assert float(ns.gpu_memory_utilization) == s.serving.memory_utilization
    assert f"prefill {int(p.pools.prefill.replicas)} × h100-sxm (TP 2" in d.files[0].text
    with pytest.raises(DeployError, match="prefill pool"):
        deploy(s, "sglang", result=p)
