"""From plan to deployment (issue 27): engine commands (vLLM, SGLang, TensorRT-LLM)
and Kubernetes manifests (KServe, llm-d, Dynamo) that run the planned fleet, every
flag held to a table of its sources, every object validated against its schema."""

from planner.deploy.autoscaler import QUEUE_METRICS, QUEUE_THRESHOLD, PoolScale, pool_scales, scaled_object
from planner.deploy.engines import (
    ENGINES,
    PREQUANTIZED_DTYPES,
    EngineCommand,
    engine_commands,
    flatten_keys,
    nested_value,
)
from planner.deploy.flags import ENGINE_FLAGS, FLAG_SOURCES, FlagSpec, SourceFile, flag, flags_of
from planner.deploy.kube import ENGINE_IMAGES, ENGINE_PORTS, kube_deployment, resource_name
from planner.deploy.layout import (
    MEMORY_FRACTION_DIGITS,
    DeployError,
    DeployInputs,
    Pool,
    SpecDecode,
    deploy_inputs,
    header_lines,
    memory_fraction,
    model_reference,
    pool_gpu,
)
from planner.deploy.render import (
    KUBE_TARGETS,
    TARGETS,
    DeployFile,
    Deployment,
    deploy,
    deployment_text,
    write_deployment,
)
from planner.deploy.validate import CHART_CONTAINER_KEYS, SCHEMA_DIR, SCHEMAS, check_core, check_custom, schema_source

__all__ = [
    "CHART_CONTAINER_KEYS", "ENGINE_IMAGES", "ENGINE_PORTS", "PoolScale", "QUEUE_METRICS", "QUEUE_THRESHOLD", "SCHEMAS", "SCHEMA_DIR",
    "check_core", "check_custom", "pool_scales", "resource_name", "scaled_object", "schema_source",
    "DeployError", "DeployFile", "DeployInputs", "Deployment", "ENGINES", "ENGINE_FLAGS", "EngineCommand",
    "FLAG_SOURCES", "FlagSpec", "KUBE_TARGETS", "MEMORY_FRACTION_DIGITS", "PREQUANTIZED_DTYPES", "Pool",
    "SourceFile", "SpecDecode", "TARGETS", "deploy", "deploy_inputs", "deployment_text", "engine_commands",
    "flag", "flags_of", "flatten_keys", "header_lines", "kube_deployment", "memory_fraction", "model_reference", "nested_value", "pool_gpu",
    "write_deployment",
]
