"""Kubernetes targets (KServe, llm-d, Dynamo): being written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.deploy.layout import DeployError, DeployInputs

if TYPE_CHECKING:
    from planner.deploy.render import Deployment

__all__ = ["kube_deployment"]


def kube_deployment(target: str, inputs: DeployInputs, *, weights: str | None = None) -> Deployment:
    raise DeployError(f"--target {target}: the Kubernetes targets are not written yet")
