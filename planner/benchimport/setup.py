"""The setup a file lacks (``--set gpu=… --set model=… --set parallel.tp=…``, engine,
precision), checked against what the file states, and the file's levels as
measurement rows (the ``validate`` schema) with that setup.

Keys ``--set`` takes beyond the scenario's own dotted keys:

* ``engine`` (vllm, sglang, trtllm, llama.cpp, …: its family picks the engine's batch
  cap and memory accounting), ``engine_version``;
* ``precision`` (bf16, fp8, fp4, int4, …: sets ``weights_dtype`` and ``kv_dtype`` as
  ``validate`` maps published precisions, unless those are given too);
* ``n_gpus`` (GPUs behind the endpoint; default tp × pp: one replica);
* ``served_model`` (the name the endpoint served the model under, when it is not a
  catalog name: checked against the file's model name);
* ``concurrency``, ``request_rate`` (checked against each level the file states).

What the file states wins for the prediction (lengths, load); a value the user also
gave that disagrees is one line naming both values.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from planner.benchimport.model import BenchLevel, BenchRun
from planner.errors import ScenarioError
from planner.spec.scenario import Scenario, apply_overrides, scenario_from_dict
from planner.spec.specs import GpuSpec, ModelSpec
from planner.validate import MeasurementRow, engine_family, precision_dtypes, resolve_model_name

__all__ = [
    "BENCH_SET_KEYS",
    "LENGTH_TOLERANCE",
    "BenchSetup",
    "bench_setup",
    "check_run",
    "level_rows",
    "run_rows",
]

BENCH_SET_KEYS: tuple[str, ...] = ("engine", "engine_version", "precision", "n_gpus", "served_model",
                                   "concurrency", "request_rate")
# A mean length the file states may differ from the one the user gave by this much
# (a random dataset's mean wanders a little around its target) before it is a mismatch.
LENGTH_TOLERANCE = 0.10
_LOAD_TOLERANCE = 1e-6


@dataclass(frozen=True)
class BenchSetup:
    """What served the benchmark: the scenario (GPU, model, layout, formats) and the rest."""

    scenario: Scenario
    engine: str
    engine_version: str | None
    precision: str
    n_gpus: int
    served_model: str | None
    stated: frozenset[str]  # the keys the user gave (checked against the file)
    concurrency: float | None = None
    request_rate: float | None = None

    @property
    def family(self) -> str:
        return engine_family(self.engine)

    @property
    def replicas(self) -> int:
        p = self.scenario.parallel
        return self.n_gpus // (p.tp * p.pp)

    def describe(self) -> dict[str, Any]:
        s = self.scenario
        return {"gpu": _gpu_name(s), "model": _model_name(s), "precision": self.precision,
                "weights_dtype": s.weights_dtype, "kv_dtype": s.kv_dtype, "tp": s.parallel.tp, "pp": s.parallel.pp,
                "n_gpus": self.n_gpus, "engine": self.engine, "engine_version": self.engine_version}


def _gpu_name(s: Scenario) -> str:
    return s.gpu.id if isinstance(s.gpu, GpuSpec) else str(s.gpu)


def _model_name(s: Scenario) -> str:
    return s.model.id if isinstance(s.model, ModelSpec) else str(s.model)


def _split(overrides: list[str]) -> tuple[dict[str, str], list[str]]:
    bench: dict[str, str] = {}
    rest: list[str] = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if sep and key.strip() in BENCH_SET_KEYS:
            bench[key.strip()] = raw.strip()
        else:
            rest.append(item)
    return bench, rest


def _positive(raw: str, key: str, *, integer: bool = False) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ScenarioError(f"{key}: expected a number, got {raw[:40]!r}") from None
    if not math.isfinite(value) or value <= 0 or (integer and value != int(value)):
        raise ScenarioError(f"{key}: expected a positive {'integer' if integer else 'number'}, got {raw[:40]!r}")
    return value


def bench_setup(overrides: list[str], base: dict[str, Any] | None = None, *, file_model: str | None = None,
                allow_local_files: bool = False) -> BenchSetup:
    """The setup from a scenario dict (a file) and ``--set`` items; ``file_model``: the model
    the file names, used when neither gives one and it is a catalog model."""
    bench, rest = _split(overrides)
    data = apply_overrides(dict(base or {}), rest)
    stated = {item.partition("=")[0].strip() for item in rest} | set(bench) | set(data)
    if "model" not in data and file_model:
        mid, _ = resolve_model_name(file_model)
        if mid is not None:
            data["model"] = mid
    engine = bench.get("engine") or (data.get("serving") or {}).get("engine") or "vllm"
    family = engine_family(engine)
    precision = bench.get("precision") or data.get("weights_dtype") or "bf16"
    if "precision" in bench:
        dtypes, why = precision_dtypes(bench["precision"], family=family)
        if dtypes is None:
            raise ScenarioError(f"precision: {why}")
        data.setdefault("weights_dtype", dtypes[0])
        data.setdefault("kv_dtype", dtypes[1])
    if "engine" in bench and "serving" not in data:
        memory_engine = "sglang" if "sglang" in engine.lower() else family
        data["serving"] = {"engine": memory_engine}
    scenario = scenario_from_dict(data, allow_local_files=allow_local_files)
    group = scenario.parallel.tp * scenario.parallel.pp
    n_gpus = int(_positive(bench["n_gpus"], "n_gpus", integer=True)) if "n_gpus" in bench else group
    if n_gpus % group:
        raise ScenarioError(f"n_gpus: {n_gpus} is not a multiple of parallel.tp × parallel.pp = {group}")
    return BenchSetup(
        scenario=scenario, engine=engine, engine_version=bench.get("engine_version") or None, precision=precision,
        n_gpus=n_gpus, served_model=bench.get("served_model") or None, stated=frozenset(stated),
        concurrency=_positive(bench["concurrency"], "concurrency") if "concurrency" in bench else None,
        request_rate=_positive(bench["request_rate"], "request_rate") if "request_rate" in bench else None,
    )


def _loose(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.strip().lower().rsplit("/", 1)[-1]).strip("-")


def _check_model(run: BenchRun, setup: BenchSetup) -> None:
    named = run.model
    if not named:
        return
    where = f"{run.source_file}: model"
    if setup.served_model is not None:
        if _loose(named) != _loose(setup.served_model):
            raise ScenarioError(f"{where}: the file says '{named}', --set served_model says '{setup.served_model}'")
        return
    mine = _model_name(setup.scenario)
    fid, _ = resolve_model_name(named)
    if fid is not None and not isinstance(setup.scenario.model, ModelSpec):
        if fid != mine:
            raise ScenarioError(f"{where}: the file says '{named}' (catalog {fid}), the setup says '{mine}'")
        return
    if _loose(named) not in {_loose(mine), _loose(getattr(setup.scenario.model, "name", "") or mine)}:
        raise ScenarioError(f"{where}: the file says '{named}', the setup says '{mine}' (if it is the same model "
                            f"served under another name, give --set served_model={named})")


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-12)


def check_run(run: BenchRun, setup: BenchSetup) -> None:
    """What the file states against what the user gave: the first mismatch raises one line
    naming both values."""
    _check_model(run, setup)
    wl = setup.scenario.workload
    for i, lv in enumerate(run.levels):
        where = f"{run.source_file} level {i} ({lv.label()})"
        if setup.concurrency is not None and lv.concurrency is not None and not _close(
                lv.concurrency, setup.concurrency, _LOAD_TOLERANCE):
            raise ScenarioError(f"{where}: concurrency: the file says {lv.concurrency:g}, "
                                f"--set concurrency={setup.concurrency:g}")
        if setup.request_rate is not None and lv.request_rate is not None and not _close(
                lv.request_rate, setup.request_rate, _LOAD_TOLERANCE):
            raise ScenarioError(f"{where}: request_rate: the file says {lv.request_rate:g}, "
                                f"--set request_rate={setup.request_rate:g}")
        for key, stated, given in (("workload.prompt_tokens", lv.prompt_tokens, wl.prompt_tokens),
                                   ("workload.output_tokens", lv.output_tokens, wl.output_tokens)):
            if key in setup.stated and stated is not None and not _close(stated, float(given), LENGTH_TOLERANCE):
                raise ScenarioError(f"{where}: {key}: the file's mean is {stated:.1f} tokens, the setup says {given} "
                                    f"(over {LENGTH_TOLERANCE:.0%} apart)")


# metric → (the level's figure in the row's unit, what it is)
def _figures(lv: BenchLevel) -> list[tuple[str, float | None, str]]:
    def ms(x: float | None) -> float | None:
        return None if x is None else x * 1e3

    def which(stats: Any) -> str:
        return "median" if stats.p50 is not None else "mean"

    return [
        ("ttft_ms", ms(lv.ttft_s.typical), which(lv.ttft_s)),
        ("tpot_ms", ms(lv.tpot_s.typical), which(lv.tpot_s)),
        ("itl_ms", ms(lv.itl_s.typical), which(lv.itl_s)),
        ("e2e_s", lv.e2e_s.typical, which(lv.e2e_s)),
        ("output_tok_s_total", lv.output_tok_s, "rate"),
        ("input_tok_s_total", lv.input_tok_s, "rate"),
    ]


def level_rows(run: BenchRun, index: int, setup: BenchSetup) -> list[MeasurementRow]:
    """One level's measurements as rows (zero values, which measure nothing, left out)."""
    lv = run.levels[index]
    s = setup.scenario
    notes = []
    isl = lv.prompt_tokens
    osl = lv.output_tokens
    if isl is None:
        isl = float(s.workload.prompt_tokens)
        notes.append(f"input length not in the file: workload.prompt_tokens = {s.workload.prompt_tokens}")
    if osl is None:
        osl = float(s.workload.output_tokens)
        notes.append(f"output length not in the file: workload.output_tokens = {s.workload.output_tokens}")
    conc = lv.concurrency if lv.concurrency is not None else (setup.concurrency if lv.request_rate is None else None)
    rate = lv.request_rate if lv.request_rate is not None else (setup.request_rate if conc is None else None)
    version = f"{run.tool} {run.tool_version}" if run.tool_version else run.tool
    rows = []
    for metric, value, kind in _figures(lv):
        if value is None or value <= 0:
            continue
        rows.append(MeasurementRow(
            id=f"{run.label}#{index}:{metric}", engine=setup.engine, model=_model_name(s), precision=setup.precision,
            gpu=_gpu_name(s), n_gpus=setup.n_gpus, tp=s.parallel.tp, pp=s.parallel.pp,
            isl=max(1, round(isl)), osl=max(1, round(osl)), concurrency=conc, request_rate=rate, metric=metric,
            value=value, source=f"{run.label} ({version})", engine_version=setup.engine_version,
            notes="; ".join([f"{kind} as {run.tool} reports it", *notes]), trust="imported",
        ))
    return rows


def run_rows(run: BenchRun, setup: BenchSetup) -> list[MeasurementRow]:
    """Every level's rows, after :func:`check_run`."""
    check_run(run, setup)
    return [r for i in range(len(run.levels)) for r in level_rows(run, i, setup)]
