"""SSE and HTTP/1.1 framing the raw-asyncio test servers share (hostile_server, fault_server).

Importable as ``servers.sse_frames`` (tests) and from the servers run as scripts
(they put ``tests/`` on their path first).
"""

from __future__ import annotations

import json

SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n")
DONE = b"data: [DONE]\n\n"


def chunked(data: bytes) -> bytes:
    """One HTTP/1.1 chunk (``chunked(b"")`` is the last one)."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def event(obj: object) -> bytes:
    """One SSE event carrying ``obj`` as JSON."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def tok(i: int, finish: str | None = None) -> dict:
    """A completions chunk carrying token ``i``."""
    return {"choices": [{"index": 0, "text": f"w{i} ", "finish_reason": finish}]}


def ok_stream(tokens: int) -> bytes:
    """A complete ``tokens``-token completions stream (usage, [DONE]) as one chunked 200 response."""
    events = b"".join(event(tok(i, "length" if i == tokens - 1 else None)) for i in range(tokens))
    events += event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": tokens}})
    return SSE_HEAD + chunked(events + DONE) + chunked(b"")
