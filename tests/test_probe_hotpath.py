"""The SSE reader's lean hot path: however the bytes are cut into reads, the
record is the same (each event timed by the read that completed it, parsed in
bulk afterwards), whatever the line ends (CRLF, LF, lone CR, a cut between CR
and LF) and with comment lines anywhere; a failure keeps only events whose
tokens are known."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.probe import sse
from planner.probe.record import RequestRecord
from planner.probe.sse import PARSE_BATCH_BYTES, MalformedSse, max_stream_events, read_events


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


ENDS = (b"\n", b"\r\n", b"\r")


def _stream(texts: list[str], *, ends: list[int], comments: bool, usage: bool) -> bytes:
    """A chat stream: role chunk, one chunk per text, optional usage chunk, [DONE]; the lines of
    event k end with ENDS[ends[k % len(ends)]] (mixed line ends; one style within an event, since
    a CR line end followed by an LF one would be a single CRLF), comment lines among them if asked."""
    events: list[list[bytes]] = [[b"data: " + json.dumps({"choices": [{"delta": {"role": "assistant"}}]}).encode()]]
    for i, t in enumerate(texts):
        finish = "length" if i == len(texts) - 1 else None
        data = b"data: " + json.dumps({"choices": [{"delta": {"content": t}, "finish_reason": finish}]}).encode()
        if not comments:
            events.append([data])
        else:
            events.append([b": keep-alive", b"event: token", data] if i % 2 else [b":", data, b":x"])
    if usage:
        events.append([b"data:" + json.dumps({"choices": [], "usage": {"completion_tokens": 7}}).encode()])
    events.append([b"data: [DONE]"])
    out = []
    for k, lines in enumerate(events):
        end = ENDS[ends[k % len(ends)]]
        out.append(b"".join(line + end for line in [*lines, b""]))
    return b"".join(out)


def _cut(blob: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({c % (len(blob) + 1) for c in cuts} | {0, len(blob)})
    return [blob[a:b] for a, b in zip(at, at[1:], strict=False) if b > a]


def _read(pieces: list[bytes], max_tokens: int = 64) -> tuple[RequestRecord, bool, _Reads]:
    """Read ``pieces`` on a clock that reads the number of reads served so far."""
    rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
    reads = _Reads(pieces)
    with mock.patch.object(sse, "time", SimpleNamespace(perf_counter_ns=lambda: reads.served)):
        done = asyncio.run(read_events(reads, rec, [], max_stream_events(max_tokens)))
    return rec, done, reads


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(st.sampled_from(["a", "", "bc", " ", "é", "\n", "\r\n"]), min_size=1, max_size=20),
       ends=st.lists(st.integers(0, 2), min_size=1, max_size=8), comments=st.booleans(), usage=st.booleans(),
       cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_any_cut_into_reads_gives_the_same_record(texts, ends, comments, usage, cuts):
    blob = _stream(texts, ends=ends, comments=comments, usage=usage)
    whole, done_whole, _ = _read([blob])
    pieces = _cut(blob, cuts)
    cut, done_cut, reads = _read(pieces)
    assert done_whole and done_cut and reads.served == len(pieces)
    # one time per data event (the role chunk, every token chunk, the usage chunk; not [DONE])
    assert cut.chunks == whole.chunks == 1 + len(texts) + usage and not cut.chunk_ns  # every event folded in
    assert cut.token_chunks == whole.token_chunks == sum(1 for t in texts if t)
    assert cut.itl_count == whole.itl_count == max(cut.token_chunks - 1, 0) == len(cut.itl_kept_ns)
    assert cut.finish_reason == whole.finish_reason == "length"
    assert cut.usage == whole.usage == ({"completion_tokens": 7} if usage else None)
    # one read: every event at that read's time; cut: each at the read that completed it, in order
    assert whole.last_chunk_ns == 1 and list(whole.itl_kept_ns) == [0] * whole.itl_count
    assert 1 <= (cut.last_chunk_ns or 0) <= len(pieces) and all(g >= 0 for g in cut.itl_kept_ns)
    if cut.first_token_ns is not None:
        assert cut.last_token_ns == cut.first_token_ns + sum(cut.itl_kept_ns) and cut.first_token_ns >= 1
    assert (cut.first_token_ns is None) == (whole.first_token_ns is None) == (not any(texts))


def test_the_time_of_an_event_is_the_read_that_completed_it():
    """A cut between CR and LF: the line ended at the CR, so the event is complete at that read."""
    event = b'data: {"choices": [{"text": "x"}]}\r\n\r\n'
    cr = event.rindex(b"\r")
    rec, done, _ = _read([event[:cr + 1], event[cr + 1:] + b"data: [DONE]\r\n\r\n"])
    assert done and rec.chunks == rec.token_chunks == 1 and rec.last_chunk_ns == 1 and rec.first_token_ns == 1


def test_a_lone_cr_ends_lines():
    rec, done, _ = _read([b'data: {"choices": [{"text": "x", "finish_reason": "stop"}]}\r\r: c\rdata: [DONE]\r\r'])
    assert done and rec.chunks == rec.token_chunks == 1 and rec.finish_reason == "stop"


def test_a_long_stream_is_parsed_in_batches_with_the_times_of_its_reads():
    texts = ["tok"] * 400  # about 30 KB of events: several PARSE_BATCH_BYTES batches
    blob = _stream(texts, ends=[0], comments=False, usage=True)
    assert len(blob) > 3 * PARSE_BATCH_BYTES
    pieces = [blob[i:i + 997] for i in range(0, len(blob), 997)]
    rec, done, reads = _read(pieces, max_tokens=400)
    assert done and reads.served == len(pieces)
    assert rec.chunks == 402 and rec.token_chunks == 400 and rec.itl_count == 399 and not rec.chunk_ns
    assert 1 <= rec.first_token_ns <= rec.last_token_ns <= rec.last_chunk_ns == len(pieces)
    assert rec.itl_sum_ns == sum(rec.itl_kept_ns) == rec.last_token_ns - rec.first_token_ns


@pytest.mark.parametrize("bad", [b"data: {not json}\n\n", b"data: [1, 2]\n\n", b'data: {"error": "boom"}\n\n',
                                 b"what is this\n\n", b'data: {"a": 1} trailing\n\n'])
def test_a_malformed_event_keeps_what_came_before_it_aligned(bad):
    good = _stream(["a", "b"], ends=[0], comments=False, usage=False).replace(b"data: [DONE]\n\n", b"")
    rec = RequestRecord(index=0, warmup=False, scheduled_ns=0)
    pending: list[bytes] = []
    with pytest.raises(MalformedSse):
        asyncio.run(read_events(_Reads([good, bad, good]), rec, pending, 64))
    # the three events before the fault are kept, each time with its token count; nothing after it
    assert rec.chunks == 3 and rec.token_chunks == 2 and not rec.chunk_ns and not pending
    assert rec.itl_count == 1 and rec.last_token_ns == rec.first_token_ns + rec.itl_kept_ns[0]
