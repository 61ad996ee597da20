"""The workspace seen from the host: scanned without following anything.

Every directory is opened relative to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY``
and every file with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` after opening, so a
symlink (or a FIFO, a device, a socket) planted by sandboxed code is reported, never read or
followed, even if it replaces a file between the scan and the read.

Nothing the sandbox leaves may run with someone else's rights on the host: every scan and every
collection clears the setuid, setgid and sticky bits and the world-write bit of each regular
file and directory in the workspace (:data:`UNSAFE_BITS`), changing the mode through a
descriptor opened with ``O_PATH | O_NOFOLLOW``, never through a path. A file that had setuid or
setgid set is never an artifact: it is listed in ``refused``. The one file left alone is a hard
link the sandbox's user does not own (a host file linked in by the host; the sandbox cannot
change its mode), which is refused too if it is new and setuid or setgid.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import mimetypes
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rar.sandbox.result import Artifact, Refused

MAX_DEPTH = 64
UNSAFE_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWOTH
"""Mode bits cleared from everything in the workspace: a setuid or setgid file would run with
its owner's rights for whoever starts it, a sticky or world-writable one would let other host
users change what the sandbox wrote."""
MAX_ENTRIES = 200_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_EXTRA_TYPES = {
    ".parquet": "application/vnd.apache.parquet",
    ".npy": "application/x-npy",
    ".npz": "application/x-npz",
    ".ipynb": "application/x-ipynb+json",
}


@dataclass(frozen=True)
class Entry:
    kind: str
    size: int
    mtime_ns: int
    ino: int


@dataclass
class Scan:
    entries: dict[str, Entry] = field(default_factory=dict)
    total_bytes: int = 0
    complete: bool = True  # False when MAX_DEPTH or MAX_ENTRIES stopped the walk


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "char-device"
    if stat.S_ISBLK(mode):
        return "block-device"
    return "other"


def _walk(root: Path) -> Iterator[tuple[int, str, str, os.stat_result]]:
    """Yield (dir_fd, name, relpath, lstat) for every entry under ``root``, depth first.

    ``dir_fd`` is open while the entry is yielded. Directories are entered by descriptor with
    O_NOFOLLOW, so a directory swapped for a symlink is never entered.
    """
    top = os.open(root, _DIR_FLAGS)
    stack: list[tuple[int, str, int]] = [(top, "", 0)]
    try:
        while stack:
            fd, prefix, depth = stack.pop()
            try:
                names = sorted(os.listdir(fd))
                for name in names:
                    rel = f"{prefix}{name}"
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    yield fd, name, rel, st
                    if stat.S_ISDIR(st.st_mode) and depth + 1 < MAX_DEPTH:
                        try:
                            sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            continue
                        stack.append((sub, f"{rel}/", depth + 1))
            finally:
                os.close(fd)
    finally:
        for fd, _prefix, _depth in stack:
            os.close(fd)


def scan(root: Path, give_to: tuple[int, int] | None = None, *, make_safe: bool = True) -> Scan:
    """Every entry under ``root`` (lstat only; nothing is opened but directories), with the
    :data:`UNSAFE_BITS` of ``root`` and of every entry cleared unless ``make_safe`` is false
    (the checks of the workspace's size while a cell runs leave modes to :func:`collect`, which
    must still see them).

    ``give_to=(uid, gid)`` also hands root-owned entries to that user (see :func:`hand_over`).
    """
    result = Scan()
    owner = _make_root_safe(root) if make_safe else 0
    for fd, name, rel, st in _walk(root):
        if give_to is not None and st.st_uid == 0:
            _give(fd, name, st, give_to)
        if make_safe:
            _make_safe(fd, name, st, owner)
        entry = Entry(kind_of(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)
        result.entries[rel] = entry
        if entry.kind == "file":
            result.total_bytes += max(st.st_size, st.st_blocks * 512)
        if len(result.entries) >= MAX_ENTRIES:
            result.complete = False
            break
    return result


def size_of(root: Path) -> tuple[int, int]:
    """(bytes of regular files, number of entries) under ``root``."""
    found = scan(root, make_safe=False)
    return found.total_bytes, len(found.entries)


def _make_root_safe(root: Path) -> int:
    """Clear :data:`UNSAFE_BITS` of the workspace directory itself (the sandbox owns it, so it
    can chmod it); return its owner, the host uid the sandbox's files belong to (65534 after
    :func:`hand_over` when RAR runs as root, else the caller)."""
    st = os.lstat(root)
    _make_safe(None, str(root), st, st.st_uid)
    return st.st_uid


def _make_safe(dir_fd: int | None, name: str, st: os.stat_result, owner: int) -> bool:
    """Clear :data:`UNSAFE_BITS` from the regular file or directory ``name`` (as ``st`` found
    it); True when they are clear now. A hard link owned by someone other than ``owner`` is
    left alone (see the module's docstring)."""
    mode = st.st_mode
    if not mode & UNSAFE_BITS or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return True
    if stat.S_ISREG(mode) and st.st_nlink > 1 and st.st_uid != owner:
        return False
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        now = os.fstat(handle)
        if now.st_ino != st.st_ino or stat.S_IFMT(now.st_mode) != stat.S_IFMT(mode):
            return False  # swapped since it was listed: the next scan looks again
        safe = stat.S_IMODE(now.st_mode) & ~UNSAFE_BITS
        try:
            # the inode that was opened, never a path the sandbox could swap for a link;
            # an O_PATH descriptor needs no read permission on the file
            os.chmod(f"/proc/self/fd/{handle}", safe)
        except FileNotFoundError:  # no /proc: open the file itself, without following
            _fchmod_opened(name, dir_fd, now, safe)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


def _fchmod_opened(name: str, dir_fd: int | None, expected: os.stat_result, mode: int) -> None:
    flags = _DIR_FLAGS if stat.S_ISDIR(expected.st_mode) else _FILE_FLAGS
    handle = os.open(name, flags, dir_fd=dir_fd)
    try:
        if os.fstat(handle).st_ino != expected.st_ino:
            raise FileNotFoundError(name)
        os.fchmod(handle, mode)
    finally:
        os.close(handle)


def _digest(fd: int, name: str) -> tuple[int, str] | str:
    """(size, "sha256:...") of a regular file, or the kind of what is really there."""
    try:
        handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
    except OSError as exc:  # ELOOP: it is a symlink now
        return "symlink" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror})"
    try:
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode):
            return kind_of(st.st_mode)
        if _privilege(st.st_mode):  # set again since the walk looked: never an artifact
            return str(_privilege(st.st_mode))
        sha = hashlib.sha256()
        size = 0
        while chunk := os.read(handle, 1 << 20):
            sha.update(chunk)
            size += len(chunk)
        return size, f"sha256:{sha.hexdigest()}"
    finally:
        os.close(handle)


def media_type(path: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _EXTRA_TYPES:
        return _EXTRA_TYPES[suffix]
    guessed, _encoding = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


def collect(root: Path, before: Scan) -> tuple[list[Artifact], list[Refused], Scan]:
    """Artifacts (new or changed regular files since ``before``) and refused entries."""
    after = Scan()
    artifacts: list[Artifact] = []
    refused: list[Refused] = []
    owner = _make_root_safe(root)
    privileged_inodes: dict[tuple[int, int], str] = {}  # its other hard links are refused too
    for fd, name, rel, st in _walk(root):
        inode = (st.st_dev, st.st_ino)
        privileged = _privilege(st.st_mode) or privileged_inodes.get(inode)
        if privileged:
            privileged_inodes[inode] = privileged
        safe = _make_safe(fd, name, st, owner)
        entry = Entry(kind_of(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)
        after.entries[rel] = entry
        if entry.kind == "file":
            after.total_bytes += max(st.st_size, st.st_blocks * 512)
        if len(after.entries) >= MAX_ENTRIES:
            after.complete = False
            break
        changed = before.entries.get(rel) != entry
        if privileged and entry.kind == "file":
            # never an artifact; said once: when its bits were cleared, or when it is new
            if safe or changed:
                done = (
                    "its setuid/setgid bits were cleared"
                    if safe
                    else "its mode was left alone (a hard link to a file the sandbox does not own)"
                )
                refused.append(Refused(rel, privileged, f"a {privileged} file; {done}"))
            continue
        if not changed or entry.kind == "dir":
            continue
        if entry.kind != "file":
            refused.append(Refused(rel, entry.kind, "not a regular file; not read or followed"))
            continue
        got = _digest(fd, name)
        if isinstance(got, str):
            refused.append(Refused(rel, got, "changed while collecting; not read or followed"))
            continue
        size, digest = got
        artifacts.append(Artifact(rel, size, digest, media_type(rel)))
    return artifacts, refused, after


def _privilege(mode: int) -> str | None:
    """The kind of a file whose ``mode`` runs it with its owner's (``setuid``) or group's
    (``setgid``) rights; None for any other."""
    if mode & stat.S_ISUID:
        return "setuid"
    if mode & stat.S_ISGID:
        return "setgid"
    return None


def hand_over(root: Path, uid: int, gid: int) -> None:
    """Give the workspace to the sandbox's host uid (used when RAR runs as root).

    Only directories and singly-linked regular files owned by root are changed, without
    following links: a hard link to a host file placed in the workspace keeps its owner.
    """
    os.chown(root, uid, gid, follow_symlinks=False)
    scan(root, give_to=(uid, gid))


def _give(fd: int, name: str, st: os.stat_result, owner: tuple[int, int]) -> None:
    if stat.S_ISDIR(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
        with contextlib.suppress(OSError):
            os.chown(name, owner[0], owner[1], dir_fd=fd, follow_symlinks=False)
