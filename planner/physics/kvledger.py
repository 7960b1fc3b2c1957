"""The KV ledger per layer type: what each kind of attention layer keeps for a sequence.

A sequence of L tokens holds, per layer,

* full attention:     L tokens (the whole context)
* sliding window W:   min(L, W) tokens (gpt-oss: W = 128 on every other layer)
* chunked, chunk C:   min(L, C) tokens (Llama 4's local layers attend within their
                      own C-token chunk; C = 8192 on three of four layers).  The
                      last chunk holds ((L − 1) mod C) + 1, but a sequence that
                      crossed a chunk filled one whole, so capacity counts min(L, C).

and each held token costs, per layer,

* GQA/MHA/MQA:  2 × n_kv_heads × head_dim × dtype_bytes    (K and V)
* MLA:          (kv_lora_rank + qk_rope_head_dim) × dtype_bytes   (the latent, once per layer)

Attention sinks (gpt-oss) are a learned logit per head: parameters, no cached
token, so they add nothing to the ledger (shown as a zero row).

KV bytes for a sequence = Σ over kinds of layers × held tokens × bytes per token per
layer; the per-token figure at a context L is that over L.  Without windowed layers
it is the seeds' linear ``L × KV bytes/token``.

Attention work follows the same ledger: a decode token attends, per layer, to the
tokens that layer holds (``attended_layer_tokens``); a prefill of n new tokens after
c cached ones attends, per layer, to ∫_c^{c+n} held(p) dp token pairs
(``attention_layer_pairs``): n·c + n²/2 for a full layer; for a sliding window W,
G(c+n) − G(c) with G(x) = x²/2 up to W and W²/2 + (x − W)·W beyond; for chunks of
C, F(c+n) − F(c) with F(x) = ⌊x/C⌋·C²/2 + (x mod C)²/2.

Functions accept numpy arrays wherever a token count is expected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planner.spec.derivation import fmt_num
from planner.spec.precision import bytes_per_kv_element
from planner.spec.specs import ModelSpec

__all__ = [
    "KvLedgerRow",
    "attended_layer_tokens",
    "attention_layer_pairs",
    "held_tokens",
    "kv_bytes_per_layer_token",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token_at",
    "kv_ledger",
    "kv_ledger_text",
]

Arr = NDArray[np.float64]


@dataclass(frozen=True)
class KvLedgerRow:
    """One kind of attention layer in a sequence's KV ledger."""

    kind: str  # "full", "sliding", "chunked" or "sinks"
    layers: int
    window_tokens: int | None  # the window or chunk (None: the whole context)
    held_tokens: float  # tokens each layer of this kind holds for the sequence
    bytes_per_token_per_layer: float
    bytes: float  # layers × held tokens × bytes per token per layer


def kv_bytes_per_layer_token(model: ModelSpec, kv_dtype: str) -> float:
    """Bytes one layer stores per held token: 2 × n_kv_heads × head_dim × b (GQA) or
    (kv_lora_rank + qk_rope_head_dim) × b (MLA's latent, once per layer)."""
    b = bytes_per_kv_element(kv_dtype)
    if model.attention == "mla":
        assert model.kv_lora_rank is not None and model.qk_rope_head_dim is not None
        return float((model.kv_lora_rank + model.qk_rope_head_dim) * b)
    return float(2 * model.kv_heads * model.head_dim * b)


def _window(model: ModelSpec, kind: str) -> int | None:
    if kind == "sliding":
        return model.sliding_window
    if kind == "chunked":
        return model.attention_chunk_size
    return None


def held_tokens(tokens: ArrayLike, window_tokens: int | None) -> Arr | float:
    """Tokens one layer holds for a sequence of ``tokens``: min(L, window), or L for a full layer."""
    t = np.maximum(np.asarray(tokens, float), 0.0)
    out = t if window_tokens is None else np.minimum(t, float(window_tokens))
    return float(out) if np.ndim(out) == 0 else out


def kv_bytes_per_sequence(model: ModelSpec, kv_dtype: str, tokens: ArrayLike) -> Arr | float:
    """KV bytes a sequence of ``tokens`` holds over all layers: Σ layers × min(L, window) × bytes/token/layer."""
    per = kv_bytes_per_layer_token(model, kv_dtype)
    t = np.maximum(np.asarray(tokens, float), 0.0)
    held = np.zeros_like(t)
    for kind, count in model.attention_layer_counts.items():
        held = held + count * np.asarray(held_tokens(t, _window(model, kind)), float)
    out = held * per
    return float(out) if np.ndim(out) == 0 else out


def kv_bytes_per_token_at(model: ModelSpec, kv_dtype: str, context_tokens: ArrayLike) -> Arr | float:
    """KV bytes per token of a sequence at ``context_tokens`` = KV bytes per sequence / L.

    Constant (the full-attention figure) without windowed layers; for gpt-oss and
    Llama 4 it falls with context as the windowed layers stop growing.  A context
    below one token is taken as one (the first token's KV)."""
    t = np.maximum(np.asarray(context_tokens, float), 1.0)
    out = np.asarray(kv_bytes_per_sequence(model, kv_dtype, t), float) / t
    return float(out) if np.ndim(out) == 0 else out


def kv_ledger(model: ModelSpec, kv_dtype: str, tokens: float) -> tuple[KvLedgerRow, ...]:
    """The ledger rows (one per attention kind present, plus sinks where the model has them)."""
    per = kv_bytes_per_layer_token(model, kv_dtype)
    rows = []
    for kind, count in model.attention_layer_counts.items():
        window = _window(model, kind)
        held = float(held_tokens(tokens, window))
        rows.append(KvLedgerRow(kind=kind, layers=count, window_tokens=window, held_tokens=held,
                                bytes_per_token_per_layer=per, bytes=count * held * per))
    if model.attention_sinks:
        rows.append(KvLedgerRow(kind="sinks", layers=model.layers, window_tokens=0, held_tokens=0.0,
                                bytes_per_token_per_layer=per, bytes=0.0))
    return tuple(rows)


def kv_ledger_text(model: ModelSpec, kv_dtype: str, tokens: float) -> tuple[str, str]:
    """(formula, substituted) of the KV per sequence, ledger row by row, for a Derivation."""
    rows = kv_ledger(model, kv_dtype, tokens)
    per_label = ("(kv_lora_rank + qk_rope_head_dim) × dtype_bytes" if model.attention == "mla"
                 else "2 × n_kv_heads × head_dim × dtype_bytes")
    parts_f, parts_s = [], []
    for row in rows:
        if row.kind == "full":
            parts_f.append("full layers × context")
            parts_s.append(f"{row.layers} × {fmt_num(tokens)}")
        elif row.kind == "sinks":
            parts_f.append("attention sinks × 0 (learned logits, no cached token)")
            parts_s.append(f"{row.layers} × 0")
        else:
            label = "sliding-window" if row.kind == "sliding" else "chunked"
            name = "window" if row.kind == "sliding" else "chunk"
            parts_f.append(f"{label} layers × min(context, {name})")
            parts_s.append(f"{row.layers} × min({fmt_num(tokens)}, {row.window_tokens})")
    formula = f"({' + '.join(parts_f)}) × {per_label}"
    substituted = f"({' + '.join(parts_s)}) × {fmt_num(rows[0].bytes_per_token_per_layer)}"
    return formula, substituted


def attended_layer_tokens(model: ModelSpec, context_tokens: ArrayLike) -> Arr | float:
    """Σ over layers of the tokens one decode token attends to at ``context_tokens``
    (layers × context for a model whose layers are all full)."""
    t = np.maximum(np.asarray(context_tokens, float), 0.0)
    out = np.zeros_like(t)
    for kind, count in model.attention_layer_counts.items():
        out = out + count * np.asarray(held_tokens(t, _window(model, kind)), float)
    return float(out) if np.ndim(out) == 0 else out


def _pairs_to(x: Arr, kind: str, window: int | None) -> Arr:
    """∫_0^x held(p) dp: the causal token pairs of the first x tokens in one layer."""
    if window is None:
        return x * x / 2.0
    w = float(window)
    if kind == "sliding":
        return np.where(x <= w, x * x / 2.0, w * w / 2.0 + (x - w) * w)
    rem = np.mod(x, w)
    return np.floor(x / w) * w * w / 2.0 + rem * rem / 2.0


def attention_layer_pairs(model: ModelSpec, new_tokens: ArrayLike, cached_tokens: ArrayLike) -> Arr | float:
    """Σ over layers of the (query, key) pairs a prefill of ``new_tokens`` after
    ``cached_tokens`` attends: layers × (n·c + n²/2) for all-full layers; windowed
    layers count only the tokens they hold."""
    n = np.maximum(np.asarray(new_tokens, float), 0.0)
    c = np.maximum(np.asarray(cached_tokens, float), 0.0)
    out = np.zeros(np.broadcast(n, c).shape)
    for kind, count in model.attention_layer_counts.items():
        window = _window(model, kind)
        if window is None:
            out = out + count * (n * c + n * n / 2.0)
        else:
            out = out + count * (_pairs_to(c + n, kind, window) - _pairs_to(c, kind, window))
    return float(out) if np.ndim(out) == 0 else out
