"""Validation of what the Kubernetes targets emit: core objects through the
``kubernetes`` client's models, custom resources (and the llm-d chart's values)
against the schemas recorded in ``planner/deploy/schemas/`` with their sources.

A failure is a bug in planner.deploy, reported as a DeployError naming the object
and the field, never a manifest that the cluster would reject or silently prune.
"""

from __future__ import annotations

import inspect
import json
from functools import cache
from pathlib import Path
from typing import Any

from planner.deploy.layout import DeployError

__all__ = ["CHART_CONTAINER_KEYS", "SCHEMA_DIR", "SCHEMAS", "check_core", "check_custom", "schema_source"]

# Keys llm-d-modelservice adds to a container entry (its templates read them; they are not core/v1 fields).
CHART_CONTAINER_KEYS = ("modelCommand", "mountModelVolume")
SCHEMA_DIR = Path(__file__).with_name("schemas")
SCHEMAS = {
    ("serving.kserve.io/v1beta1", "InferenceService"): "kserve_inferenceservice.json",
    ("nvidia.com/v1alpha1", "DynamoGraphDeployment"): "dynamo_graphdeployment.json",
    ("nvidia.com/v1alpha1", "DynamoGraphDeploymentScalingAdapter"): "dynamo_scalingadapter.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "keda_scaledobject.json",
    ("helm", "llm-d-modelservice"): "llmd_modelservice_values.json",
}


@cache
def _schema(file: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMA_DIR / file).read_text())
    return data


def schema_source(api_version: str, kind: str) -> dict[str, str]:
    """The recorded source (repo, path, commit, url, note) of a custom resource's schema."""
    source: dict[str, str] = _schema(SCHEMAS[(api_version, kind)])["x-source"]
    return source


def check_custom(obj: dict[str, Any], *, api_version: str | None = None, kind: str | None = None) -> None:
    """Validate a custom resource (or ``api_version="helm"``: a chart's values) against its recorded schema."""
    import jsonschema

    key = (api_version or str(obj.get("apiVersion")), kind or str(obj.get("kind")))
    if key not in SCHEMAS:
        raise DeployError(f"no recorded schema for {key[0]} {key[1]}")
    schema = {k: v for k, v in _schema(SCHEMAS[key]).items() if k != "x-source"}
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.absolute_path) or "(top)"
        raise DeployError(f"{key[1]}: {where}: {e.message} (schema {SCHEMAS[key]})")
    _check_embedded(obj)


def _check_embedded(obj: dict[str, Any]) -> None:
    """Core objects inside custom resources: containers and object metadata."""
    if isinstance(obj.get("metadata"), dict):
        check_core(obj["metadata"], "V1ObjectMeta")
    for container in _containers(obj):
        check_core({k: v for k, v in container.items() if k not in CHART_CONTAINER_KEYS}, "V1Container")


def _containers(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "containers" and isinstance(v, list):
                out += [c for c in v if isinstance(c, dict)]
            elif k == "mainContainer" and isinstance(v, dict):
                out.append(v)
            else:
                out += _containers(v)
    elif isinstance(node, list):
        for v in node:
            out += _containers(v)
    return out


class _Response:
    def __init__(self, data: str) -> None:
        self.data = data


def check_core(obj: dict[str, Any], model: str) -> None:
    """Validate a core object (``V1Container``, ``V1ConfigMap``, ``V1ObjectMeta`` ...) with the kubernetes
    client's model: it deserializes (required fields, enum values) and serializes back to the same dict
    (an unknown field or a wrongly nested one would be dropped, so it fails here)."""
    from kubernetes.client import ApiClient

    client: Any = ApiClient()  # its signature changed across releases (a response object, then text)
    text = json.dumps(obj)
    try:
        if "response_text" in inspect.signature(client.deserialize).parameters:  # client 35+
            parsed = client.deserialize(text, model, "application/json")
        else:  # earlier clients take a response object with .data
            parsed = client.deserialize(_Response(text), model)
    except (ValueError, TypeError) as exc:
        raise DeployError(f"{model}: {' '.join(str(exc).split())}") from None
    back = client.sanitize_for_serialization(parsed)
    if back != obj:
        lost = sorted(set(_paths(obj)) - set(_paths(back)))
        raise DeployError(f"{model}: fields the Kubernetes API does not know: {', '.join(lost) or '(values differ)'}")


def _paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        out = []
        for k, v in node.items():
            out += _paths(v, f"{prefix}.{k}" if prefix else str(k)) or [f"{prefix}.{k}" if prefix else str(k)]
        return out
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _paths(v, f"{prefix}[{i}]")] or [prefix]
    return [f"{prefix}={node!r}"]
