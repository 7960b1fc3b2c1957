"""Fleet sizing: prefill and decode pools, replicas, and the link between them."""

from __future__ import annotations

import math

__all__ = ["pool_groups"]


def pool_groups(
    *, requests_per_s: float, prompt_tokens: float, output_tokens: float,
    prefill_tok_s_per_group: float, decode_tok_s_per_group: float,
) -> tuple[int, int]:
    """(prefill groups, decode groups), each a ceiling of demand / capacity:

    prefill = ceil(req/s × prompt tokens / prefill tok/s per group)
    decode  = ceil(req/s × output tokens / decode tok/s per group)
    """
    prefill = math.ceil(requests_per_s * prompt_tokens / prefill_tok_s_per_group - 1e-9)
    decode = math.ceil(requests_per_s * output_tokens / decode_tok_s_per_group - 1e-9)
    return prefill, decode
