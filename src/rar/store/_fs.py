"""File helpers shared by the store: atomic replace, append-only files, and reading run files
without following symbolic links."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rar.errors import AppendError

log = logging.getLogger("rar.store")


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new, renamed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each made durable in its parent directory.

    A new directory entry survives a power loss only once its parent directory is fsynced: a
    run directory whose events were all fsynced would otherwise vanish with them.
    """
    missing = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another writer
            directory.mkdir()
        fsync_dir(directory.parent)  # durable either way


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


WhileSyncing = Callable[[], Callable[[], None] | None]
"""A hook run while a record is made durable; what it returns (if anything) is run once it is."""


def call_hook(hook: Callable[[], Any]) -> Any:
    """``hook()``'s value, or None when it raised: what it raises is logged, never raised (a
    caller's work done while a record is made durable must not undo the record)."""
    try:
        return hook()
    except Exception:
        log.warning("a hook run while a record was made durable failed", exc_info=True)
        return None


_SYNC_FILE_RANGE_WRITE = 2
_FALLOC_FL_KEEP_SIZE = 1
RESERVE_BYTES = 128 * 1024
_NO_RESERVE = 1 << 62  # a file system that cannot reserve: never asked again
_libc: dict[str, Any] = {}  # libc functions looked up at first use; None where there are none


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes at ``offset`` of ``fd`` to disk now
    (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``): a hint, durable only after fsync. Does
    nothing where the call is missing or fails."""
    function = _libc_function("sync_file_range")
    if function is not None:
        function(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def reserve_space(fd: int, offset: int, length: int) -> bool:
    """Allocate blocks for ``length`` bytes at ``offset`` without changing the file's size
    (Linux ``fallocate(FALLOC_FL_KEEP_SIZE)``); False where that cannot be done."""
    function = _libc_function("fallocate")
    return function is not None and function(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0


def _libc_function(name: str) -> Any:
    """libc's ``sync_file_range`` or ``fallocate`` (looked up once), or None where there is
    none (not Linux, not found)."""
    if name in _libc:
        return _libc[name]
    function = None
    if sys.platform.startswith("linux"):
        import ctypes
        import ctypes.util

        off = ctypes.c_longlong
        argtypes = {
            "sync_file_range": [ctypes.c_int, off, off, ctypes.c_uint],
            "fallocate": [ctypes.c_int, ctypes.c_int, off, off],
        }[name]
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            function = getattr(libc, name)
        except (OSError, AttributeError):
            function = None
        else:
            function.argtypes = argtypes
            function.restype = ctypes.c_int
    _libc[name] = function
    return function


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
        self._reserved = 0  # the file's blocks are allocated up to here (see _reserve)
        if not new:
            self._release_reserve()  # one a writer that crashed left behind

    def _release_reserve(self) -> None:
        """Free blocks allocated beyond the file's end (its contents and size unchanged)."""
        with contextlib.suppress(OSError):
            info = os.fstat(self._fd)
            if info.st_blocks * 512 > info.st_size + 2 * 4096:
                os.ftruncate(self._fd, info.st_size)

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes (a torn tail found on open) and make that durable."""
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError as exc:
            raise AppendError(self.path, f"cannot repair: {exc.strerror}", what=self.what) from exc
        self.size = size

    def write(
        self, data: bytes, *, sync: bool = False, while_syncing: WhileSyncing | None = None
    ) -> None:
        """Append ``data`` whole (and make it durable when ``sync``).

        ``while_syncing`` is called once ``data`` is written and before it is durable; with
        ``sync`` the disk is first told to start writing it, so that the call's work overlaps
        the write (an fsync then waits for less). What it returns, if anything, is called the
        moment the write is done (durable when ``sync``), never when it failed. Neither fails
        the write: what they raise is logged."""
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
        done = None
        try:
            if sync and self.size + len(data) > self._reserved:
                self._reserve(len(data))
            while written < len(view):
                written += os.write(self._fd, view[written:])
            if while_syncing is not None:
                if sync:
                    start_writeback(self._fd, self.size, len(data))
                done = call_hook(while_syncing)
            if sync:
                os.fsync(self._fd)
        except OSError as exc:
            self._cut()
            raise AppendError(
                self.path, exc.strerror or str(exc), what=self.what, rolled_back=not self._partial
            ) from exc
        self.size += len(data)
        self.unsynced = not sync
        if done is not None:
            call_hook(done)

    def _reserve(self, needed: int) -> None:
        """Allocate the file's next blocks ahead of its end, its size unchanged (Linux
        ``fallocate(FALLOC_FL_KEEP_SIZE)``): an fsync of an append then has no blocks to
        allocate. Released when the file is closed; a file system without it goes on without."""
        length = max(RESERVE_BYTES, needed)
        if reserve_space(self._fd, self.size, length):
            self._reserved = self.size + length
        else:
            self._reserved = _NO_RESERVE

    def _cut(self) -> None:
        try:
            os.ftruncate(self._fd, self.size)
            self._partial = False
            self._reserved = min(self._reserved, self.size)  # the cut freed the reserve
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
                if self.size < self._reserved < _NO_RESERVE:  # give back what was reserved
                    self._release_reserve()
            finally:
                os.close(self._fd)
                self._fd = -1

    def discard(self) -> None:
        """Close and delete the file (a new file whose first write failed)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)


def read_regular(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file, not a symbolic link.

    A link in a run directory could serve a file from outside the store, so it is never followed:
    OSError ``ELOOP`` for a link, ``EINVAL`` for a directory, FIFO, socket or device.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def not_regular(path: Path) -> str | None:
    """Why ``path`` is not a regular file (a symbolic link, ...); None when it is or is absent."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(mode):
        return "is a symbolic link (not followed: it could name a file outside the store)"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    return None


def read_problem(exc: OSError) -> str:
    """How a failed :func:`read_regular` reads in a message."""
    if exc.errno == errno.ELOOP:
        return "is a symbolic link (not followed: it could name a file outside the store)"
    if exc.errno == errno.EINVAL:
        return "is not a regular file"
    if exc.errno == errno.ENOENT:
        return "is missing"
    return f"cannot be read ({exc.strerror or exc})"
