"""Properties of the engine commands over random plans: whatever the layout, chunk, memory budget
and the engine the plan's memory fraction was stated for, the vLLM and SGLang commands parse back
(with the table's names) to the plan's TP, batch and chunk, and the memory fraction they carry gives
the engine the KV budget per GPU the plan sized."""

from __future__ import annotations

from deploy_support import parse_command
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner import plan
from planner.deploy import DeployError, deploy
from planner.physics.memory import kv_budget_bytes
from planner.spec.scenario import resolve_gpu, scenario_from_dict

FRACTION = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static"}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b"]), gpu=st.sampled_from(["h100-sxm", "h200-sxm"]),
       tp=st.sampled_from([1, 2, 4, 8]), chunk=st.sampled_from([512, 2048, 8192]),
       util=st.floats(0.80, 0.95), stated=st.sampled_from(["vllm", "sglang", "trtllm"]),
       kv=st.sampled_from(["bf16", "fp8"]), target=st.sampled_from(["vllm", "sglang"]))
def test_commands_carry_the_plan(model: str, gpu: str, tp: int, chunk: int, util: float, stated: str, kv: str,
                                 target: str) -> None:
    s = scenario_from_dict({"model": model, "gpu": gpu, "weights_dtype": "fp8", "kv_dtype": kv,
                            "parallel": {"tp": tp}, "serving": {"chunk_tokens": chunk, "memory_utilization": util,
                                                                "engine": stated}})
    p = plan(s)
    assume(p.operating_point.feasible)
    try:
        d = deploy(s, target, result=p)
    except DeployError as exc:  # only when the target engine cannot hold the planned KV budget
        assert "memory fraction would be" in str(exc)
        return
    (c,) = d.commands
    ns = parse_command(target, c.argv)
    assert int(ns.tensor_parallel_size if target == "vllm" else ns.tp) == tp
    assert int(ns.max_num_batched_tokens if target == "vllm" else ns.chunked_prefill_size) == chunk
    assert int(ns.max_num_seqs if target == "vllm" else ns.max_running_requests) == p.operating_point.batch_size
    u = float(getattr(ns, FRACTION[target]))
    assert 0 < u <= 1
    if target == stated:
        assert u == util
    g, m = resolve_gpu(s), p.memory
    kv_bytes = kv_budget_bytes(gpu=g, weight_bytes_per_gpu=m.weight_bytes_per_gpu + m.draft_weight_bytes_per_gpu,
                               memory_utilization=u, activation_bytes=m.activation_bytes, engine=target)
    assert abs(float(kv_bytes) - m.kv_budget_bytes) <= 0.001 * (g.cuda_visible_hbm_bytes or g.hbm_bytes)
