"""The queue of runs started from the browser (``rar view --allow-runs``).

A job — ask a question, replay a run, branch it, resume it — waits in a first-in, first-out
queue and runs in a worker process of its own (:mod:`rar.viewer.worker`), at most ``parallel``
at a time (one by default). The server never records a run itself: a job that crashes, hangs or
exhausts memory takes its worker with it, not the viewer. The worker says which run it records
as soon as the run exists; the page follows that run live from the store like any other.

A job's status is ``queued`` → ``running`` → ``done`` | ``failed``, or ``cancelled`` (asked for
before it ended: a queued job never starts, a running one's worker is stopped and its run left
``interrupted``, which *Resume* continues).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from rar.redaction import redact_output
from rar.store.store import utc_now_iso

__all__ = ["WORKER_COMMAND", "Job", "JobQueue", "QueueFullError"]

WORKER_COMMAND: tuple[str, ...] = (sys.executable, "-m", "rar.viewer.worker")
"""How a worker is started: this interpreter (a venv's own, never its base), the worker module."""
KEPT_FINISHED = 200
"""Finished jobs remembered (the oldest are forgotten first; their runs stay in the store)."""
STDERR_LINES = 40
STOP_GRACE_S = 5.0


class QueueFullError(Exception):
    """The queue holds as many waiting jobs as it takes."""


@dataclass
class Job:
    """One job and what is known about it; :meth:`as_dict` is what the API shows."""

    id: str
    kind: str
    title: str
    spec: dict[str, Any]
    source_run: str | None = None
    status: str = "queued"
    created_at: str = field(default_factory=utc_now_iso)
    started_at: str | None = None
    finished_at: str | None = None
    run_id: str | None = None
    run_status: str | None = None
    replay_status: str | None = None
    error: dict[str, Any] | None = None
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    process: subprocess.Popen[bytes] | None = None
    cancelled: bool = False

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "cancelled")

    def as_dict(self, position: int | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "status": self.status,
            "position": position,
            "source_run": self.source_run,
            "run_id": self.run_id,
            "run_status": self.run_status,
            "replay_status": self.replay_status,
            "error": self.error,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "settings": {k: v for k, v in self.spec.items() if k not in ("store", "kind")},
        }


class JobQueue:
    """Jobs for the store at ``store_root``, run by at most ``parallel`` worker processes.

    Threads are started with the first job; :meth:`shutdown` stops the workers still running
    (their runs are left ``interrupted``) and forgets the queue.
    """

    def __init__(
        self,
        store_root: Path,
        *,
        parallel: int = 1,
        max_queued: int = 32,
        command: Sequence[str] = WORKER_COMMAND,
    ) -> None:
        if parallel < 1:
            raise ValueError("parallel must be at least 1")
        self.store_root = Path(store_root).resolve()
        self.parallel = parallel
        self.max_queued = max_queued
        self.command = tuple(command)
        self._jobs: dict[str, Job] = {}
        self._waiting: deque[Job] = deque()
        self._ids = itertools.count(1)
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False

    # --- the API's view ---

    def submit(
        self, kind: str, spec: dict[str, Any], *, title: str, source_run: str | None = None
    ) -> Job:
        """Queue a job (``spec``: what the worker is told, without the store); return it."""
        with self._changed:
            if self._closed:
                raise QueueFullError("the viewer is stopping and takes no more jobs")
            if len(self._waiting) >= self.max_queued:
                raise QueueFullError(
                    f"{len(self._waiting)} jobs are already waiting (at most "
                    f"{self.max_queued}); wait for some to finish"
                )
            job = Job(
                id=f"job-{next(self._ids)}",
                kind=kind,
                title=title,
                spec={"kind": kind, **spec, "store": str(self.store_root)},
                source_run=source_run,
            )
            self._jobs[job.id] = job
            self._waiting.append(job)
            self._forget_old()
            while len(self._threads) < self.parallel:
                thread = threading.Thread(
                    target=self._serve, name=f"rar-view-jobs-{len(self._threads) + 1}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._changed.notify_all()
            return job

    def get(self, job_id: str) -> dict[str, Any] | None:
        with self._changed:
            job = self._jobs.get(job_id)
            return None if job is None else job.as_dict(self._position(job))

    def jobs(self) -> list[dict[str, Any]]:
        """Every job remembered, newest first."""
        with self._changed:
            return [j.as_dict(self._position(j)) for j in reversed(self._jobs.values())]

    def counts(self) -> dict[str, int]:
        with self._changed:
            running = sum(1 for j in self._jobs.values() if j.status == "running")
            return {"queued": len(self._waiting), "running": running, "parallel": self.parallel}

    def cancel(self, job_id: str) -> dict[str, Any] | None:
        """Cancel a queued or running job (None: no such job); a finished job stays as it is."""
        with self._changed:
            job = self._jobs.get(job_id)
            if job is None:
                return None
            if job.status == "queued":
                self._waiting.remove(job)
                job.status, job.cancelled, job.finished_at = "cancelled", True, utc_now_iso()
            elif job.status == "running":
                job.cancelled = True
                if job.process is not None:
                    _stop(job.process)
            return job.as_dict(self._position(job))

    def wait(self, job_id: str, timeout: float) -> dict[str, Any] | None:
        """The job once it has finished, or as it is after ``timeout`` seconds (tests, scripts)."""
        with self._changed:
            self._changed.wait_for(
                lambda: job_id not in self._jobs or self._jobs[job_id].finished, timeout
            )
        return self.get(job_id)

    def shutdown(self) -> None:
        with self._changed:
            self._closed = True
            for job in self._waiting:
                job.status, job.cancelled, job.finished_at = "cancelled", True, utc_now_iso()
            self._waiting.clear()
            running = [j.process for j in self._jobs.values() if j.process is not None]
            self._changed.notify_all()
        for process in running:
            _stop(process)

    def _position(self, job: Job) -> int | None:
        if job.status != "queued":
            return None
        return self._waiting.index(job) + 1

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.finished]
        for job in finished[: max(0, len(finished) - KEPT_FINISHED)]:
            del self._jobs[job.id]

    # --- the workers ---

    def _serve(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._closed or bool(self._waiting))
                if self._closed:
                    return
                job = self._waiting.popleft()
                job.status, job.started_at = "running", utc_now_iso()
                self._changed.notify_all()
            try:
                self._run(job)
            except Exception as exc:  # the queue goes on whatever one job did
                if job.cancelled:
                    self._update(job, status="cancelled")
                else:
                    self._update(job, status="failed", error=_error("internal", str(exc)))

    def _run(self, job: Job) -> None:
        try:
            process = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(os.environ),
                close_fds=True,
            )
        except OSError as exc:
            self._update(job, status="failed", error=_error("WorkerError", str(exc)))
            return
        with self._changed:
            job.process = process
            if job.cancelled or self._closed:
                _stop(process)
        assert process.stdin is not None and process.stdout is not None
        errors = threading.Thread(target=_collect, args=(process, job.stderr), daemon=True)
        errors.start()
        # a worker that died at once is said below; a closed stdin: cancelled meanwhile
        with contextlib.suppress(OSError, ValueError):
            process.stdin.write(orjson.dumps(job.spec) + b"\n")
            process.stdin.flush()
        ended = False
        for line in process.stdout:  # stdin stays open: closing it stops the worker
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("event") == "run" and isinstance(message.get("run_id"), str):
                self._update(job, run_id=message["run_id"])
            elif message.get("event") == "done":
                ended = True
                self._update(
                    job,
                    status="done",
                    run_id=message.get("run_id") or job.run_id,
                    run_status=message.get("run_status"),
                    replay_status=message.get("replay_status"),
                )
            elif message.get("event") == "error":
                ended = True
                said = message.get("error")
                error: dict[str, Any] = said if isinstance(said, dict) else {}
                self._update(
                    job,
                    status="failed",
                    run_id=message.get("run_id") or job.run_id,
                    error=_error(str(error.get("type", "Error")), str(error.get("message", ""))),
                )
        with contextlib.suppress(OSError, ValueError):
            process.stdin.close()
        code = process.wait()
        errors.join(timeout=2)
        with self._changed:
            job.process = None
            if job.cancelled and not ended:
                job.status, job.finished_at = "cancelled", utc_now_iso()
            elif not ended:
                tail = " | ".join(list(job.stderr)[-5:])
                job.status, job.finished_at = "failed", utc_now_iso()
                job.error = _error(
                    "WorkerError",
                    f"the worker process ended with exit code {code} before finishing the job"
                    + (f": {tail}" if tail else ""),
                )
            if job.run_id and job.run_status is None:
                job.run_status = _status_of(self.store_root, job.run_id)
            self._changed.notify_all()

    def _update(self, job: Job, **fields: Any) -> None:
        with self._changed:
            for name, value in fields.items():
                setattr(job, name, value)
            if job.finished and job.finished_at is None:
                job.finished_at = utc_now_iso()
            self._changed.notify_all()


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": kind, "message": redact_output(message)}


def _status_of(store_root: Path, run_id: str) -> str | None:
    from rar.store.store import Store

    store = Store(store_root)
    try:
        return store.manifest(run_id).status.value
    except Exception:
        return None
    finally:
        store.close()


def _collect(process: subprocess.Popen[bytes], lines: deque[str]) -> None:
    assert process.stderr is not None
    for raw in process.stderr:
        text = raw.decode("utf-8", "replace").rstrip()
        if text:
            lines.append(redact_output(text[:500]))


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Close the worker's standard input (it ends at once), then make sure it has ended:
    terminated after a moment, killed after the grace period."""
    if process.stdin is not None:
        with contextlib.suppress(OSError, ValueError):
            process.stdin.close()

    def reap() -> None:
        for signal, wait in ((process.terminate, 1.0), (process.kill, STOP_GRACE_S)):
            try:
                process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    signal()

    threading.Thread(target=reap, daemon=True).start()
