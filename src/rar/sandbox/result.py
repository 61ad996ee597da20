"""What a cell produced: :class:`CellResult`, JSON-able through :meth:`CellResult.as_dict`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "killed", "limit"]
STATUSES: tuple[Status, ...] = ("ok", "error", "timeout", "killed", "limit")
# Keys of CellResult.as_dict() that differ between two runs of the same cell (timing); a
# model's prompt gets CellResult.for_model(), which leaves them out.
VOLATILE_FIELDS: tuple[str, ...] = ("duration_ms",)


@dataclass(frozen=True)
class Artifact:
    """A regular file created or changed in the workspace during a cell."""

    path: str  # relative to the workspace, with "/" separators
    size: int
    digest: str  # "sha256:<hex>"
    media_type: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "digest": self.digest,
            "media_type": self.media_type,
        }


@dataclass(frozen=True)
class Refused:
    """A workspace entry that was not collected: a link, a FIFO, a device, a socket, ..."""

    path: str
    kind: str  # "symlink", "fifo", "socket", "char-device", "block-device", "hardlink", ...
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "reason": self.reason}


@dataclass(frozen=True)
class CellResult:
    """The outcome of one cell.

    ``status``: ``ok`` (ran to the end), ``error`` (the code raised), ``timeout`` (the wall-clock
    limit passed; the worker was killed), ``killed`` (the worker died: a signal, the lifetime CPU
    cap, a broken protocol), ``limit`` (a resource limit stopped the cell: memory, CPU, file size,
    processes, open files, the workspace bound).
    ``error`` is ``{"type", "message", "traceback"}`` whenever status is not ``ok``.
    ``worker_restarted``: this cell ran in a fresh worker because the previous one was lost, so
    variables defined by earlier cells are gone.
    ``unsafe``: the cell ran without isolation (``unsafe_local=True``).
    """

    status: Status
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: dict[str, str] | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()
    refused: tuple[Refused, ...] = ()
    duration_ms: float = 0.0
    worker_restarted: bool = False
    unsafe: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able dict (every value canonically hashable: no NaN, no big ints)."""
        return {
            "status": self.status,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "truncated": {"stdout": self.stdout_truncated, "stderr": self.stderr_truncated},
            "error": dict(self.error) if self.error is not None else None,
            "variables": self.variables,
            "artifacts": [a.as_dict() for a in self.artifacts],
            "refused": [r.as_dict() for r in self.refused],
            "duration_ms": round(self.duration_ms, 3),
            "worker_restarted": self.worker_restarted,
            "unsafe": self.unsafe,
        }

    def for_model(self) -> dict[str, Any]:
        """``as_dict()`` without VOLATILE_FIELDS: what a model may see. The same cell run the
        same way gives the same dict, byte for byte (see docs/sandbox.md)."""
        return {k: v for k, v in self.as_dict().items() if k not in VOLATILE_FIELDS}


def failure(
    status: Status, error_type: str, message: str, *, duration_ms: float = 0.0, **extra: Any
) -> CellResult:
    """A result for a cell the sandbox stopped (timeout, kill, limit)."""
    error = {"type": error_type, "message": message, "traceback": ""}
    return CellResult(status=status, error=error, duration_ms=duration_ms, **extra)
