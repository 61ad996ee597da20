"""One writer per run: an advisory ``flock`` on ``<run>/lock``.

The lock is held for as long as a process records into the run and released by the kernel when
that process exits, however it exits (a ``kill -9`` included), so a crashed writer never leaves a
stale lock behind. The file's text names the holder for error messages.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

from rar.errors import RunLockedError, StoreNotWritableError
from rar.store.layout import LOCK_NAME

_ATTEMPTS = 5


class RunLock:
    def __init__(self, run_dir: Path, run_id: str) -> None:
        self.path = run_dir / LOCK_NAME
        self.run_id = run_id
        self._fd = -1

    def acquire(self) -> RunLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreNotWritableError(self.path.parent, exc.strerror or str(exc)) from exc
        for attempt in range(_ATTEMPTS):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt + 1 < _ATTEMPTS:
                    # `is_locked` probes with a brief shared lock: give such a probe time to end
                    time.sleep(0.01)
                    continue
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
                os.close(fd)
                raise RunLockedError(self.run_id, self.path, holder) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise StoreNotWritableError(self.path.parent, exc.strerror or str(exc)) from exc
        self._fd = fd
        return self

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def is_locked(run_dir: Path) -> bool:
    """True when a live process holds the run's lock (a writer is recording it)."""
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
