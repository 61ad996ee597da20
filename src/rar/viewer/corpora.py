"""The corpora a page may ask a run over (``rar view --allow-runs``): the packaged demo corpus,
and the directories directly under the corpus root given on the command line
(``--corpus-root DIR``) — named, never given as a path.

A name is checked on every request, on the server: one path component (no ``/``, ``\\``, ``..``
or leading ``.``), an entry of the root that is a directory and not a symbolic link, whose
resolved path is directly inside the resolved root. The corpus loader itself follows no symbolic
link inside the directory (:mod:`rar.evidence.corpus`), so nothing a page names makes the server
read outside the corpus root.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rar.viewer.http import ApiError

DEMO = "demo"
MAX_LISTED = 500
_MAX_NAME = 255


@dataclass(frozen=True)
class CorpusRoot:
    """The corpus choices of one server; ``root`` None offers the demo corpus alone."""

    root: Path | None = None

    @classmethod
    def at(cls, root: Path | str | None) -> CorpusRoot:
        """The choices under ``root`` (resolved now; it must be a directory)."""
        if root is None:
            return cls(None)
        resolved = Path(root).expanduser().resolve(strict=True)
        if not resolved.is_dir():
            raise NotADirectoryError(str(resolved))
        return cls(resolved)

    def listing(self) -> dict[str, Any]:
        """``{"corpora": [{"name", "label"}], "root": bool, "truncated": bool}``."""
        found = [{"name": DEMO, "label": "demo — the packaged demo corpus (activation energies)"}]
        truncated = False
        if self.root is not None:
            names = []
            try:
                with os.scandir(self.root) as entries:
                    for entry in entries:
                        if _bad_name(entry.name) is None and entry.is_dir(follow_symlinks=False):
                            names.append(entry.name)
            except OSError:
                names = []
            names.sort(key=str.lower)
            truncated = len(names) > MAX_LISTED
            found += [{"name": n, "label": n} for n in names[:MAX_LISTED]]
        return {"corpora": found, "root": self.root is not None, "truncated": truncated}

    def resolve(self, name: Any) -> str:
        """What the run is given as its corpus: ``demo``, or the absolute path of the directory
        ``name`` under the root; anything else is an :class:`ApiError` 400 ``bad-corpus``."""
        if not isinstance(name, str) or not name:
            raise _refused("corpus must be the name of a corpus the page lists")
        if name == DEMO:
            return DEMO
        if self.root is None:
            raise _refused(
                f"this viewer offers only the demo corpus, not {name[:80]!r}; start it with "
                "rar view --allow-runs --corpus-root DIR to offer the directories under DIR"
            )
        problem = _bad_name(name)
        if problem is not None:
            raise _refused(f"corpus {name[:80]!r} {problem}: name a directory the page lists")
        path = self.root / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise _refused(f"there is no corpus {name!r} under the corpus root") from None
        if stat.S_ISLNK(mode):
            raise _refused(f"corpus {name!r} is a symbolic link, which is not followed")
        if not stat.S_ISDIR(mode):
            raise _refused(f"corpus {name!r} is not a directory")
        real = path.resolve(strict=True)
        if real.parent != self.root:
            raise _refused(f"corpus {name!r} is not inside the corpus root")
        return str(real)


def _bad_name(name: str) -> str | None:
    """Why ``name`` is not one directory entry name a page may give (None: it is)."""
    if len(name) > _MAX_NAME:
        return "is too long"
    if name in (".", "..") or name.startswith("."):
        return "is hidden or a relative path"
    if any(c in name for c in "/\\\x00") or any(ord(c) < 32 for c in name):
        return "is not a single directory name"
    if name == DEMO:
        return "is the name of the packaged demo corpus"
    return None


def _refused(message: str) -> ApiError:
    return ApiError(400, "bad-corpus", message)
