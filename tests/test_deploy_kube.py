"""Issue 27: the Kubernetes targets of the golden plans, field by field against the plan; every
object validated (core objects by the kubernetes client's models, custom resources by the schemas
recorded from their projects), and the autoscaler's min/max from the simulated day."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from deploy_support import LLAMA_DISAGG, LLAMA_FP8_TP2, engine_parser, golden

from planner.deploy import SCHEMAS, DeployError, check_core, check_custom, deploy, flags_of, schema_source
from planner.sizing.autoscale import autoscale
from planner.spec.scenario import scenario_from_dict

PROFILE = [{"t_s": 0, "requests_per_s": 10}, {"t_s": 43200, "requests_per_s": 40}]


def _vllm_args(args: list[str]) -> Any:
    """Parse a worker's vLLM arguments (no `vllm serve`), Dynamo's own flag included."""
    parser = engine_parser("vllm")
    for f in flags_of("dynamo"):
        parser.add_argument(f.name)
    return parser.parse_args(args)


def _gpu(container: dict[str, Any]) -> int:
    r = container["resources"]
    assert r["limits"]["nvidia.com/gpu"] == r["requests"]["nvidia.com/gpu"]
    return int(r["limits"]["nvidia.com/gpu"])


def test_kserve_colocated_llama() -> None:
    s, p = golden("llama")
    d = deploy(s, "kserve", result=p)
    (isvc,) = d.objects
    pred = isvc["spec"]["predictor"]
    assert pred["minReplicas"] == pred["maxReplicas"] == int(p.fleet.replicas) == 4  # static policy
    assert isvc["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "none"
    (c,) = pred["containers"]
    assert _gpu(c) == p.fleet.gpus_per_replica == 2
    ns = engine_parser("vllm").parse_args(c["command"])
    assert ns.positional == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]
    assert int(ns.tensor_parallel_size) == 2 and int(ns.max_num_seqs) == p.operating_point.batch_size
    assert int(ns.max_num_batched_tokens) == s.serving.chunk_tokens
    assert [f.name for f in d.files] == ["kserve.yaml"]  # static: no autoscaler
    assert yaml.safe_load(d.files[0].text) == isvc
    assert d.files[0].text.startswith("# Ridgeline deployment for target kserve\n# scenario: llama-70b-fp8-tp2 · "
                                      "revision: unsaved\n")


def test_kserve_refuses_a_disaggregated_plan_in_one_line() -> None:
    s, p = golden("disagg")
    with pytest.raises(DeployError) as exc:
        deploy(s, "kserve", result=p)
    assert "prefill 11 + decode 3" in str(exc.value) and "\n" not in str(exc.value)


def test_llmd_disaggregated_pools() -> None:
    s, p = golden("disagg")
    d = deploy(s, "llm-d", result=p)
    (values,) = d.objects
    for role, n in (("prefill", 11), ("decode", 3)):
        pool = values[role]
        assert pool["create"] is True and pool["replicas"] == n
        assert pool["parallelism"] == {"tensor": s.parallel.tp, "data": 1}
        (c,) = pool["containers"]
        assert c["modelCommand"] == "vllmServe" and _gpu(c) == s.parallel.tp
        ns = _vllm_args(c["args"])
        assert int(ns.tensor_parallel_size) == s.parallel.tp
        assert json.loads(ns.kv_transfer_config)["kv_role"] == ("kv_producer" if role == "prefill" else "kv_consumer")
        assert (int(ns.max_num_seqs) if ns.max_num_seqs else None) == (
            None if role == "prefill" else p.operating_point.batch_size)
    assert values["routing"]["proxy"]["enabled"] is True
    assert values["modelArtifacts"]["uri"] == "hf://meta-llama/Llama-3.1-70B"


def test_dynamo_disaggregated_graph() -> None:
    s, p = golden("disagg")
    d = deploy(s, "dynamo", result=p)
    (dgd,) = d.objects
    svcs = dgd["spec"]["services"]
    assert dgd["spec"]["backendFramework"] == "vllm"
    assert set(svcs) == {"Frontend", "VllmPrefillWorker", "VllmDecodeWorker"}
    for key, role, n in (("VllmPrefillWorker", "prefill", 11), ("VllmDecodeWorker", "decode", 3)):
        svc = svcs[key]
        assert svc["replicas"] == n and svc["subComponentType"] == role
        assert svc["resources"]["limits"]["gpu"] == str(p.fleet.gpus_per_replica)
        ns = _vllm_args(svc["extraPodSpec"]["mainContainer"]["args"])
        assert ns.model == "meta-llama/Llama-3.1-70B" and ns.disaggregation_mode == role
        assert int(ns.tensor_parallel_size) == 4 and int(ns.max_num_batched_tokens) == s.serving.chunk_tokens


@pytest.mark.parametrize("target", ["kserve", "llm-d", "dynamo"])
def test_deepseek_on_kubernetes(target: str) -> None:
    s, p = golden("deepseek")
    if target == "llm-d":  # DP attention: the chart sizes a pod's GPUs from parallelism.tensor
        with pytest.raises(DeployError, match="not expressible"):
            deploy(s, target, result=p)
        return
    d = deploy(s, target, result=p)
    text = yaml.safe_dump_all(d.objects)
    assert "--enable-expert-parallel" in text and '"method":"mtp"' in text
    assert "--data-parallel-size" in text  # DP attention, as vLLM runs it


@pytest.mark.parametrize("policy", ["reactive", "predictive"])
@pytest.mark.parametrize("target", ["kserve", "llm-d", "dynamo"])
def test_autoscaler_min_max_from_the_simulated_day(policy: str, target: str) -> None:
    base = LLAMA_FP8_TP2 if target == "kserve" else LLAMA_DISAGG
    data = copy.deepcopy(base)
    data["workload"] = {**data.get("workload", {}), "profile": PROFILE}
    data["fleet"] = {"policy": policy}
    s = scenario_from_dict(data)
    d = deploy(s, target)
    day = autoscale(s, policy)
    scalers = [o for o in d.objects if o.get("kind") == "ScaledObject"]
    roles = ["colocated"] if target == "kserve" else ["prefill", "decode"]
    assert len(scalers) == len(roles)
    for role, so in zip(roles, scalers, strict=True):
        counts = [getattr(st, "replicas" if role == "colocated" else f"{role}_replicas") for st in day.steps]
        assert so["spec"]["minReplicaCount"] == min(counts) and so["spec"]["maxReplicaCount"] == max(counts)
        assert min(counts) < max(counts)  # the profile's day does vary
        assert so["spec"]["cooldownPeriod"] == int(s.fleet.scale_down_delay_s)
        trig = so["spec"]["triggers"]
        if policy == "reactive":
            (t,) = trig
            assert t["type"] == "prometheus" and "vllm:num_requests_waiting" in t["metadata"]["query"]
        else:
            assert {t["type"] for t in trig} == {"cron"}
            assert max(int(t["metadata"]["desiredReplicas"]) for t in trig) == max(counts)
        check_custom(so)
    assert "autoscaler.yaml" in [f.name for f in d.files]
    if target == "dynamo":
        adapters = [o for o in d.objects if o.get("kind") == "DynamoGraphDeploymentScalingAdapter"]
        refs = {a["spec"]["dgdRef"]["service"] for a in adapters}
        assert refs == {"VllmPrefillWorker", "VllmDecodeWorker"}
        assert {so["spec"]["scaleTargetRef"]["name"] for so in scalers} == {a["metadata"]["name"] for a in adapters}


def test_sglang_queue_metric_for_a_sglang_plan() -> None:
    data = {**copy.deepcopy(LLAMA_FP8_TP2), "serving": {"engine": "sglang"}, "fleet": {"policy": "reactive"},
            "workload": {"profile": PROFILE}}
    d = deploy(scenario_from_dict(data), "kserve")
    (so,) = [o for o in d.objects if o.get("kind") == "ScaledObject"]
    assert "sglang:num_queue_reqs" in so["spec"]["triggers"][0]["metadata"]["query"]
    c = d.objects[0]["spec"]["predictor"]["containers"][0]
    assert c["command"][:3] == ["python", "-m", "sglang.launch_server"]
    assert c["ports"][0]["containerPort"] == 30000


def test_trtllm_config_travels_in_a_config_map() -> None:
    data = {**copy.deepcopy(LLAMA_FP8_TP2), "serving": {"engine": "trtllm"}}
    d = deploy(scenario_from_dict(data), "kserve", weights="nvidia/Llama-3.1-70B-Instruct-FP8")
    cm, isvc = d.objects
    assert cm["kind"] == "ConfigMap" and list(cm["data"]) == ["trtllm-colocated.yaml"]
    cfg = yaml.safe_load(cm["data"]["trtllm-colocated.yaml"])
    assert cfg["tensor_parallel_size"] == 2
    c = isvc["spec"]["predictor"]["containers"][0]
    assert "/etc/ridgeline/trtllm-colocated.yaml" in c["command"]
    assert isvc["spec"]["predictor"]["volumes"][0]["configMap"]["name"] == cm["metadata"]["name"]


def test_validation_catches_what_a_cluster_would_reject_or_prune() -> None:
    s, p = golden("llama")
    isvc = deploy(s, "kserve", result=p).objects[0]
    check_custom(isvc)
    bad = copy.deepcopy(isvc)
    bad["spec"]["predictor"]["replicas"] = 3  # not an InferenceService field
    with pytest.raises(DeployError, match="replicas"):
        check_custom(bad)
    bad = copy.deepcopy(isvc)
    bad["spec"]["predictor"]["containers"][0]["gpu"] = 2  # not a core/v1 Container field
    with pytest.raises(DeployError, match="gpu"):
        check_custom(bad)
    with pytest.raises(DeployError, match="V1Container"):
        check_core({"name": "x", "ports": [{"containerPort": "http"}]}, "V1Container")
    dgd = deploy(*golden("disagg")[:1], "dynamo", result=golden("disagg")[1]).objects[0]
    bad = copy.deepcopy(dgd)
    bad["spec"]["services"]["VllmDecodeWorker"]["autoscaling"] = {"enabled": True}  # deprecated, ignored
    with pytest.raises(DeployError, match="autoscaling"):
        check_custom(bad)


def test_every_schema_records_its_source() -> None:
    for (api, kind), file in SCHEMAS.items():
        src = schema_source(api, kind)
        assert len(src["commit"]) == 40 and src["url"].startswith("https://github.com/" + src["repo"])
        assert src["commit"] in src["url"] and src["path"] in src["url"] and src["note"], file
