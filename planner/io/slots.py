"""Machine-wide slots: lock files in a folder, one per slot, held by ``flock`` (the kernel frees
a dead holder's). The probe's worker cap and the PDF printer's cap both count with them."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["try_lock_slot"]


def try_lock_slot(directory: Path, index: int) -> int | None:
    """The open, exclusively locked descriptor of slot ``index`` in ``directory``; None when
    another process holds it (never waits)."""
    fd = os.open(directory / f"slot-{index}", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
