"""The SSE reader's lean hot path: however the bytes are cut into reads, the
record is the same (each event timed by the read that completed it, parsed in
bulk afterwards), and a failure keeps only events whose tokens are known."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.probe.client import (
    PARSE_BATCH_BYTES,
    RequestRecord,
    _MalformedSse,
    _read_events,
    max_stream_events,
)


class _Reads:
    """A stand-in for aiohttp's StreamReader: ``readany`` hands out the given pieces, then EOF."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.served = 0

    async def readany(self) -> bytes:
        if not self.pieces:
            return b""
        self.served += 1
        return self.pieces.pop(0)


def _stream(texts: list[str], *, crlf: bool, comments: bool, usage: bool) -> bytes:
    nl = b"\r\n" if crlf else b"\n"
    out = [b"data: " + json.dumps({"choices": [{"delta": {"role": "assistant"}}]}).encode() + nl + nl]
    for i, t in enumerate(texts):
        if comments:
            out.append(b": keep-alive" + nl)
        finish = "length" if i == len(texts) - 1 else None
        out.append(b"data: " + json.dumps({"choices": [{"delta": {"content": t}, "finish_reason": finish}]}).encode()
                   + nl + nl)
    if usage:
        out.append(b"data:" + json.dumps({"choices": [], "usage": {"completion_tokens": 7}}).encode() + nl + nl)
    out.append(b"data: [DONE]" + nl + nl)
    return b"".join(out)


def _cut(blob: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({c % (len(blob) + 1) for c in cuts} | {0, len(blob)})
    return [blob[a:b] for a, b in zip(at, at[1:], strict=False) if b > a]


def _read(pieces: list[bytes], max_tokens: int = 64) -> tuple[RequestRecord, bool, _Reads]:
    rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
    reads = _Reads(pieces)
    done = asyncio.run(_read_events(reads, rec, [], max_stream_events(max_tokens)))  # type: ignore[arg-type]
    return rec, done, reads


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.sampled_from(["a", "", "bc", " ", "é", "\n"]), min_size=1, max_size=20),
       crlf=st.booleans(), comments=st.booleans(), usage=st.booleans(),
       cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_any_cut_into_reads_gives_the_same_record(texts, crlf, comments, usage, cuts):
    blob = _stream(texts, crlf=crlf, comments=comments, usage=usage)
    whole, done_whole, _ = _read([blob])
    cut, done_cut, _ = _read(_cut(blob, cuts))
    assert done_whole and done_cut
    # one time per data event (the role chunk, every token chunk, the usage chunk; not [DONE])
    assert len(cut.chunk_ns) == len(cut.chunk_tokens) == 1 + len(texts) + usage
    assert cut.chunk_tokens == whole.chunk_tokens == [0] + [1 if t else 0 for t in texts] + [0] * usage
    assert cut.chunk_ns == sorted(cut.chunk_ns)  # read times, in order
    assert cut.finish_reason == whole.finish_reason == "length"
    assert cut.usage == whole.usage == ({"completion_tokens": 7} if usage else None)
    assert (cut.first_token_ns is None) == (not any(texts))


def test_a_long_stream_is_parsed_in_batches_with_the_times_of_its_reads():
    texts = ["tok"] * 400  # about 30 KB of events: several PARSE_BATCH_BYTES batches
    blob = _stream(texts, crlf=False, comments=False, usage=True)
    assert len(blob) > 3 * PARSE_BATCH_BYTES
    pieces = [blob[i:i + 997] for i in range(0, len(blob), 997)]
    rec, done, reads = _read(pieces, max_tokens=400)
    assert done and reads.served == len(pieces)
    assert rec.chunk_tokens == [0] + [1] * 400 + [0] and len(rec.chunk_ns) == 402
    assert rec.first_token_ns == rec.chunk_ns[1] and rec.last_token_ns == rec.chunk_ns[400]


@pytest.mark.parametrize("bad", [b"data: {not json}\n\n", b"data: [1, 2]\n\n", b'data: {"error": "boom"}\n\n',
                                 b"what is this\n\n"])
def test_a_malformed_event_keeps_what_came_before_it_aligned(bad):
    good = _stream(["a", "b"], crlf=False, comments=False, usage=False).replace(b"data: [DONE]\n\n", b"")
    rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
    pending: list[bytes] = []
    with pytest.raises(_MalformedSse):
        asyncio.run(_read_events(_Reads([good, bad, good]), rec, pending, 64))  # type: ignore[arg-type]
    # the three events before the fault are kept, each time with its token count; nothing after it
    assert rec.chunk_tokens == [0, 1, 1] and len(rec.chunk_ns) == 3 and not pending
    assert rec.token_times_ns() == rec.chunk_ns[1:]
