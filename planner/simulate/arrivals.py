"""Requests to simulate: arrival processes, length distributions, chat sessions, traces.

* Poisson: inter-arrival ~ Exp(rate).
* Gamma: inter-arrival ~ Gamma(shape=b, scale=1/(rate·b)) (vLLM's benchmark_serving
  convention): same mean rate, coefficient of variation 1/√b; b = 1 is Poisson,
  b < 1 is burstier.
* Lognormal lengths with a given mean: ln L ~ N(ln mean − σ²/2, σ²).
* Multi-turn chat: a session's turn k prompt = turn k−1's prompt + its output + a new
  message; turn k arrives a think time after turn k−1 finishes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from planner.errors import ScenarioError
from planner.io.csvtext import csv_number, csv_rows
from planner.io.jsonfile import read_text_file
from planner.physics.lengths import draw_lengths, token_count
from planner.simulate.options import MAX_SIM_REQUESTS, SimOptions
from planner.spec.scenario import Scenario

__all__ = [
    "MAX_TRACE_FILE_BYTES",
    "Request",
    "arrival_times",
    "generate_requests",
    "load_trace",
    "parse_request_trace_csv",
]

SYSTEM_PREFIX_KEY = "system"
# A trace file: MAX_SIM_REQUESTS rows of ~60 characters (with a prefix key) is
# ~6 MB; 16 MB leaves room for long keys.  Each row is also held to
# MAX_SEQUENCE_TOKENS tokens and MAX_TRACE_FIELD_CHARS characters per field.
MAX_TRACE_FILE_BYTES = 16_000_000
MAX_TRACE_FIELD_CHARS = 200


@dataclass(frozen=True, slots=True)
class Request:
    """One request. ``parent`` ≥ 0: it arrives ``think_s`` after that request finishes."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_key: str | None = None  # requests with the same key share their first prefix_tokens
    prefix_tokens: int = 0
    parent: int = -1
    think_s: float = 0.0
    cache_on_finish: bool = False  # keep this conversation's KV cached for the next turn


def arrival_times(*, rate_req_s: float, count: int, process: str, burstiness: float,
                  rng: np.random.Generator) -> np.ndarray:
    """Cumulative arrival times (s) of ``count`` requests, the first at its first gap."""
    if not rate_req_s > 0 or not math.isfinite(rate_req_s):
        raise ScenarioError(f"rate_req_s: must be > 0, got {rate_req_s}")
    if process == "poisson":
        gaps = rng.exponential(1.0 / rate_req_s, size=count)
    elif process == "gamma":
        if not burstiness > 0:
            raise ScenarioError(f"burstiness: must be > 0, got {burstiness}")
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate_req_s * burstiness), size=count)
    else:
        raise ScenarioError(f"arrival: expected poisson or gamma, got {process!r}")
    return np.cumsum(gaps)


def generate_requests(scenario: Scenario, options: SimOptions) -> tuple[Request, ...]:
    """The request stream a scenario's workload and the options describe (seeded)."""
    rng = np.random.default_rng(options.seed)
    w = scenario.workload
    rate = options.rate_req_s if options.rate_req_s is not None else w.requests_per_s
    n = options.requests
    if options.lengths == "scenario" and w.distribution == "trace" and w.trace:
        rows = np.asarray(w.trace, dtype=np.int64)[rng.integers(0, len(w.trace), size=n)]
        prompts, outputs = rows[:, 0], rows[:, 1]
    elif options.lengths == "scenario":
        dist = "lognormal" if w.distribution == "lognormal" else "fixed"
        prompts = draw_lengths(mean_tokens=w.prompt_tokens, count=n, distribution=dist, sigma=w.prompt_sigma,
                               rng=rng)
        outputs = draw_lengths(mean_tokens=w.output_tokens, count=n, distribution=dist, sigma=w.output_sigma,
                               rng=rng)
    else:
        prompts = draw_lengths(mean_tokens=w.prompt_tokens, count=n, distribution=options.lengths,
                               sigma=options.length_sigma, rng=rng)
        outputs = draw_lengths(mean_tokens=w.output_tokens, count=n, distribution=options.lengths,
                               sigma=options.length_sigma, rng=rng)
    turns = options.multi_turn
    if turns <= 1:
        times = arrival_times(rate_req_s=rate, count=n, process=options.arrival, burstiness=options.burstiness,
                              rng=rng)
        shared = rng.random(n) < w.prefix_hit_rate if w.prefix_tokens > 0 else np.zeros(n, bool)
        t_l, p_l, o_l = times.tolist(), np.asarray(prompts, dtype=np.int64).tolist(), outputs.tolist()
        if not shared.any():
            return tuple(map(Request, t_l, p_l, o_l))
        ptok = w.prefix_tokens
        return tuple(Request(t, max(p, ptok + 1), o, SYSTEM_PREFIX_KEY, ptok) if sh else Request(t, p, o)
                     for t, p, o, sh in zip(t_l, p_l, o_l, shared.tolist(), strict=True))
    # Multi-turn: sessions start at rate / turns so requests arrive at about ``rate``.
    sessions = math.ceil(n / turns)
    starts = arrival_times(rate_req_s=rate / turns, count=sessions, process=options.arrival,
                           burstiness=options.burstiness, rng=rng)
    thinks = rng.exponential(options.think_s, size=n) if options.think_s > 0 else np.zeros(n)
    out = []
    i = 0
    for sess in range(sessions):
        prev_context = 0
        for turn in range(turns):
            if i >= n:
                break
            message, output = int(prompts[i]), int(outputs[i])
            prompt = prev_context + message
            last = turn == turns - 1 or i == n - 1
            out.append(Request(
                arrival_s=float(starts[sess]) if turn == 0 else 0.0,
                prompt_tokens=prompt, output_tokens=output, prefix_key=f"session-{sess}",
                prefix_tokens=prev_context, parent=-1 if turn == 0 else i - 1,
                think_s=0.0 if turn == 0 else float(thinks[i]), cache_on_finish=not last,
            ))
            prev_context = prompt + output
            i += 1
    return tuple(out)


_TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def parse_request_trace_csv(text: str) -> tuple[Request, ...]:
    """Requests from CSV text with columns arrival_s, prompt_tokens, output_tokens
    (optional prefix_key, prefix_tokens). Arrivals must be sorted; lengths ≥ 1 and
    at most MAX_SEQUENCE_TOKENS; at most MAX_SIM_REQUESTS rows."""
    out: list[Request] = []
    last = -math.inf
    for row_no, row in csv_rows(text, "trace", _TRACE_COLUMNS):
        if len(out) >= MAX_SIM_REQUESTS:
            raise ScenarioError(f"trace: more than {MAX_SIM_REQUESTS:,} rows; the limit is {MAX_SIM_REQUESTS:,}")

        t = csv_number(row, "arrival_s", what="trace", line=row_no, max_chars=MAX_TRACE_FIELD_CHARS)
        if t < 0:
            raise ScenarioError(f"trace.arrival_s: negative at line {row_no}")
        if t < last:
            raise ScenarioError(f"trace.arrival_s: arrivals must be sorted; line {row_no} ({t}) is before "
                                f"the previous one ({last})")
        last = t
        p, o = (token_count(row.get(col) or "", label=f"trace.{col} at line {row_no}")
                for col in ("prompt_tokens", "output_tokens"))
        key = (row.get("prefix_key") or "").strip() or None
        if key is not None and len(key) > MAX_TRACE_FIELD_CHARS:
            raise ScenarioError(f"trace.prefix_key: longer than {MAX_TRACE_FIELD_CHARS} characters at line {row_no}")
        ptok_f = (csv_number(row, "prefix_tokens", what="trace", line=row_no, max_chars=MAX_TRACE_FIELD_CHARS)
                  if key and (row.get("prefix_tokens") or "").strip() else 0.0)
        ptok = int(ptok_f)
        if ptok != ptok_f or not 0 <= ptok <= p:
            raise ScenarioError(f"trace.prefix_tokens: must be a whole number between 0 and prompt_tokens "
                                f"at line {row_no}")
        out.append(Request(t, p, o, key, ptok))
    if not out:
        raise ScenarioError("trace: empty; it needs a header and at least one request row")
    return tuple(out)


def load_trace(path: str | Path) -> tuple[Request, ...]:
    """Read and validate a trace CSV file."""
    return parse_request_trace_csv(read_text_file(path, max_bytes=MAX_TRACE_FILE_BYTES, what="trace"))
