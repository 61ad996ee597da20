"""Which Python the worker runs, and what of the host it needs to run it.

The worker runs the interpreter that runs RAR, as it was started: ``sys.executable`` unresolved
(a virtual environment's ``bin/python``, so that ``pyvenv.cfg`` applies and ``sys.prefix`` is the
environment), with the same site-packages. Inside bubblewrap only that installation is visible,
read-only and at the same paths: ``sys.prefix``, ``sys.base_prefix``, the exec prefixes, the
site-packages directories of ``site.getsitepackages()``, and the links and the file on the way
from ``sys.executable`` to the real binary. Never the current directory, a home directory as a
whole, or directories that ``.pth`` files add to ``sys.path`` (an editable install's checkout).

Directories under ``/usr`` are visible already (``/usr`` is bound as a whole). A directory where
the sandbox mounts something of its own (``/work``, ``/opt/rar``, ``/proc``, ``/dev``) cannot be
bound at its own path; it is bound under ``/opt/rar/host`` instead (``sys.prefix`` inside is then
``/opt/rar/host/<path>``).
"""

from __future__ import annotations

import functools
import os
import site
import sys
from dataclasses import dataclass
from pathlib import Path

from rar.sandbox.errors import SandboxStartError

RESERVED = ("/work", "/opt/rar", "/proc", "/dev")  # mount points of the sandbox itself
RELOCATED = "/opt/rar/host"
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # bound as they are


@dataclass(frozen=True)
class Mount:
    """A host directory bound read-only: ``host`` (resolved) at ``inside``; ``path`` is the path
    the parent's Python uses for it (``inside`` differs only when relocated)."""

    host: str
    path: str
    inside: str


@dataclass(frozen=True)
class Interpreter:
    """The Python installation the worker runs, as the parent sees it and as it is bound."""

    executable: str  # sys.executable, absolute, not resolved
    prefix: str
    base_prefix: str
    site_packages: tuple[str, ...]
    mounts: tuple[Mount, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (path inside, target): symlinks to recreate
    files: tuple[str, ...] = ()  # the real binary, when no mount holds it
    problem: str | None = None  # why it cannot be bound (check() raises it)

    @property
    def is_venv(self) -> bool:
        return self.prefix != self.base_prefix

    def inside(self, path: str) -> str:
        """Where a host path of the installation is inside the sandbox."""
        for mount in sorted(self.mounts, key=lambda m: len(m.path), reverse=True):
            if _under(path, mount.path):  # the innermost mount holding it
                return mount.inside + path[len(mount.path) :]
        return path

    def check(self) -> None:
        """Raise SandboxStartError if the installation cannot be bound without exposing more."""
        if self.problem is not None:
            raise SandboxStartError(self.problem)

    def bwrap_args(self, made: set[str]) -> list[str]:
        """bubblewrap arguments binding the installation; they go after ``--tmpfs /tmp`` so that
        an environment under /tmp lands on top of the sandbox's own /tmp."""
        self.check()
        args: list[str] = []
        for mount in self.mounts:
            _ensure_parents(args, made, mount.inside)
            args += ["--ro-bind", mount.host, mount.inside]
        for path, target in self.links:
            _ensure_parents(args, made, path)
            args += ["--symlink", target, path]
        for path in self.files:
            _ensure_parents(args, made, path)
            args += ["--ro-bind", path, path]
        return args


def current() -> Interpreter:
    """The interpreter running RAR."""
    executable = sys.executable or os.path.realpath(sys.argv[0])
    prefixes = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    return describe(executable, prefixes, tuple(site.getsitepackages()),
                    home=str(Path.home()), cwd=os.getcwd())  # fmt: skip


@functools.lru_cache(maxsize=8)
def describe(
    executable: str,
    prefixes: tuple[str, ...],
    site_packages: tuple[str, ...],
    *,
    home: str,
    cwd: str,
) -> Interpreter:
    """Plan what to bind for an interpreter; ``prefixes`` are prefix, base prefix, exec prefix
    and base exec prefix, as ``sys`` has them."""
    executable = os.path.abspath(executable)
    mounts = _mounts([p for p in (*prefixes, *site_packages) if p and os.path.isdir(p)])
    problem = None
    for mount in mounts:
        for kept, name in ((home, "your home directory"), (cwd, "the current directory")):
            if _under(kept, mount.path) or _under(kept, mount.host):
                problem = (
                    f"the Python environment running RAR ({mount.path}) contains {name} "
                    f"({kept}); the sandbox binds the environment and would expose it. Run RAR "
                    "from a virtual environment of its own (python -m venv DIR)"
                )
    plan = Interpreter(executable, os.path.abspath(prefixes[0]), os.path.abspath(prefixes[1]),
                       tuple(os.path.abspath(p) for p in site_packages), tuple(mounts))  # fmt: skip
    links: list[tuple[str, str]] = []
    path = executable
    for _hop in range(40):
        if not os.path.islink(path):
            break
        target = os.readlink(path)
        if not _visible(path, mounts):
            links.append((plan.inside(path), target))
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))
    files = () if _visible(path, mounts) or not os.path.isfile(path) else (path,)
    return Interpreter(plan.executable, plan.prefix, plan.base_prefix, plan.site_packages,
                       plan.mounts, tuple(links), files, problem)  # fmt: skip


def _mounts(paths: list[str]) -> list[Mount]:
    found: dict[str, str] = {}
    for given in paths:
        path, real = os.path.normpath(os.path.abspath(given)), os.path.realpath(given)
        if _under(path, "/usr"):  # visible through /usr; if it is a link there, bind its target
            path = real
        if path == "/" or _under(path, "/usr"):
            continue
        found[path] = real
    mounts: list[Mount] = []
    for path in sorted(found):
        real = found[path]
        outer = next((m for m in mounts if _under(path, m.path)), None)
        if outer and real == os.path.join(outer.host, os.path.relpath(path, outer.path)):
            continue  # already visible through the enclosing mount
        clash = any(_under(path, r) or _under(r, path) for r in RESERVED)
        mounts.append(Mount(real, path, RELOCATED + path if clash else path))
    return mounts


def _visible(path: str, mounts: list[Mount] | tuple[Mount, ...]) -> bool:
    return any(_under(path, top) for top in SYSTEM) or any(_under(path, m.path) for m in mounts)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _ensure_parents(args: list[str], made: set[str], path: str) -> None:
    current = ""
    for part in Path(path).parts[1:-1]:
        current += "/" + part
        if current not in made:
            made.add(current)
            args += ["--perms", "0755", "--dir", current]
