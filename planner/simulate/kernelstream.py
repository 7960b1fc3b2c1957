"""A request stream as the compiled replica's arrays (planner.simulate.kernel)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.simulate.arrivals import Request

# Nothing here is re-exported by planner.simulate: importing numba is slow, so the compiled
# modules load only when the engine first takes the compiled path (planner.simulate.kernel).
__all__: list[str] = []


@dataclass(frozen=True)
class Stream:
    """A request stream as arrays (request order), its prefixes as key indices."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_key: np.ndarray  # index into the stream's distinct keys, -1: none
    prefix_tokens: np.ndarray
    keys: int  # distinct prefix keys


def stream_arrays(requests: Sequence[Request]) -> Stream:
    n = len(requests)
    index: dict[str, int] = {}
    pkey = np.fromiter((-1 if q.prefix_key is None else index.setdefault(q.prefix_key, len(index)) for q in requests),
                       dtype=np.int64, count=n)
    return Stream(arrival_s=np.fromiter((q.arrival_s for q in requests), dtype=np.float64, count=n),
                  prompt_tokens=np.fromiter((q.prompt_tokens for q in requests), dtype=np.int64, count=n),
                  output_tokens=np.fromiter((q.output_tokens for q in requests), dtype=np.int64, count=n),
                  prefix_key=pkey,
                  prefix_tokens=np.fromiter((q.prefix_tokens for q in requests), dtype=np.int64, count=n),
                  keys=len(index))
