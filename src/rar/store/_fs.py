"""Durable-file helpers shared by the store: atomic replace and append-only files."""

from __future__ import annotations

import os
from pathlib import Path

from rar.errors import AppendError


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new, renamed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never half.

    Raises :class:`AppendError` (the old file is left as it was) when the disk is full or an
    I/O error occurs.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise AppendError(path, exc.strerror or str(exc), what="file") from exc


class AppendOnlyFile:
    """An ``O_APPEND`` file that never keeps a partial write.

    A write that fails part-way (disk full, I/O error) is cut back to the last complete write
    before :class:`AppendError` is raised. If even the cut fails, the file refuses further
    writes until a later attempt manages it, so no new data is ever appended after a fragment.
    """

    def __init__(self, path: Path, *, what: str, new: bool = False, size: int = 0) -> None:
        self.path = path
        self.what = what
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_EXCL if new else 0)
        try:
            self._fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise AppendError(path, f"cannot open: {exc.strerror}", what=what) from exc
        self.size = size
        self._partial = False
        self.unsynced = False

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes (a torn tail found on open) and make that durable."""
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError as exc:
            raise AppendError(self.path, f"cannot repair: {exc.strerror}", what=self.what) from exc
        self.size = size

    def write(self, data: bytes, *, sync: bool = False) -> None:
        if self._partial:
            self._cut()
            if self._partial:
                raise AppendError(
                    self.path,
                    "an earlier partial write could not be removed yet",
                    what=self.what,
                    rolled_back=False,
                )
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.write(self._fd, view[written:])
            if sync:
                os.fsync(self._fd)
        except OSError as exc:
            self._cut()
            raise AppendError(
                self.path, exc.strerror or str(exc), what=self.what, rolled_back=not self._partial
            ) from exc
        self.size += len(data)
        self.unsynced = not sync

    def _cut(self) -> None:
        try:
            os.ftruncate(self._fd, self.size)
            self._partial = False
        except OSError:
            self._partial = True

    def sync(self) -> None:
        if self.unsynced:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise AppendError(
                    self.path, f"fsync failed: {exc.strerror}", what=self.what
                ) from exc
            self.unsynced = False

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.sync()
            finally:
                os.close(self._fd)
                self._fd = -1

    def discard(self) -> None:
        """Close and delete the file (a new file whose first write failed)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)
