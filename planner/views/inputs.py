"""What each capacity input means, its unit and where its default comes from (the
sidebar's help texts), and the workload trace read from an upload.

An uploaded trace is untrusted bytes: size-capped, decoded, parsed from memory
(never opened as a path), row-capped.
"""

from __future__ import annotations

import csv
import io

from planner.errors import ScenarioError
from planner.physics.lengths import parse_trace_csv
from planner.physics.speculative import (
    DRAFT_MODEL_ACCEPTANCE,
    EAGLE3_TAU,
    EAGLE_ACCEPTANCE,
    MTP_ACCEPTANCE,
    mtp_default,
)
from planner.spec.scenario import Scenario

__all__ = ["INPUT_HELP", "TRACE_MAX_BYTES", "TRACE_MAX_ROWS", "trace_from_upload"]

# A trace of (prompt, output) rows: 10,000 rows describe a length distribution well
# (percentiles to 0.01) and keep the sizing's per-row arrays small.
TRACE_MAX_ROWS = 10_000
# "prompt_tokens,output_tokens" rows are ~12 bytes; 1 MiB holds the row cap with room for a wider CSV.
TRACE_MAX_BYTES = 1_048_576

_D = Scenario()
_MTP = mtp_default()  # the fitted MTP acceptance (or the paper's where the term is off)
_MTP_TRT = mtp_default("trtllm")  # TensorRT-LLM's own
# Dotted scenario field -> help text: meaning, unit, and the default's source.
INPUT_HELP: dict[str, str] = {
    "workload.requests_per_s": "Mean traffic in requests per second; cost ($/Mtok) divides by it. "
                               f"Default {_D.workload.requests_per_s:g} req/s (Ridgeline's example).",
    "workload.peak_requests_per_s": "Requests per second the fleet is sized for (its busiest hour). "
                                    "Empty: the mean (no peak). Unit: req/s.",
    "fleet.target_utilization": "Share of each replica's SLO capacity the fleet is planned to use at the peak; "
                                f"the rest absorbs bursts. Unit: %. Default {_D.fleet.target_utilization:.0%} "
                                "(Ridgeline's assumption: about 30% headroom).",
    "fleet.min_replicas": f"Fewest replicas per pool, whatever the traffic. Default {_D.fleet.min_replicas} "
                          "(assumed: one replica can fail or restart without an outage).",
    "fleet.link": "How the KV cache moves from prefill to decode replicas (disaggregated): nvlink uses the GPU's "
                  "NVLink bandwidth from its datasheet; rdma a 400 Gb/s NIC per GPU (seeds 001). "
                  f"Default {_D.fleet.link}.",
    "workload.distribution": "Prompt and output lengths: fixed (every request the mean), lognormal (the means "
                             "with a spread σ) or trace (an uploaded CSV of prompt_tokens,output_tokens rows).",
    "workload.prompt_sigma": "σ of ln(prompt tokens) for a lognormal distribution (0: fixed). "
                             "Unitless; 0.5 doubles the p90 over the median roughly 1.9×.",
    "workload.output_sigma": "σ of ln(output tokens) for a lognormal distribution (0: fixed). Unitless.",
    "speculative.draft_tokens": "Tokens the draft model proposes per verify pass (0: speculative decoding off). "
                                f"Default {_D.speculative.draft_tokens}.",
    "speculative.method": "What drafts: eagle (an EAGLE-3 head of the target's own layers), mtp (the model's "
                          "multi-token-prediction module; DeepSeek-V3-class models) or draft_model (a separate "
                          f"catalog model). Default {_D.speculative.method} (draft_model when a draft model is named).",
    "speculative.acceptance": "Probability α that the target accepts each drafted token (given the ones before). "
                              f"Empty: the method's default: mtp {_MTP.per_position[0]:g} "
                              f"({_MTP.origin}; {_MTP_TRT.per_position[0]:g} on serving.engine trtllm; the "
                              f"DeepSeek-V3 report's §5.4.3 "
                              f"{MTP_ACCEPTANCE.per_position[0]:g} where the fitted term is off), eagle "
                              f"{EAGLE_ACCEPTANCE.per_position[0]:g} (EAGLE-3 paper, τ ≈ {EAGLE3_TAU:g} on MT-bench), "
                              f"draft_model {DRAFT_MODEL_ACCEPTANCE.per_position[0]:g} (assumed).",
    "speculative.acceptance_per_position": "Acceptance a_1 … a_K, one per draft position (a shorter list repeats "
                                           "its last); overrides speculative.acceptance.",
    "speculative.draft_cost": "One draft step's time as a fixed fraction of one target decode step. Empty: the "
                              "drafter's own decode step from the step model (the draft model's, the EAGLE head's "
                              "or the MTP block's, at the same batch).",
    "speculative.draft_model": "The separate draft model (a catalog id) whose weights and KV cache are charged "
                               "beside the target's; empty: an EAGLE-style head of the target's own layers.",
    "speculative.draft_layers": "Decoder layers of an EAGLE-style head (the target's shape). Default "
                                f"{_D.speculative.draft_layers}.",
    "speculative.draft_weights_dtype": "Precision of the draft's weights; empty: the target's weights precision.",
    "cost.usd_per_gpu_hour": "Price of one GPU for one hour, in US dollars. Empty: the catalog's default.",
}


def trace_from_upload(data: bytes, *, label: str = "trace") -> tuple[tuple[int, int], ...]:
    """(prompt_tokens, output_tokens) rows from an uploaded CSV's bytes: at most
    TRACE_MAX_BYTES and TRACE_MAX_ROWS, UTF-8, parsed from memory; every problem is one
    ScenarioError naming the row or the limit."""
    if len(data) > TRACE_MAX_BYTES:
        raise ScenarioError(f"{label}: {len(data):,} bytes is more than the {TRACE_MAX_BYTES:,} a trace may have")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ScenarioError(f"{label}: not UTF-8 text (expected a CSV of prompt_tokens,output_tokens)") from None
    try:
        return parse_trace_csv(io.StringIO(text), max_rows=TRACE_MAX_ROWS)
    except OverflowError:
        raise ScenarioError(f"{label}: a token count is too large to be a number of tokens") from None
    except csv.Error as exc:
        raise ScenarioError(f"{label}: not a readable CSV ({exc})") from None
