"""What a deployment needs from a plan, engine-neutral: the pools (replicas and
the layout of each), the batch, chunk, memory budget, KV and weight formats,
speculative decoding and prefix caching, and the headline numbers each emitted
file names in its first lines.

A plan the target cannot express raises :class:`DeployError` (one line), never a
silently different deployment.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from planner.errors import PlannerError
from planner.physics.memory import DEFAULT_NON_TORCH_BYTES, engine_hbm_bytes
from planner.sizing.plan import Plan
from planner.sizing.pools import pools_set
from planner.spec.catalog import get_gpu
from planner.spec.parallel import Parallel
from planner.spec.scenario import Pool as ScenarioPool
from planner.spec.scenario import Scenario, resolve_gpu, resolve_model
from planner.spec.specs import GpuSpec

__all__ = ["MEMORY_FRACTION_DIGITS", "DeployError", "DeployInputs", "Pool", "SpecDecode", "deploy_inputs",
           "header_lines", "memory_fraction", "model_reference",
           "pool_gpu"]

Role = Literal["colocated", "prefill", "decode"]
MEMORY_FRACTION_DIGITS = 3  # an engine's memory fraction, rounded to 0.1% of the GPU
_HF = re.compile(r"https://huggingface\.co/([^/\s]+/[^/\s]+)")


class DeployError(PlannerError):
    """The plan cannot be written for this target as reviewed; the message says why, in one line."""


@dataclass(frozen=True)
class SpecDecode:
    method: str  # "mtp" | "eagle" | "draft_model"
    draft_tokens: int
    draft_ref: str | None  # the draft model or EAGLE head ("" for MTP: the target's own MTP layers)


@dataclass(frozen=True)
class Pool:
    """One pool of identical replicas."""

    role: Role
    replicas: int
    tp: int
    pp: int
    ep: int
    dp_attention: bool
    redundant_experts: int  # EPLB copies per MoE layer (parallel.redundant_experts)
    gpus_per_replica: int
    gpu: str  # the pool's GPU (prefill.gpu / decode.gpu, else the scenario's)
    batch: int | None  # the running batch per replica (None: a prefill pool, sized by its chunk)
    chunk_tokens: int
    context_tokens: int


@dataclass(frozen=True)
class DeployInputs:
    scenario: Scenario
    plan: Plan
    revision: str  # the store's version ("unsaved" for a file or an unsaved page)
    model_ref: str  # what the engine loads (a Hugging Face repo id where the catalog names one)
    pools: tuple[Pool, ...]
    spec: SpecDecode | None
    prefix_caching: bool

    @property
    def disaggregated(self) -> bool:
        return any(p.role != "colocated" for p in self.pools)

    def pool(self, role: Role) -> Pool:
        return next(p for p in self.pools if p.role == role)


def model_reference(scenario: Scenario) -> str:
    """The Hugging Face repo the catalog's source names (``meta-llama/Llama-3.1-70B``), else the model's id."""
    m = resolve_model(scenario)
    found = _HF.match(m.source_url or "")
    return found.group(1) if found else m.id


def _pool_spec(scenario: Scenario, role: str) -> ScenarioPool | None:
    """``prefill`` / ``decode`` of a disaggregated scenario (None: colocated, or not set)."""
    if scenario.serving.mode != "disaggregated" or role not in ("prefill", "decode"):
        return None
    return scenario.prefill if role == "prefill" else scenario.decode


def _layout(scenario: Scenario, role: str) -> Parallel:
    """The layout of one pool: ``prefill.parallel`` / ``decode.parallel`` where the scenario sets it,
    else ``parallel``."""
    pool = _pool_spec(scenario, role)
    return pool.parallel if pool is not None and pool.parallel is not None else scenario.parallel


def pool_gpu(scenario: Scenario, role: str) -> GpuSpec:
    """The GPU of one pool: ``prefill.gpu`` / ``decode.gpu`` where the scenario sets it, else ``gpu``."""
    pool = _pool_spec(scenario, role)
    g = pool.gpu if pool is not None else None
    if g is None:
        return resolve_gpu(scenario)
    return g if isinstance(g, GpuSpec) else get_gpu(g)


def _replicas(value: float, what: str) -> int:
    if not math.isfinite(value) or value < 1:
        raise DeployError(f"the plan has no {what} to deploy (no operating point meets the SLO); fix the plan first")
    return int(math.ceil(value - 1e-9))


def _spec(scenario: Scenario) -> SpecDecode | None:
    sp = scenario.speculative
    if sp.draft_tokens <= 0:
        return None
    method = sp.method
    if method == "draft_model" and sp.draft_model is not None:
        draft: str | None = model_reference(scenario.model_copy(update={"model": sp.draft_model}))
    elif method == "eagle":
        draft = None  # an EAGLE head trained for the target: the user names its weights
    else:
        draft = ""
    return SpecDecode(method=method, draft_tokens=sp.draft_tokens, draft_ref=draft)


def deploy_inputs(scenario: Scenario, plan: Plan, *, revision: str | None = None) -> DeployInputs:
    """The engine-neutral deployment of ``plan`` (DeployError when it has no operating point)."""
    op, fl = plan.operating_point, plan.fleet
    if not op.feasible:
        raise DeployError(f"the plan has no operating point ({op.reason}); there is nothing reviewed to deploy")
    ctx = plan.memory.context_tokens
    chunk = scenario.serving.chunk_tokens
    pools: list[Pool] = []

    def pool(role: Role, replicas: float, batch: int | None) -> Pool:
        par = _layout(scenario, role)
        return Pool(role=role, replicas=_replicas(replicas, f"{role} replica"), tp=par.tp, pp=par.pp, ep=par.ep,
                    dp_attention=par.dp_attention, redundant_experts=par.redundant_experts,
                    gpus_per_replica=par.gpus, gpu=pool_gpu(scenario, role).id, batch=batch, chunk_tokens=chunk,
                    context_tokens=ctx)

    if fl.mode == "disaggregated":
        pools.append(pool("prefill", fl.prefill_replicas, None))
        pools.append(pool("decode", fl.decode_replicas, op.batch_size))
    else:
        pools.append(pool("colocated", fl.replicas, op.batch_size))
    for p in pools:
        planned = fl.gpus_per_replica
        if plan.pools is not None and p.role != "colocated":
            planned = (plan.pools.prefill if p.role == "prefill" else plan.pools.decode).gpus_per_replica
        if p.gpus_per_replica != planned:
            raise DeployError(f"the plan counts {planned} GPUs per replica but an engine runs TP {p.tp} × PP {p.pp} "
                              f"= {p.gpus_per_replica} GPUs (EP {p.ep} laid over them)")
    return DeployInputs(scenario=scenario, plan=plan, revision=revision or "unsaved",
                        model_ref=model_reference(scenario), pools=tuple(pools), spec=_spec(scenario),
                        prefix_caching=scenario.workload.prefix_hit_rate > 0 and scenario.workload.prefix_tokens > 0)


def _memory_describes(inputs: DeployInputs, pool: Pool) -> bool:
    """Whether ``plan.memory`` is this pool's: with per-pool layouts it is the decode pool's (and a prefill
    pool's on the same GPU and layout)."""
    if pool.role != "prefill" or not pools_set(inputs.scenario):
        return True
    d = inputs.pool("decode")
    same = (pool.gpu, pool.tp, pool.pp, pool.ep, pool.dp_attention, pool.redundant_experts)
    return same == (d.gpu, d.tp, d.pp, d.ep, d.dp_attention, d.redundant_experts)


def memory_fraction(inputs: DeployInputs, engine: str, pool: Pool | None = None) -> float:
    """The memory fraction that gives ``engine`` the KV budget per GPU the plan sized.

    The plan's ``serving.memory_utilization`` is ``serving.engine``'s own knob; for
    that engine it is emitted as given.  For another engine (or with no
    utilization: HBM − weights − reserved) the fraction is solved from the plan's
    KV budget K, weights W, activation peak A and V = CUDA-visible HBM
    (``planner.physics.memory.kv_budget_bytes``):
    vllm u = (K + W + A + non-torch) / V; sglang u = (K + W) / V; trtllm u = K / (V − W − A − non-torch).
    ``pool``: the pool whose fraction it is (default: the first); a prefill pool on its own GPU or
    layout has no memory section in the plan, so only the stated engine's own knob is emitted for it.
    """
    s, m = inputs.scenario, inputs.plan.memory
    pool = pool if pool is not None else inputs.pools[0]
    if s.serving.memory_utilization is not None and s.serving.engine == engine:
        return s.serving.memory_utilization
    if not _memory_describes(inputs, pool):
        raise DeployError(f"{engine}: the plan's memory budget of the prefill pool ({pool.gpu}, its own layout) is "
                          f"serving.engine {s.serving.engine}'s; deploy it with that engine, or re-plan with "
                          f"serving.engine={engine}")
    v = engine_hbm_bytes(pool_gpu(s, pool.role))
    k, w, a = m.kv_budget_bytes, m.weight_bytes_per_gpu + m.draft_weight_bytes_per_gpu, m.activation_bytes
    if engine == "vllm":
        u = (k + w + a + DEFAULT_NON_TORCH_BYTES) / v
    elif engine == "sglang":
        u = (k + w) / v
    elif engine == "trtllm":
        free = v - w - a - DEFAULT_NON_TORCH_BYTES
        u = k / free if free > 0 else math.inf
    else:
        raise ValueError(f"engine {engine!r}")
    u = round(u, MEMORY_FRACTION_DIGITS)
    if not 0 < u <= 1:
        raise DeployError(f"{engine} cannot hold the plan's KV budget of {k / 1e9:.1f} GB per GPU: its memory "
                          f"fraction would be {u:g} (> 1); re-plan with serving.engine={engine}")
    return u


def _stat(plan: Plan, which: str) -> str:
    u = plan.uncertainty
    band = getattr(u, which, None) if u is not None else None
    return band.statistic if band is not None else ("mean, queueing included" if which == "ttft_s"
                                                   else "mean at the operating point")


def header_lines(inputs: DeployInputs, target: str) -> list[str]:
    """The comment every file starts with: the scenario, its revision and the plan's headline numbers."""
    p, s = inputs.plan, inputs.scenario
    pools = ", ".join(f"{q.role} {q.replicas} × {q.gpu} (TP {q.tp} · PP {q.pp} · EP {q.ep}"
                      f"{' · DP attention' if q.dp_attention else ''}) = {q.replicas * q.gpus_per_replica} GPUs"
                      for q in inputs.pools)
    op = p.operating_point
    return [
        f"Ridgeline deployment for target {target}",
        f"scenario: {s.name} · revision: {inputs.revision}",
        f"plan: {p.model} on {p.gpu} · weights {p.weights_dtype} · KV {p.kv_dtype} · {p.fleet.mode}",
        f"GPUs: {p.fleet.gpus_total:,.0f} · replicas: {pools}",
        f"$/Mtok output: {p.cost.usd_per_mtok_output:.3f}",
        f"TTFT ({_stat(p, 'ttft_s')}): {op.ttft_s * 1e3:.0f} ms · p90 TTFT: {op.ttft_p90_s * 1e3:.0f} ms",
        f"TPOT ({_stat(p, 'itl_s')}): {op.itl_s * 1e3:.1f} ms · "
        f"p{op.itl_percentile * 100:g} TPOT: {op.itl_percentile_s * 1e3:.1f} ms",
    ]
