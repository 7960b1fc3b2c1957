"""What a row says ran it, as planner layouts: TP × PP with EP and attention data
parallelism, speculative decoding, and the pools of a disaggregated run.  Every field a
row carries is used here or the row is skipped naming it (issue 25: never silently
dropped)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import ValidationError

from planner.errors import validation_message
from planner.spec.scenario import Parallel, Scenario, Speculative, resolve_model
from planner.validate.names import dynamo_stack
from planner.validate.recipes import inferencex_recipe
from planner.validate.rows import MeasurementRow

__all__ = ["DP_PREFILL_CHUNK_TOKENS", "ENGINE_MTP_DRAFT_TOKENS", "PoolSetup", "multi_node_problem", "pool_setup",
           "prefill_pass_tokens", "row_layout", "row_speculative", "unmodelled"]


@dataclass(frozen=True)
class PoolSetup:
    """A disaggregated run: the prefill workers' scenario (the row's scenario is the decode
    workers'), the worker counts, and the link the KV crosses."""

    prefill: Scenario
    prefill_workers: int
    decode_workers: int
    link: str


# MTP draft tokens the engines' InferenceX launch scripts set, when a row does not state
# them (SGLang --speculative-num-steps 2; TensorRT-LLM num_nextn_predict_layers 3).
ENGINE_MTP_DRAFT_TOKENS: dict[str, int] = {"trtllm": 3, "vllm": 2}


# The token budget of a Dynamo attention-DP prefill worker's pass on each rank, where neither
# the row nor its recipe (planner.validate.recipes) states it: the Dynamo + SGLang prefill workers
# behind InferenceX's disaggregated runs pass chunked-prefill-size 131072 over dp-size 8 or 65536
# over 4 (NVIDIA srt-slurm recipes, branch sa-submission-q2-2026), 16384 a rank either way, the
# Dynamo + TensorRT-LLM context servers' most common max_num_tokens.  AMD's SGLang + MoRI prefill
# workers pass MORI_MAX_DISPATCH_TOKENS_PREFILL (8192) × their TP size over as many ranks, 8192 a
# rank (InferenceX benchmarks/multi_node/amd_utils), the engine's default; so does a worker
# without attention DP.
DP_PREFILL_CHUNK_TOKENS = 16384


def prefill_pass_tokens(row: MeasurementRow, prefill: Scenario, notes: list[str]) -> int:
    """The per-rank token budget of a disaggregated run's prefill pass: the row's
    ``disaggregated.prefill_chunk_tokens``, else its InferenceX recipe's prefill
    ``max_num_tokens``, else DP_PREFILL_CHUNK_TOKENS for a Dynamo attention-DP prefill worker,
    else the scenario's (the engine's default)."""
    d = row.disaggregated
    assert d is not None
    if d.prefill_chunk_tokens is not None:
        return d.prefill_chunk_tokens
    found = inferencex_recipe(row)
    if found is not None and found.prefill_tokens_per_rank is not None:
        notes.append(f"disaggregated.prefill_chunk_tokens not stated: {found.prefill_tokens_per_rank} tokens a "
                     f"prefill pass on each rank (max_num_tokens of InferenceX's recipe {found.recipe})")
        return found.prefill_tokens_per_rank
    if dynamo_stack(row.engine) and prefill.parallel.dp_attention and prefill.parallel.attention_dp > 1:
        notes.append(f"disaggregated.prefill_chunk_tokens not stated: {DP_PREFILL_CHUNK_TOKENS} tokens a pass on each "
                     "attention-DP rank of a prefill worker (the recipes' max_num_tokens / chunked-prefill-size)")
        return DP_PREFILL_CHUNK_TOKENS
    return prefill.serving.chunk_tokens


def unmodelled(row: MeasurementRow) -> str | None:
    """Why a field the row carries cannot be honoured (None: every field is used)."""
    if row.speculative == "draft_model":
        return "speculative: draft_model runs need the draft model's name, which the row does not give"
    return None


def row_speculative(row: MeasurementRow, family: str, notes: list[str]) -> Speculative | str:
    """The speculative decoding a row ran (``Speculative()`` off: none or unstated)."""
    method = row.speculative
    if method is None or method == "none":
        return Speculative()
    k = row.speculative_draft_tokens
    if k is None:
        k = ENGINE_MTP_DRAFT_TOKENS.get(family, 2) if method == "mtp" else 3
        notes.append(f"speculative_draft_tokens not stated: assumed {k} (the engine's launch default)")
    try:
        return Speculative(method=method, draft_tokens=k)
    except ValidationError as exc:
        return f"speculative: {validation_message(exc)}"


# TensorRT-LLM's option as its perf tables' notes write it ("llm_options enable attention DP",
# ``enable_attention_dp: true``).
_ENABLE_ATTENTION_DP = re.compile(r"enable[sd]?[ _]attention[ _]dp\b")


def _stated_dp_attention(row: MeasurementRow, *, tp: int, ep: int, family: str, notes: list[str]) -> bool:
    """The row's dp_attention; unstated, what its own text says: SGLang's
    ``--enable-dp-attention`` in the notes, notes saying the engine enabled attention DP
    (TensorRT-LLM's perf tables: "MoE llm_options enable attention DP"; the EP stays the
    row's: 1 where the row does not give it), or TensorRT-LLM's DEPn (EP = TP)
    tables."""
    if row.dp_attention is not None:
        return row.dp_attention
    text = f"{row.id} {row.notes or ''}".lower()
    if "enable-dp-attention" in text or "dp-attention" in text or "dpattn" in text:
        notes.append("dp_attention not stated: the row's notes say --enable-dp-attention")
        return True
    if tp > 1 and _ENABLE_ATTENTION_DP.search(text):
        notes.append("dp_attention not stated: the row's notes say the engine enabled attention DP")
        return True
    if family == "trtllm" and ep > 1 and ep == tp and "dep" in row.id.lower():
        notes.append("dp_attention not stated: TensorRT-LLM's DEP layouts run attention data-parallel")
        return True
    return False


def row_layout(row: MeasurementRow, *, tp: int, pp: int, ep: int | None, dp_attention: bool | None, where: str,
               family: str, notes: list[str], experts: int = 0) -> Parallel | str:
    """The layout of one replica (or worker): TP × PP GPUs, EP over them, attention DP;
    or why it cannot be run.  An EP that does not divide the ``experts`` runs with EPLB's
    redundant copies filling the last slots (SGLang and TensorRT-LLM do so for EP 48, 72)."""
    e = ep or 1
    dp = dp_attention if where != "parallel" else _stated_dp_attention(row, tp=tp, ep=e, family=family, notes=notes)
    redundant = (-experts) % e if experts and e > 1 else 0
    if redundant:
        notes.append(f"{where}: ep {e} does not divide the {experts} experts: {redundant} redundant copies "
                     "assumed (EPLB)")
    try:
        return Parallel(tp=tp, pp=pp, ep=e, dp_attention=bool(dp), redundant_experts=redundant)
    except ValidationError as exc:
        return f"{where}: {validation_message(exc)}"


def multi_node_problem(row: MeasurementRow, *, gpus_per_replica: int, gpus_per_node: int,
                       notes: list[str]) -> str | None:
    """``multi_node`` checked against the layout: a group past one node must say so."""
    if row.multi_node is None or row.disaggregated is not None:
        return None
    if not row.multi_node and gpus_per_replica > gpus_per_node:
        return (f"multi_node: false, but the replica's {gpus_per_replica} GPUs (tp × pp) do not fit "
                f"a {gpus_per_node}-GPU node")
    if row.multi_node and gpus_per_replica <= gpus_per_node:
        notes.append(f"multi_node: the {gpus_per_replica}-GPU group fits one node; predicted within it")
    return None


def pool_setup(row: MeasurementRow, scenario: Scenario, *, gpus_per_domain: int, gpus_per_node: int,
               family: str, notes: list[str]) -> tuple[Scenario, PoolSetup] | str:
    """(decode workers' scenario, the pools) of a disaggregated row, or why not."""
    d = row.disaggregated
    assert d is not None
    for pool in ("prefill", "decode"):
        gpus, workers = getattr(d, f"{pool}_gpus"), getattr(d, f"{pool}_workers")
        if workers < 1:
            return f"disaggregated: {pool}_workers is {workers}: a pool of {gpus} GPUs without a worker"
        if gpus % workers:
            return f"disaggregated: {pool}_gpus ({gpus}) is not a whole number of GPUs per {pool} worker ({workers})"
    if d.prefill_gpus + d.decode_gpus != row.n_gpus:
        return (f"disaggregated: prefill_gpus + decode_gpus ({d.prefill_gpus} + {d.decode_gpus}) is not "
                f"n_gpus ({row.n_gpus})")
    layouts: dict[str, Parallel] = {}
    experts = resolve_model(scenario).experts
    for pool in ("prefill", "decode"):
        gpus, workers = getattr(d, f"{pool}_gpus"), getattr(d, f"{pool}_workers")
        tp = getattr(d, f"{pool}_tp")
        per_worker, ep = gpus // workers, getattr(d, f"{pool}_ep")
        dp = getattr(d, f"{pool}_dp_attention")
        if per_worker != tp:
            if per_worker == ep or (dp and per_worker % tp == 0):
                # attention TP × data-parallel ranks (or experts) over the whole worker
                notes.append(f"disaggregated: a {pool} worker is {per_worker} GPUs ({pool}_gpus / {pool}_workers) "
                             f"with {pool}_tp {tp}: laid out as TP{per_worker} with the EP and attention DP stated")
                tp = per_worker
            else:
                return (f"disaggregated: a {pool} worker has {per_worker} GPUs ({pool}_gpus / {pool}_workers) but "
                        f"{pool}_tp is {tp} and {pool}_ep {ep}")
        lay = row_layout(row, tp=tp, pp=1, ep=ep, dp_attention=dp, where=f"disaggregated.{pool}", family=family,
                         notes=notes, experts=experts)
        if isinstance(lay, str):
            return lay
        layouts[pool] = lay
    # The KV crosses NVLink when both pools sit in one scale-up domain (an NVL72 rack, or one
    # node when the row says it ran on one), else each GPU's NIC.
    one_domain = row.n_gpus <= gpus_per_domain and (gpus_per_domain > gpus_per_node or row.multi_node is False)
    link = "nvlink" if one_domain else "rdma"
    notes.append(f"disaggregated: the KV hand-off over {'NVLink' if one_domain else 'the NICs (RDMA)'}")
    try:  # validated: each pool's layout is checked against the model as a scenario's would be
        base = scenario.model_dump(mode="python")
        prefill = Scenario.model_validate({**base, "parallel": layouts["prefill"].model_dump(),
                                           "name": f"{scenario.name} (prefill)"})
        decode = Scenario.model_validate({**base, "parallel": layouts["decode"].model_dump()})
    except ValidationError as exc:
        return f"disaggregated: {validation_message(exc)}"
    chunk = prefill_pass_tokens(row, prefill, notes)
    if chunk != prefill.serving.chunk_tokens:
        prefill = prefill.model_copy(update={"serving": prefill.serving.model_copy(update={"chunk_tokens": chunk})})
    return decode, PoolSetup(prefill=prefill, prefill_workers=d.prefill_workers, decode_workers=d.decode_workers,
                             link=link)
