"""The command line's output, written whole or not at all silently.

``python -m planner probe --samples --format json`` prints about 70 kB; a pipe
holds 64 KiB.  A write to a pipe whose file description has been made
non-blocking (an event loop such as uvloop may do that to the standard streams,
and it is shared with every process holding the same pipe end) stops at what
the pipe holds and raises ``BlockingIOError`` for the rest: the reader got
exactly 65,536 bytes, and the process still exited 0.  :func:`write_all` writes
every byte itself: it loops over partial writes, waits for the pipe to drain
when a write would block (at most :data:`OUTPUT_STALL_S` without any progress),
and raises :class:`OutputError` (a message with the byte counts) when the reader
has gone or the output cannot be finished.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import sys
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["OUTPUT_CHUNK_BYTES", "OUTPUT_STALL_S", "OutputError", "flush_stream", "whole_stdout", "write_all",
           "write_text"]

# How long a reader may take no byte at all before the output is given up: a
# person paging with `less` can take a while; a reader that never reads again is
# a stuck pipeline, which then fails with a message instead of hanging forever.
OUTPUT_STALL_S = 600.0
OUTPUT_CHUNK_BYTES = 1 << 16  # one write call at most (a pipe's default capacity)


class OutputError(Exception):
    """The output could not be written whole (the message says how much was)."""


def _blocking(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.set_blocking(fd, True)


def write_all(fd: int, data: bytes, *, what: str = "stdout", stall_s: float = OUTPUT_STALL_S) -> int:
    """Write every byte of ``data`` to ``fd``; return the count, or raise
    :class:`OutputError` naming ``what`` and how many bytes of how many went out.
    The descriptor's mode is left as it is (the flag is shared with other holders of
    the pipe): a blocking one blocks as any program's output does; on a non-blocking
    one each write that would block waits for room, at most ``stall_s`` each time."""
    view = memoryview(data)
    done = 0
    total = len(view)
    while done < total:
        try:
            n = os.write(fd, view[done:done + OUTPUT_CHUNK_BYTES])
        except BlockingIOError:  # made non-blocking again meanwhile: wait for room
            _, ready, _ = select.select([], [fd], [], stall_s)
            if not ready:
                raise OutputError(f"{what}: the reader took nothing for {stall_s:g} s; the output is cut after "
                                  f"{done:,} of {total:,} bytes") from None
            continue
        except BrokenPipeError:
            raise OutputError(f"{what}: the reader closed the pipe after {done:,} of {total:,} bytes; "
                              "the output is incomplete") from None
        except OSError as exc:
            raise OutputError(f"{what}: cannot write ({exc.strerror or exc}) after {done:,} of {total:,} bytes; "
                              "the output is incomplete") from None
        if n <= 0:
            raise OutputError(f"{what}: the write made no progress after {done:,} of {total:,} bytes")
        done += n
    return done


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None  # a StringIO, pytest's capsys, a closed stream


def flush_stream(stream: TextIO, *, what: str = "stdout") -> None:
    """Flush ``stream``'s buffer (its descriptor put back in blocking mode first);
    a failure is an :class:`OutputError`."""
    fd = _fileno(stream)
    if fd is not None:
        _blocking(fd)
    try:
        stream.flush()
    except BrokenPipeError:
        raise OutputError(f"{what}: the reader closed the pipe; the output is incomplete") from None
    except OSError as exc:  # BlockingIOError included: part of the buffer did not go out
        raise OutputError(f"{what}: cannot write ({exc.strerror or exc}); the output is incomplete") from None


def write_text(stream: TextIO, text: str, *, what: str = "stdout") -> None:
    """Write ``text`` to ``stream`` whole: through its descriptor with
    :func:`write_all` when it has one (after flushing what it buffered, so the
    order is kept), else through the stream itself."""
    fd = _fileno(stream)
    if fd is None:
        stream.write(text)
        flush_stream(stream, what=what)
        return
    flush_stream(stream, what=what)
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or "strict"
    write_all(fd, text.encode(encoding, errors), what=what)


class _WholeWrites(io.RawIOBase):
    """A raw stream over a descriptor whose every write is :func:`write_all`."""

    def __init__(self, fd: int, what: str) -> None:
        super().__init__()
        self._fd, self._what = fd, what
        self._failed = False  # after one OutputError the rest is dropped (said once, not again at exit)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, b: Any) -> int:
        data = bytes(b)
        if self._failed:
            return len(data)
        try:
            return write_all(self._fd, data, what=self._what)
        except OutputError:
            self._failed = True
            raise
    # close() is RawIOBase's: it marks the stream closed and never closes the process's stdout


@contextlib.contextmanager
def whole_stdout() -> Iterator[None]:
    """While inside, ``print()`` to stdout writes whole or raises :class:`OutputError`
    (a non-blocking pipe loses nothing, a closed one is an error): sys.stdout is a
    text stream over :class:`_WholeWrites`.  A stdout without a descriptor (a
    StringIO, pytest's capsys) is left as it is."""
    old = sys.stdout
    fd = _fileno(old) if old is not None else None
    if fd is None:
        yield
        return
    flush_stream(old)
    new = io.TextIOWrapper(io.BufferedWriter(_WholeWrites(fd, "stdout")), encoding=old.encoding or "utf-8",
                           errors=old.errors or "strict", line_buffering=bool(getattr(old, "line_buffering", False)), write_through=False)
    sys.stdout = new
    try:
        yield
        new.flush()
    finally:
        sys.stdout = old
        with contextlib.suppress(Exception):
            new.detach()  # the buffer and raw stream go; the descriptor stays open
