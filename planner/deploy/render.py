"""The files a target writes: ``deploy(scenario, target)`` -> :class:`Deployment`,
each file starting with a comment that names the scenario, its revision and the
plan's headline numbers; written to a folder atomically, or printed with separators."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from planner.deploy.engines import EAGLE_HEAD, ENGINES, EngineCommand, engine_commands
from planner.deploy.layout import DeployError, DeployInputs, deploy_inputs, header_lines
from planner.errors import PlannerError
from planner.io.atomic import write_bytes_atomic
from planner.sizing.plan import Plan, plan
from planner.spec.scenario import Scenario

__all__ = ["KUBE_TARGETS", "TARGETS", "DeployFile", "Deployment", "deploy", "deployment_text", "write_deployment"]

KUBE_TARGETS = ("kserve", "llm-d", "dynamo")
TARGETS = (*ENGINES, *KUBE_TARGETS)
SEPARATOR = "# ===== {name} ====="


@dataclass(frozen=True)
class DeployFile:
    name: str  # a bare file name (no folder)
    text: str
    language: str  # "bash" | "yaml" (for st.code)


@dataclass(frozen=True)
class Deployment:
    target: str
    inputs: DeployInputs
    commands: tuple[EngineCommand, ...]  # the engine command of each pool
    files: tuple[DeployFile, ...]
    objects: tuple[dict[str, object], ...] = ()  # Kubernetes objects (validated), in file order

    @property
    def command_lines(self) -> tuple[str, ...]:
        """Each pool's command on one line (what the review report lists)."""
        return tuple(shlex.join(c.argv) for c in self.commands)


def _comment(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines)


def _shell(argv: tuple[str, ...]) -> str:
    parts = [shlex.quote(a) for a in argv]
    out, line = [], parts[0]
    for part in parts[1:]:
        if part.startswith("--"):
            out.append(line)
            line = "  " + part
        else:
            line += " " + part
    out.append(line)
    return " \\\n".join(out) + "\n"


def _notes(inputs: DeployInputs, cmd: EngineCommand) -> list[str]:
    p = cmd.pool
    lines = [f"pool: {p.role} · run {p.replicas} replica(s) of this command, {p.gpus_per_replica} GPU(s) each"]
    if any(EAGLE_HEAD in a for a in cmd.argv) or EAGLE_HEAD in str(cmd.config):
        lines.append(f"set {EAGLE_HEAD} to the EAGLE head trained for {inputs.model_ref}")
    return lines + list(cmd.notes)


def _engine_files(target: str, inputs: DeployInputs, cmds: tuple[EngineCommand, ...]) -> tuple[DeployFile, ...]:
    head = header_lines(inputs, target)
    files: list[DeployFile] = []
    for c in cmds:
        files.append(DeployFile(f"{target}-{c.pool.role}.sh", "#!/bin/sh\n" + _comment(head + _notes(inputs, c))
                                + _shell(c.argv), "bash"))
        if c.config:
            files.append(DeployFile(c.config_name, _comment(head + [f"pool: {c.pool.role}"])
                                    + yaml.safe_dump(c.config, sort_keys=False), "yaml"))
    return tuple(files)


def deploy(scenario: Scenario, target: str, *, revision: str | None = None, weights: str | None = None,
           result: Plan | None = None) -> Deployment:
    """What runs ``scenario``'s plan on ``target`` (one of TARGETS); DeployError (one line) when the
    target cannot express the plan.  ``weights``: a pre-quantized checkpoint to load instead of the
    catalog model's repo; ``result``: the plan, when the caller already has it."""
    if target not in TARGETS:
        raise DeployError(f"--target {target!r}: expected one of {', '.join(TARGETS)}")
    inputs = deploy_inputs(scenario, result if result is not None else plan(scenario), revision=revision)
    if target in ENGINES:
        cmds = engine_commands(inputs, target, weights=weights)
        return Deployment(target, inputs, cmds, _engine_files(target, inputs, cmds))
    from planner.deploy.kube import kube_deployment

    return kube_deployment(target, inputs, weights=weights)


def deployment_text(d: Deployment) -> str:
    """Every file, each after a separator line naming it (stdout without --out)."""
    return "".join(f"{SEPARATOR.format(name=f.name)}\n{f.text}" for f in d.files)


def write_deployment(d: Deployment, out: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write each file into the folder ``out`` (made if missing; its parent must exist), each atomically.
    An existing file is refused unless ``overwrite`` (nothing is written then)."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise PlannerError(f"--out: {folder} is a file; give a folder")
    if not folder.exists():
        if not folder.parent.is_dir():
            raise PlannerError(f"--out: the folder {folder.parent} does not exist")
        try:
            folder.mkdir()
        except OSError as exc:
            raise PlannerError(f"--out: cannot make {folder}: {exc.strerror or exc}") from None
    clash = [f.name for f in d.files if (folder / f.name).exists()]
    if clash and not overwrite:
        raise PlannerError(f"--out: {folder} already holds {', '.join(clash)}; pass --force to overwrite")
    return [write_bytes_atomic(folder / f.name, f.text.encode(), flag="--out") for f in d.files]
