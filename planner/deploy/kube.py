"""Kubernetes targets: a KServe ``InferenceService``, llm-d ``llm-d-modelservice``
Helm values, or a Dynamo ``DynamoGraphDeployment``; GPUs as ``nvidia.com/gpu``
(Dynamo: its ``resources.limits.gpu``), one replica count per pool, and from
``fleet.policy`` a KEDA ScaledObject per pool (``planner.deploy.autoscaler``).
Every object is validated (``planner.deploy.validate``) before it is written."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import yaml

from planner.deploy.autoscaler import PoolScale, pool_scales, scaled_object
from planner.deploy.engines import EngineCommand, engine_commands
from planner.deploy.flags import flag, flags_of
from planner.deploy.layout import DeployError, DeployInputs, header_lines
from planner.deploy.validate import check_core, check_custom

if TYPE_CHECKING:
    from planner.deploy.render import Deployment

__all__ = ["ENGINE_IMAGES", "ENGINE_PORTS", "kube_deployment", "resource_name"]

# Images: pin the tag to the engine version the flag table was checked against (planner.deploy.flags).
ENGINE_IMAGES = {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest",
                 "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:latest"}
ENGINE_PORTS = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}  # each engine's default port
DYNAMO_IMAGES = {"vllm": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:latest",
                 "sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime:latest"}
GPU = "nvidia.com/gpu"
CONFIG_DIR = "/etc/ridgeline"


def resource_name(text: str) -> str:
    """A DNS-1123 name from the scenario's name (``llama-70b-fp8``), at most 40 characters."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return name or "ridgeline"


def _gpus(n: int) -> dict[str, Any]:
    return {"limits": {GPU: str(n)}, "requests": {GPU: str(n)}}


def _container(cmd: EngineCommand, image: str, *, name: str = "engine") -> dict[str, Any]:
    argv = list(cmd.argv)
    if cmd.config_name:  # TensorRT-LLM: the YAML comes from the ConfigMap mounted at CONFIG_DIR
        argv[argv.index(cmd.config_name)] = f"{CONFIG_DIR}/{cmd.config_name}"
    c: dict[str, Any] = {"name": name, "image": image, "command": argv,
                         "ports": [{"name": "http", "containerPort": ENGINE_PORTS[cmd.engine]}],
                         "resources": _gpus(cmd.pool.gpus_per_replica)}
    if cmd.config_name:
        c["volumeMounts"] = [{"name": "engine-config", "mountPath": CONFIG_DIR, "readOnly": True}]
    return c


def _config_map(name: str, cmds: tuple[EngineCommand, ...]) -> dict[str, Any]:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
          "data": {c.config_name: yaml.safe_dump(c.config, sort_keys=False) for c in cmds}}
    check_core(cm, "V1ConfigMap")
    return cm


def _scalers(inputs: DeployInputs, engine: str, targets: dict[str, tuple[str, dict[str, str], str]]
             ) -> list[dict[str, Any]]:
    """One ScaledObject per pool (none under fleet.policy static): targets[role] = (name, scaleTargetRef,
    the Prometheus label filter of that pool's pods)."""
    scales = pool_scales(inputs)
    out = []
    for role, (name, ref, where) in targets.items():
        sc = scales[role]
        if sc.policy == "static":
            continue
        obj = scaled_object(name, ref, sc, engine, where, inputs.model_ref)
        check_custom(obj)
        out.append(obj)
    return out


def _kserve(inputs: DeployInputs, weights: str | None) -> tuple[list[dict[str, Any]], tuple[EngineCommand, ...]]:
    if inputs.disaggregated:
        pre, dec = inputs.pool("prefill"), inputs.pool("decode")
        raise DeployError(f"kserve: an InferenceService serves one pool; the plan is disaggregated (prefill "
                          f"{pre.replicas} + decode {dec.replicas} replicas): use --target llm-d or dynamo")
    engine = inputs.scenario.serving.engine
    cmds = engine_commands(inputs, engine, weights=weights)
    (cmd,) = cmds
    name = resource_name(inputs.scenario.name)
    sc = pool_scales(inputs)["colocated"]
    predictor: dict[str, Any] = {"minReplicas": sc.min_replicas if sc.policy != "static" else cmd.pool.replicas,
                                 "maxReplicas": sc.max_replicas if sc.policy != "static" else cmd.pool.replicas,
                                 "containers": [_container(cmd, ENGINE_IMAGES[engine])]}
    objects: list[dict[str, Any]] = []
    if cmd.config_name:
        cm = f"{name}-engine-config"
        objects.append(_config_map(cm, cmds))
        predictor["volumes"] = [{"name": "engine-config", "configMap": {"name": cm}}]
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "annotations": {
                "serving.kserve.io/deploymentMode": "RawDeployment",
                "serving.kserve.io/autoscalerClass": "none" if sc.policy == "static" else "external"}},
            "spec": {"predictor": predictor}}
    check_custom(isvc)
    objects.append(isvc)
    # KServe's raw deployment of the predictor is the Deployment <name>-predictor
    objects += _scalers(inputs, engine, {"colocated": (f"{name}-predictor", {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": f"{name}-predictor"}, f',pod=~"{name}-predictor-.*"')})
    return objects, cmds


def _llmd(inputs: DeployInputs, weights: str | None) -> tuple[list[dict[str, Any]], tuple[EngineCommand, ...]]:
    cmds = engine_commands(inputs, "vllm", weights=weights)  # llm-d serves vLLM
    name = resource_name(inputs.scenario.name)
    model = weights or inputs.model_ref
    values: dict[str, Any] = {
        "fullnameOverride": name, "multinode": False,
        "modelArtifacts": {"name": model, "uri": f"hf://{model}", "size": "200Gi"},
        "accelerator": {"type": "nvidia"},
        "routing": {"servicePort": 8000, "proxy": {"enabled": inputs.disaggregated, "connector": "nixlv2"}},
        "prefill": {"create": False, "replicas": 0}, "decode": {"create": False, "replicas": 0},
    }
    for c in cmds:
        p = c.pool
        if p.gpus_per_replica != p.tp or p.dp_attention:
            raise DeployError(f"llm-d: the chart sizes a pod's GPUs from parallelism.tensor; a {p.role} replica of "
                              f"{p.gpus_per_replica} GPUs (TP {p.tp} · PP {p.pp}"
                              f"{' · DP attention' if p.dp_attention else ''}) is not expressible: use dynamo")
        slot = "prefill" if p.role == "prefill" else "decode"
        values[slot] = {"create": True, "replicas": p.replicas, "parallelism": {"tensor": p.tp, "data": 1},
                        "containers": [{"name": "vllm", "image": "ghcr.io/llm-d/llm-d:latest",
                                        "modelCommand": "vllmServe", "args": list(c.argv[3:]),
                                        "resources": _gpus(p.gpus_per_replica)}]}
    check_custom(values, api_version="helm", kind="llm-d-modelservice")
    objects: list[dict[str, Any]] = [values]
    objects += _scalers(inputs, "vllm", {
        c.pool.role: (f"{name}-{'prefill' if c.pool.role == 'prefill' else 'decode'}",
                      {"apiVersion": "apps/v1", "kind": "Deployment",
                       "name": f"{name}-{'prefill' if c.pool.role == 'prefill' else 'decode'}"},
                      f',pod=~"{name}-{"prefill" if c.pool.role == "prefill" else "decode"}-.*"') for c in cmds})
    return objects, cmds


def _dynamo_service(c: EngineCommand, engine: str) -> dict[str, Any]:
    p = c.pool
    if engine == "vllm":
        args = [flag("vllm", "--model"), c.argv[2], *c.argv[3:]]
        if p.role != "colocated":
            args += [flag("dynamo", "--disaggregation-mode"), p.role]
    else:
        args = list(c.argv[3:])  # sglang's own flags, --disaggregation-mode included
    svc: dict[str, Any] = {"componentType": "worker", "replicas": p.replicas,
                           "resources": {"limits": {"gpu": str(p.gpus_per_replica)}},
                           "extraPodSpec": {"mainContainer": {"name": "main", "image": DYNAMO_IMAGES[engine],
                                                              "command": ["python3", "-m", f"dynamo.{engine}"],
                                                              "args": args}}}
    if p.role != "colocated":
        svc["subComponentType"] = p.role
    return svc


def _dynamo(inputs: DeployInputs, weights: str | None) -> tuple[list[dict[str, Any]], tuple[EngineCommand, ...]]:
    engine = inputs.scenario.serving.engine
    if engine not in DYNAMO_IMAGES:
        raise DeployError(f"dynamo: the {engine} worker reads its engine YAML through --extra-engine-args, which "
                          "this target does not emit; re-plan with serving.engine=vllm or sglang")
    cmds = engine_commands(inputs, engine, weights=weights)
    name = resource_name(inputs.scenario.name)
    label = "Vllm" if engine == "vllm" else "Sglang"
    services: dict[str, Any] = {"Frontend": {"componentType": "frontend", "replicas": 1, "extraPodSpec": {
        "mainContainer": {"name": "main", "image": DYNAMO_IMAGES[engine], "command": ["python3", "-m", "dynamo.frontend"]}}}}
    keys: dict[str, str] = {}
    for c in cmds:
        key = f"{label}{'' if c.pool.role == 'colocated' else c.pool.role.title()}Worker"
        keys[c.pool.role] = key
        services[key] = _dynamo_service(c, engine)
    dgd = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": name},
           "spec": {"backendFramework": engine, "services": services}}
    check_custom(dgd)
    objects: list[dict[str, Any]] = [dgd]
    scales = pool_scales(inputs)
    targets: dict[str, tuple[str, dict[str, str], str]] = {}
    for role, key in keys.items():
        sc: PoolScale = scales[role]
        if sc.policy == "static":
            continue
        adapter_name = f"{name}-{key.lower()}"
        adapter = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeploymentScalingAdapter",
                   "metadata": {"name": adapter_name},
                   "spec": {"dgdRef": {"name": name, "service": key}, "replicas": sc.replicas,
                            "scalingPolicy": {"minReplicas": sc.min_replicas, "maxReplicas": sc.max_replicas}}}
        check_custom(adapter)
        objects.append(adapter)
        targets[role] = (adapter_name, {"apiVersion": "nvidia.com/v1alpha1",
                                        "kind": "DynamoGraphDeploymentScalingAdapter", "name": adapter_name},
                         f',pod=~"{name}-{key.lower()}-.*"')
    objects += _scalers(inputs, engine, targets)
    return objects, cmds


_BUILDERS = {"kserve": _kserve, "llm-d": _llmd, "dynamo": _dynamo}
_FILES = {"kserve": "kserve.yaml", "llm-d": "llm-d-values.yaml", "dynamo": "dynamo.yaml"}


def kube_deployment(target: str, inputs: DeployInputs, *, weights: str | None = None) -> Deployment:
    """The manifests of ``target``: the main file (objects, or llm-d's Helm values) and, under an elastic
    fleet.policy, the KEDA ScaledObjects in ``autoscaler.yaml``."""
    from planner.deploy.render import DeployFile, Deployment

    objects, cmds = _BUILDERS[target](inputs, weights)
    head = header_lines(inputs, target)
    scales = pool_scales(inputs)
    head += [f"{r}: {s.replicas} replicas planned; {s.policy}: min {s.min_replicas}, max {s.max_replicas}"
             for r, s in scales.items()]
    if len({c.pool.gpu for c in cmds}) > 1:
        head += [f"schedule the {c.pool.role} pool on {c.pool.gpu} nodes (add your cluster's node selector)"
                 for c in cmds]
    engine = cmds[0].engine
    head.append(f"images: pin each tag to the version the flags were checked against "
                f"({flags_of(engine)[0].checked_version})")
    main = [o for o in objects if o.get("kind") != "ScaledObject"]
    scalers = [o for o in objects if o.get("kind") == "ScaledObject"]
    note = ["Helm values for llm-d-modelservice: helm install NAME llm-d-modelservice/llm-d-modelservice -f THIS"
            ] if target == "llm-d" else []

    def text(objs: list[dict[str, Any]], extra: list[str]) -> str:
        body = yaml.safe_dump_all(objs, sort_keys=False) if len(objs) > 1 else yaml.safe_dump(objs[0], sort_keys=False)
        return "".join(f"# {line}\n" for line in head + extra) + body

    files = [DeployFile(_FILES[target], text(main, note), "yaml")]
    if scalers:
        files.append(DeployFile("autoscaler.yaml", text(scalers, [
            f"KEDA ScaledObjects for fleet.policy {inputs.scenario.fleet.policy} (the simulated day's min and max)"]),
            "yaml"))
    return Deployment(target, inputs, cmds, tuple(files), tuple(objects))
