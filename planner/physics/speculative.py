"""Speculative methods: what drafts, what one draft step costs, how often it is right.

``speculative.method`` (planner.spec.scenario.Speculative) names the drafter:

* ``draft_model``: a separate catalog model (its own weights, KV cache and forward
  passes); one draft step = that model's decode step at the batch, from the same step
  model (``planner.physics.step.decode_step``).
* ``eagle``: an EAGLE-3 head, ``draft_layers`` decoder layers of the target's shape that
  share the target's embedding and LM head, with a small KV of their own; one draft
  step = a decode step of those layers (+ the shared LM head).
* ``mtp``: DeepSeek-V3's multi-token-prediction module (config.json
  ``num_nextn_predict_layers`` = 1): one more transformer block with MoE and its own
  2h → h projection, sharing the embedding and output head; its weights ship in the
  checkpoint (671B + 14B MTP) and its KV is one more layer.  Only models with
  ``ModelSpec.mtp_layers`` > 0 have it.

Acceptance per position: a_i = P(draft token i accepted | tokens 1 … i−1 were), so a
verify pass emits

    E[tokens per verify] = 1 + Σ_{k=1..K} Π_{i≤k} a_i     (the 1: the target's own bonus token)

A tuple shorter than K repeats its last entry (one number α is (α,): 1 + α + … + α^K).
Defaults, each with its origin:

* mtp: 0.85, the DeepSeek-V3 Technical Report (arXiv:2412.19437, §5.4.3 "Multi-Token
  Prediction Evaluation"): "the acceptance rate of the second token prediction ranges
  between 85% and 90%"; the low end.  The report measures one MTP depth only: later
  positions (engines chain the one module) repeat it, assumed.
* eagle: EAGLE-3 (Li et al., arXiv:2503.01840, Table 1): average acceptance length
  τ ≈ 6.5 on MT-bench for LLaMA-Instruct-3.1-8B at temperature 0 with 7 draft tokens
  deep; one α per position solving (1 − α⁸) / (1 − α) = τ gives α ≈ 0.94.  The paper's
  τ is a dynamic tree's; a chain accepts less, so this is an upper end.
* draft_model: 0.7, assumed (a generic draft model; no source measures it for any pair).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from planner.physics.terms import term
from planner.spec.catalog import get_model
from planner.spec.specs import ModelSpec

if TYPE_CHECKING:
    from planner.spec.scenario import Speculative

__all__ = [
    "DRAFT_MODEL_ACCEPTANCE",
    "EAGLE3_DEPTH",
    "EAGLE3_TAU",
    "EAGLE_ACCEPTANCE",
    "MTP_ACCEPTANCE",
    "SPECULATIVE_METHODS",
    "AcceptanceDefault",
    "Drafter",
    "SpeculativeMethod",
    "acceptance_from_tau",
    "acceptance_positions",
    "drafter_for",
    "drafter_timing_model",
    "method_problem",
    "mtp_default",
    "mtp_module_params",
    "tokens_per_verify",
]

SpeculativeMethod = Literal["draft_model", "eagle", "mtp"]
SPECULATIVE_METHODS: tuple[SpeculativeMethod, ...] = ("draft_model", "eagle", "mtp")

EAGLE3_TAU = 6.5  # EAGLE-3 Table 1: MT-bench, LLaMA-Instruct-3.1-8B, T = 0 (τ, bonus token included)
EAGLE3_DEPTH = 7  # draft tokens deep behind that τ


@dataclass(frozen=True)
class AcceptanceDefault:
    """A method's default acceptance per position and where it comes from."""

    per_position: tuple[float, ...]
    origin: Literal["paper", "assumed", "measured", "calibrated", "scenario"]
    source: str


def tokens_per_verify(acceptance: float | Sequence[float], draft_tokens: int) -> float:
    """E[tokens per verify pass] = 1 + Σ_{k≤K} Π_{i≤k} a_i (a tuple shorter than K repeats its last entry)."""
    total, run = 1.0, 1.0
    for a in acceptance_positions(acceptance, draft_tokens):
        run *= a
        total += run
    return total


def acceptance_positions(acceptance: float | Sequence[float], draft_tokens: int) -> tuple[float, ...]:
    """a_1 … a_K: ``acceptance`` cut or extended (its last entry repeated) to K positions."""
    acc = (float(acceptance),) if isinstance(acceptance, int | float) else tuple(float(a) for a in acceptance)
    if draft_tokens <= 0:
        return ()
    if not acc:
        raise ValueError("acceptance per position is empty")
    return acc[:draft_tokens] + (acc[-1],) * max(draft_tokens - len(acc), 0)


def acceptance_from_tau(tau: float, depth: int) -> float:
    """The one α per position whose chain of ``depth`` gives τ: (1 − α^(depth+1)) / (1 − α) = τ (bisection)."""
    if not 1.0 <= tau <= depth + 1:
        raise ValueError(f"τ = {tau} is outside 1 … {depth + 1}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if tokens_per_verify(mid, depth) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


MTP_ACCEPTANCE = AcceptanceDefault(
    (0.85,), "paper",
    "DeepSeek-V3 Technical Report (arXiv:2412.19437) §5.4.3: second-token acceptance 85–90% across generation "
    "topics; 0.85, the low end (positions past the first chain the one MTP module: repeated, assumed)")
EAGLE_ACCEPTANCE = AcceptanceDefault(
    (round(acceptance_from_tau(EAGLE3_TAU, EAGLE3_DEPTH), 3),), "paper",
    f"EAGLE-3 (arXiv:2503.01840) Table 1: τ ≈ {EAGLE3_TAU:g} on MT-bench, LLaMA-Instruct-3.1-8B, T = 0, "
    f"{EAGLE3_DEPTH} draft tokens deep; α per position from (1 − α^{EAGLE3_DEPTH + 1}) / (1 − α) = τ "
    "(the paper drafts a tree: a chain accepts less)")
DRAFT_MODEL_ACCEPTANCE = AcceptanceDefault(
    (0.7,), "assumed", "a generic separate draft model: 0.7 per token, assumed (seeds 000, 001 quote 70–80%)")
_DEFAULTS: dict[str, AcceptanceDefault] = {"mtp": MTP_ACCEPTANCE, "eagle": EAGLE_ACCEPTANCE,
                                           "draft_model": DRAFT_MODEL_ACCEPTANCE}


def mtp_module_params(target: ModelSpec) -> float:
    """The MTP module's own parameters, per the DeepSeek-V3 report's Figure 3: per depth one
    transformer block (attention + the MoE layer, the target's shapes) + the projection
    M (2h → h) + two RMSNorms; embedding and output head are shared with the target."""
    from planner.spec.params import param_counts

    pc = param_counts(_one_block(target))
    h = float(target.hidden_width)
    block = pc.total if pc.declared else pc.total - (float(target.vocab or 0) * h + h)  # less the shared head
    return target.mtp_layers * (block + 2.0 * h * h + 2.0 * h)


def _one_block(target: ModelSpec, layers: int = 1) -> ModelSpec:
    """``layers`` decoder layers of the target's shape (MoE layers for a MoE target) and one
    vocabulary matrix, the LM head it streams each step (tied: the embedding lookup reads B
    rows, not the table): what one draft step runs (declared counts scaled by layers / n_layers)."""
    upd: dict[str, object] = {"id": f"{target.id}-draft", "layers": layers, "dense_layers": 0,
                              "tie_embeddings": True}
    if target.params is not None:
        upd["params"] = target.params * layers / target.layers
        upd["active_params"] = (target.active_params or target.params) * layers / target.layers
    return target.model_copy(update=upd)


def drafter_timing_model(target: ModelSpec, method: SpeculativeMethod, *, draft: ModelSpec | None,
                         draft_layers: int) -> ModelSpec:
    """The model one draft step runs, timed by the step model: the draft model itself, the
    EAGLE head's ``draft_layers`` layers, or the MTP module's ``mtp_layers`` blocks."""
    if method == "draft_model":
        if draft is None:
            raise ValueError("speculative.method 'draft_model' needs speculative.draft_model")
        return draft
    if method == "mtp":
        return _one_block(target, max(target.mtp_layers, 1))
    return _one_block(target, draft_layers)


@dataclass(frozen=True)
class Drafter:
    """What drafts and how often it is right, for the step model and the simulator."""

    method: SpeculativeMethod
    name: str
    timing_model: ModelSpec  # what one draft step runs
    weights_dtype: str | None  # None: the target's
    acceptance: tuple[float, ...]  # a_1 … a_K
    acceptance_origin: str  # paper | assumed | scenario
    acceptance_source: str
    draft_cost: float | None  # the scenario's fixed fraction of a target step; None: timed

    @property
    def tokens_per_verify(self) -> float:
        return tokens_per_verify(self.acceptance, len(self.acceptance))


def method_problem(sp: Speculative, target: ModelSpec) -> str | None:
    """Why ``target`` cannot run ``sp.method`` (a sentence naming speculative.method), or None."""
    if sp.method == "mtp" and target.mtp_layers <= 0:
        return (f"speculative.method 'mtp': {target.id} has no multi-token-prediction module "
                "(ModelSpec.mtp_layers is 0; DeepSeek-V3-class checkpoints ship one); use 'eagle' or 'draft_model'")
    if sp.method == "draft_model" and sp.draft_model is None:
        return "speculative.method 'draft_model' needs speculative.draft_model (a catalog model id)"
    if sp.method != "draft_model" and sp.draft_model is not None:
        return (f"speculative.method '{sp.method}' drafts without a separate model: clear speculative.draft_model "
                f"({sp.draft_model}) or set speculative.method to 'draft_model'")
    return None


MTP_CALIBRATED_SOURCE = (
    "fitted on measured MTP runs (planner.validate.moefit: the fitted term mtp_acceptance, one α for every "
    "chained position of the one MTP module; InferenceX DeepSeek-R1 rows, random-token prompts), kept because "
    "leave-one-GPU-out and leave-one-engine-out errors fell with it (README \"How accurate is it on MoE?\")")
MTP_CALIBRATED_SOURCE_TRTLLM = (
    "fitted on measured TensorRT-LLM MTP runs (the fitted term mtp_acceptance_trtllm: TensorRT-LLM's MTP accepts "
    "more per position than SGLang's and ROCm's on the same rows; InferenceX DeepSeek-R1, random-token prompts), "
    "kept because leave-one-GPU-out and leave-one-engine-out errors fell with it (README \"How accurate is it on MoE?\")")

# Engines with an MTP acceptance of their own (a fitted term each); every other engine uses mtp_acceptance.
ENGINE_MTP_TERMS: dict[str, str] = {"trtllm": "mtp_acceptance_trtllm"}


def _mtp_term(engine: str | None) -> tuple[float, str]:
    own = ENGINE_MTP_TERMS.get(engine or "")
    if own is not None and term(own) > 0:
        return term(own), MTP_CALIBRATED_SOURCE_TRTLLM
    return term("mtp_acceptance"), MTP_CALIBRATED_SOURCE


def mtp_default(engine: str | None = None) -> AcceptanceDefault:
    """MTP's default acceptance on ``engine`` (``serving.engine``): the engine's own fitted term
    where it has one that is on (:data:`ENGINE_MTP_TERMS`), else the fitted ``mtp_acceptance``
    where it is on (> 0), else the paper's."""
    a, source = _mtp_term(engine)
    return AcceptanceDefault((round(a, 3),), "calibrated", source) if a > 0 else MTP_ACCEPTANCE


def drafter_for(sp: Speculative, target: ModelSpec, engine: str | None = None) -> Drafter | None:
    """The scenario's drafter (None with speculation off): its method, timing model and
    acceptance a_1 … a_K with their origin (the default for MTP: :func:`mtp_default` on
    ``engine``, the scenario's ``serving.engine``)."""
    return _drafter_for(sp, target, _mtp_term(engine)[0] if sp.method == "mtp" else 0.0,
                        engine if sp.method == "mtp" else None)


@lru_cache(maxsize=256)
def _drafter_for(sp: Speculative, target: ModelSpec, mtp_acceptance: float, engine: str | None
                 ) -> Drafter | None:
    k = sp.draft_tokens
    if k <= 0:
        return None
    if (msg := method_problem(sp, target)) is not None:
        raise ValueError(msg)
    draft = get_model(sp.draft_model) if sp.draft_model is not None else None
    if sp.acceptance_per_position is not None:
        acc, origin, source = sp.acceptance_per_position, "scenario", "speculative.acceptance_per_position"
    elif sp.acceptance is not None:
        acc, origin, source = (sp.acceptance,), "scenario", "speculative.acceptance"
    else:
        d = mtp_default(engine) if sp.method == "mtp" else _DEFAULTS[sp.method]
        acc, origin, source = d.per_position, d.origin, d.source
    if sp.method == "draft_model":
        assert draft is not None
        name = draft.id
    elif sp.method == "mtp":
        name = f"MTP module ({target.mtp_layers} block{'s' if target.mtp_layers > 1 else ''} of {target.id})"
    else:
        name = f"EAGLE-3 head ({sp.draft_layers} layer{'s' if sp.draft_layers > 1 else ''} of {target.id})"
    return Drafter(method=sp.method, name=name,
                   timing_model=drafter_timing_model(target, sp.method, draft=draft, draft_layers=sp.draft_layers),
                   weights_dtype=sp.draft_weights_dtype, acceptance=acceptance_positions(acc, k),
                   acceptance_origin=origin, acceptance_source=source, draft_cost=sp.draft_cost)

