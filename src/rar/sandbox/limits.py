"""Resource limits of a sandbox, and the ``preexec_fn`` that applies them to the child."""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use. Sizes in bytes, times in seconds.

    ``memory_bytes`` caps the worker's address space (RLIMIT_AS): an allocation past it raises
    ``MemoryError`` inside the cell. ``cpu_seconds`` is per cell (a soft RLIMIT_CPU the worker
    moves before each cell; the cell gets a ``limit`` result), ``worker_cpu_seconds`` the hard cap
    over the worker's whole life (past it the kernel kills the worker; a fresh one takes over).
    ``wall_seconds`` is the default per-cell wall-clock timeout enforced by the parent.
    ``processes`` caps processes and threads (RLIMIT_NPROC, counted inside the sandbox's own user
    namespace). ``file_bytes`` caps any one file (RLIMIT_FSIZE), ``open_files`` file descriptors
    (RLIMIT_NOFILE). ``tmp_bytes`` sizes the private ``/tmp`` and ``/dev/shm`` tmpfs (each);
    ``workspace_bytes`` bounds the workspace (checked during and after each cell).
    ``output_bytes`` caps each of stdout and stderr kept per cell.
    """

    memory_bytes: int = 2 * GiB
    cpu_seconds: float = 60.0
    worker_cpu_seconds: int = 3600
    wall_seconds: float = 120.0
    processes: int = 64
    file_bytes: int = 256 * MiB
    open_files: int = 256
    tmp_bytes: int = 256 * MiB
    workspace_bytes: int = 1 * GiB
    output_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, not {value!r}")
        if self.cpu_seconds > self.worker_cpu_seconds:
            raise ValueError("Limits.cpu_seconds must not exceed Limits.worker_cpu_seconds")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rlimit_setter(limits: Limits) -> Callable[[], None]:
    """A ``preexec_fn``: runs in the forked child before it executes bubblewrap (or the worker).

    RLIMIT_NPROC is not set here: the kernel counts it per user and exempts host root, so the
    worker sets it itself once it runs as the sandbox's own unprivileged user (see worker.py).
    """
    settings = [
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_CPU, limits.worker_cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]

    def apply() -> None:  # pragma: no cover - runs in the child
        if os.geteuid() == 0:
            os.setgroups([])  # root's supplementary groups must not reach the sandbox
        for which, value in settings:
            resource.setrlimit(which, (value, value))

    return apply
