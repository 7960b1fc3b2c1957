"""Writing a file the user named, all or nothing: a temporary file beside it,
fsynced, then renamed over it, so a reader never sees half a report and a
failure leaves the old file (or none) in place."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from planner.errors import PlannerError

__all__ = ["write_bytes_atomic"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _why(exc: OSError) -> str:
    """The OS's reason, with what it means for a full or read-only disk."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full ({exc.strerror}); nothing was written: free some space"
    if exc.errno == errno.EROFS:
        return f"the disk is read-only ({exc.strerror}); nothing was written: write somewhere else"
    return str(exc.strerror or exc)


def write_bytes_atomic(path: str | Path, data: bytes, *, flag: str = "--out") -> Path:
    """Write ``data`` to ``path`` atomically; PlannerError (naming ``flag``) for a
    directory, a missing folder or an OS error.  The file gets the usual
    permissions (0666 less the umask), not a temporary file's 0600."""
    target = Path(path)
    if target.is_dir():
        raise PlannerError(f"{flag}: {target} is a directory; give a file name")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise PlannerError(f"{flag}: the folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise PlannerError(f"{flag}: cannot write in {folder}: {_why(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise PlannerError(f"{flag}: cannot write {target}: {_why(exc)}") from None
    return target
