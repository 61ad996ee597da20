"""Workspace snapshots: a tree of digests, and the state diff between two trees.

A snapshot walks the workspace without following links (``lstat``), stores each regular file's
bytes as a blob and records a tree ``{"format": "rar.tree/1", "entries": {path: entry}}`` where an
entry is ``{"digest", "size", "mode"}`` for a file and ``{"link": target}`` for a symbolic link.
Other special files (FIFOs, sockets, devices) are recorded as ``{"special": kind}`` and never read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rar.hashing import canonical, digest_bytes

TREE_FORMAT = "rar.tree/1"


@dataclass(frozen=True, slots=True)
class Snapshot:
    digest: str
    tree: dict[str, Any]
    files: int
    bytes: int


def take_snapshot(root: Path, put: Callable[[str, bytes], None]) -> Snapshot:
    entries: dict[str, dict[str, Any]] = {}
    total = 0
    files = 0
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            base = Path(dirpath)
            for name in sorted(filenames) + [d for d in dirnames if (base / d).is_symlink()]:
                path = base / name
                rel = path.relative_to(root).as_posix()
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    entries[rel] = {"link": os.readlink(path)}
                elif stat.S_ISREG(info.st_mode):
                    data = _read_regular(path)
                    digest = digest_bytes(data)
                    put(digest, data)
                    entries[rel] = {
                        "digest": digest,
                        "size": len(data),
                        "mode": stat.S_IMODE(info.st_mode),
                    }
                    total += len(data)
                    files += 1
                else:
                    entries[rel] = {"special": _special_kind(info.st_mode)}
    tree = {"format": TREE_FORMAT, "entries": entries}
    data = canonical(tree)
    digest = digest_bytes(data)
    put(digest, data)
    return Snapshot(digest, tree, files, total)


def _read_regular(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


def diff_trees(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[str]]:
    """Files added, changed and removed between two snapshot trees (paths, sorted)."""
    old = before.get("entries", {})
    new = after.get("entries", {})
    return {
        "added": sorted(set(new) - set(old)),
        "changed": sorted(path for path in set(old) & set(new) if old[path] != new[path]),
        "removed": sorted(set(old) - set(new)),
    }
