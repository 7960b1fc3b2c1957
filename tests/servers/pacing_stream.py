"""The pacing server's streams as bytes: its chunk JSON, and each stream shape's
framed writes and schedule (:class:`Plan`), built once and shared by every
stream of that shape.  Imported by ``pacing_server`` (and through it by
``bench/probe_client.py``, which rebuilds the stream the client reads).
"""

from __future__ import annotations

import argparse
import json

SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
LAST_CHUNK = b"0\r\n\r\n"


def _chunk(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _token(chat: bool, i: int, finish: str | None = None, k: int = 1) -> dict:
    text = "".join(f"t{j % 10} " for j in range(i, i + k))
    if chat:
        return {"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    return {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def _chunk_sizes(pattern: tuple[int, ...], n: int) -> list[int]:
    """Tokens per chunk for an ``n``-token stream: ``pattern`` repeated, the last chunk cut to fit."""
    out: list[int] = []
    while sum(out) < n:
        out.append(min(pattern[len(out) % len(pattern)], n - sum(out)))
    return out


def _framed(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


class Plan:
    """One stream shape's writes, built once and shared by every stream of that shape:
    ``first`` (head and role chunk, at once), then ``pieces[i]`` at ``offsets_s[i]`` after
    the request arrived, carrying ``tokens[i]`` tokens and ``logged[i]`` clock readings."""

    __slots__ = ("first", "logged", "offsets_s", "pieces", "tokens")

    def __init__(self, cfg: argparse.Namespace, chat: bool, n: int, include_usage: bool, prompt_tokens: int) -> None:
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        role = _chunk({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
        self.first = SSE_HEAD + (_framed(role) if chat else b"")
        self.offsets_s: list[float] = []
        self.pieces: list[bytes] = []
        self.tokens: list[int] = []
        self.logged: list[int] = []
        tail = (_chunk({"choices": [], "usage": usage}) if chat and include_usage else b"") + b"data: [DONE]\n\n"
        if cfg.tpot_s == 0:  # the whole stream at once, one clock reading
            blob = b"".join(_chunk(_token(chat, i, "length" if i == n - 1 else None)) for i in range(n))
            self._add(cfg.ttft_s, blob, n, 1)
        else:
            i = 0
            for k in _chunk_sizes(cfg.chunk_tokens, n):
                last = i + k - 1  # the chunk goes out when its last token is due
                tok = _token(chat, i, "length" if last == n - 1 else None, k)
                if last == n - 1 and include_usage and not chat:
                    tok["usage"] = usage
                self._add(cfg.ttft_s + last * cfg.tpot_s, _chunk(tok), k, k)
                i += k
        if self.pieces:  # the end goes with the last chunk: usage, [DONE] and the last HTTP chunk in one write
            self.pieces[-1] += _framed(tail) + LAST_CHUNK
        else:
            self.first += _framed(tail) + LAST_CHUNK

    def _add(self, offset_s: float, data: bytes, tokens: int, logged: int) -> None:
        self.offsets_s.append(offset_s)
        self.pieces.append(_framed(data))
        self.tokens.append(tokens)
        self.logged.append(logged)
