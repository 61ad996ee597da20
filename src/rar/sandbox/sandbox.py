"""The Sandbox: a warm worker in bubblewrap, one cell at a time, failures as values.

::

    with Sandbox(workspace) as box:
        box.run_cell("import numpy as np; x = np.arange(3).sum()").variables   # {"x": 3}

Model-written code never runs in the caller's process: it runs in a worker process started
inside bubblewrap (see :mod:`rar.sandbox.launch`) and talks to it over two pipes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rar.sandbox import interpreter as _interpreter
from rar.sandbox import launch as _launch
from rar.sandbox import workspace as _ws
from rar.sandbox.channel import (
    Channel,
    ChannelAborted,
    ChannelClosed,
    ChannelTimeout,
    ProtocolError,
)
from rar.sandbox.errors import (
    SandboxClosedError,
    SandboxStartError,
    SandboxUnavailableError,
)
from rar.sandbox.limits import Limits, rlimit_setter
from rar.sandbox.reply import HostPaths, read_reply
from rar.sandbox.result import CellResult, Status, failure

START_TIMEOUT = 60.0
MAX_CODE_CHARS = 4 * 1024 * 1024
LOST = "a fresh worker will run the next cell (variables from earlier cells are lost)"


@dataclass
class _Worker:
    """The parent's handle on one worker process tree."""

    proc: subprocess.Popen[bytes]
    channel: Channel
    init_pid: int | None = None  # host pid of the sandbox's pid 1 (the reaper)
    pidfd: int | None = None
    scratch: str | None = None
    hello: dict[str, Any] | None = None

    def pids(self) -> tuple[int, ...]:
        return (self.proc.pid,) + ((self.init_pid,) if self.init_pid else ())

    def kill(self) -> None:
        """Kill every process of the worker and reap what is ours; idempotent."""
        if self.proc.poll() is None:
            if self.pidfd is not None:  # pid 1 of the sandbox: the kernel kills the namespace
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)  # bubblewrap reaps its pid 1, then exits
            if self.proc.poll() is None:  # its group still exists: the pgid cannot be reused
                with contextlib.suppress(OSError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def stderr_tail(self) -> str:
        """What the process tree printed on its own stderr (start-up problems), capped."""
        if self.proc.stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            os.set_blocking(self.proc.stderr.fileno(), False)
            data = self.proc.stderr.read(65536) or b""
            return data.decode("utf-8", "replace")
        return ""


def _kill_current(holder: list[_Worker]) -> None:
    while holder:
        holder.pop().kill()


class Sandbox:
    """Runs code cells in an isolated, warm Python worker; see docs/sandbox.md."""

    def __init__(
        self,
        workspace: Path | str,
        *,
        limits: Limits = Limits(),  # noqa: B008 - frozen, so a shared default is safe
        unsafe_local: bool = False,
        seed: int = 0,
        preload: bool = True,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.limits = limits
        self.unsafe_local = unsafe_local
        self.seed = seed
        self.preload = preload
        self._bwrap = None if unsafe_local else shutil.which("bwrap")
        if not unsafe_local and self._bwrap is None:
            raise SandboxUnavailableError("bubblewrap (`bwrap`) is not installed or not on PATH")
        self._root_mode = not unsafe_local and os.geteuid() == 0
        if self._root_mode:
            _ws.hand_over(self.workspace, _launch.SANDBOX_UID, _launch.SANDBOX_GID)
        self._lock = threading.Lock()
        self._holder: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _kill_current, self._holder)
        self._cells = 0
        self._next_check = 0.0
        self._bytes_at_start = 0
        self._lost = False
        self._closed = False
        self._mpl_cache = _launch.matplotlib_cache() if preload else None
        self._missing: tuple[str, ...] = ()
        self._start()

    # --- public ----------------------------------------------------------------------------

    @property
    def info(self) -> dict[str, Any]:
        """How this sandbox isolates code, and what its current worker preloaded."""
        hello = self._holder[0].hello if self._holder and self._holder[0].hello else {}
        return {
            "isolation": "none (unsafe-local)" if self.unsafe_local else "bubblewrap",
            "bwrap": self._bwrap,
            "host_uid": _launch.SANDBOX_UID if self._root_mode else os.getuid(),
            "sandbox_uid": hello.get("uid"),
            "seccomp": not self.unsafe_local and _launch.seccomp_program() is not None,
            "python": {k: hello.get(k) for k in ("executable", "prefix")},
            "missing_libraries": list(self.missing_libraries),
            "preloaded": hello.get("preloaded", []),
            "preload_errors": hello.get("preload_errors", {}),
            "limits": self.limits.as_dict(),
        }

    @property
    def missing_libraries(self) -> tuple[str, ...]:
        """Which of numpy, scipy and matplotlib the worker's Python environment lacks (cells
        importing one of them fail with a message saying so and how to install it)."""
        return self._missing

    def process_ids(self) -> tuple[int, ...]:
        """Host pids of the current worker's tree (bubblewrap and the sandbox's pid 1)."""
        return self._holder[0].pids() if self._holder else ()

    def run_cell(self, code: str, *, timeout: float | None = None) -> CellResult:
        """Run ``code`` in the worker; every failure of the code comes back as a result."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        wall = self.limits.wall_seconds if timeout is None else float(timeout)
        if not wall > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if len(code) > MAX_CODE_CHARS:
            return failure("error", "CodeTooLarge", f"the cell has {len(code)} characters; "
                           f"the sandbox takes at most {MAX_CODE_CHARS}")  # fmt: skip
        with self._lock:
            if self._closed:
                raise SandboxClosedError()
            restarted = False
            if not self._holder:
                self._start()
                restarted, self._lost = self._lost, False
            worker = self._holder[0]
            self._cells += 1
            owner = (_launch.SANDBOX_UID, _launch.SANDBOX_GID) if self._root_mode else None
            before = _ws.scan(self.workspace, give_to=owner)  # files the host added meanwhile
            self._bytes_at_start = before.total_bytes
            started = time.monotonic()
            message = {"op": "run", "cell": self._cells, "code": code, "seed": self.seed,
                       "cpu_seconds": self.limits.cpu_seconds,
                       "token": secrets.token_hex(8)}  # fmt: skip
            reply: dict[str, Any] | None = None
            stopped: CellResult | None = None
            try:
                worker.channel.send(message)
                while reply is None:  # frames without this cell's token were forged by it
                    frame = worker.channel.receive(started + wall, self._over_workspace, 0.25)
                    reply = frame if frame.get("token") == message["token"] else None
            except ChannelTimeout:
                stopped = self._lose(
                    "timeout", "Timeout",
                    f"the cell ran past its {wall:g} s wall-clock limit; the sandbox and all its "
                    f"processes were killed; {LOST}",
                )  # fmt: skip
            except ChannelAborted as exc:
                stopped = self._lose("limit", "WorkspaceLimitExceeded", f"{exc}; {LOST}")
            except (ChannelClosed, ProtocolError) as exc:
                code_ = worker.proc.poll()
                why = f"exit status {code_}" if code_ is not None else str(exc)
                stopped = self._lose("killed", "WorkerDied", f"the worker died ({why}); {LOST}")
            duration_ms = (time.monotonic() - started) * 1000
            result = self._result(reply, stopped, duration_ms, self._host_paths(worker))
            artifacts, refused, after = _ws.collect(self.workspace, before)
            extra: dict[str, Any] = {
                "artifacts": tuple(artifacts),
                "refused": tuple(refused),
                "worker_restarted": restarted,
                "unsafe": self.unsafe_local,
            }
            over = after.total_bytes > self.limits.workspace_bytes or not after.complete
            if over and (result.error or {}).get("type") != "WorkspaceLimitExceeded":
                note = (
                    f"the workspace holds {after.total_bytes} bytes in {len(after.entries)} "
                    f"entries, over its limit of {self.limits.workspace_bytes} bytes; delete "
                    "files before running more cells"
                )
                extra["status"] = "limit"
                extra["error"] = {"type": "WorkspaceLimitExceeded", "message": note,
                                  "traceback": ""}  # fmt: skip
            return dataclasses.replace(result, **extra)

    def close(self) -> None:
        """Stop the worker and every process it started; idempotent.

        The workspace is swept once they are dead: a process still running after the last
        cell's collection may have set a setuid bit since, which must not outlive the sandbox.
        """
        with self._lock:
            self._closed = True
            if not self._holder:
                return  # nothing ran since the last collection swept the workspace
            _kill_current(self._holder)
            with contextlib.suppress(FileNotFoundError):  # the host removed the workspace
                _ws.scan(self.workspace)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- workers -----------------------------------------------------------------------------

    def _worker_config(self) -> dict[str, Any]:
        return {
            "preload": self.preload,
            "nproc": self.limits.processes,
            "scratch": "/tmp",
            "output_bytes": self.limits.output_bytes,
            "mpl_cache": self._mpl_cache,
            "environment": _interpreter.current().prefix,  # named when numpy & co. are missing
        }

    def _start(self) -> None:
        config = self._worker_config()
        if self.unsafe_local:
            plan = _launch.local(self.workspace, config)
        else:
            assert self._bwrap is not None
            plan = _launch.bubblewrap(self._bwrap, self.workspace, self.limits, config,
                                      root_mode=self._root_mode)  # fmt: skip
        try:
            proc = _spawn(plan, self.limits)
        except OSError as exc:
            for fd in (*plan.pass_fds, plan.info_fd, plan.block_fd):
                if fd is not None:
                    os.close(fd)
            raise SandboxUnavailableError(f"cannot execute {plan.argv[0]}: {exc}") from exc
        for fd in plan.pass_fds:
            os.close(fd)
        assert proc.stdin is not None and proc.stdout is not None
        max_frame = 4 * 1024 * 1024 + 8 * self.limits.output_bytes
        worker = _Worker(proc, Channel(proc.stdin.fileno(), proc.stdout.fileno(), max_frame),
                         scratch=plan.scratch)  # fmt: skip
        self._holder.append(worker)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            if plan.info_fd is not None:
                worker.init_pid = _read_child_pid(plan.info_fd, deadline)
                with contextlib.suppress(OSError):
                    worker.pidfd = os.pidfd_open(worker.init_pid)
            if plan.map_ids and plan.block_fd is not None:
                assert worker.init_pid is not None
                _launch.write_id_maps(worker.init_pid)
                os.write(plan.block_fd, b"1")
            worker.hello = worker.channel.receive(deadline)
        except (ChannelClosed, ChannelTimeout, ProtocolError, OSError, ValueError) as exc:
            output = worker.stderr_tail()
            _kill_current(self._holder)
            if "bwrap" in output or "bwrap" in str(exc):
                raise SandboxUnavailableError(
                    f"bubblewrap could not create the sandbox ({output.strip() or exc})"
                ) from exc
            raise SandboxStartError(str(exc) or type(exc).__name__, output) from exc
        finally:
            for fd in (plan.info_fd, plan.block_fd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        if self._root_mode and worker.hello.get("uid") != _launch.SANDBOX_UID:
            _kill_current(self._holder)
            raise SandboxStartError(f"the worker runs as uid {worker.hello.get('uid')}, not 65534")
        missing = worker.hello.get("missing")
        self._missing = tuple(str(m) for m in missing) if isinstance(missing, list) else ()

    def _host_paths(self, worker: _Worker) -> HostPaths | None:
        """unsafe_local: the host paths of the workspace and the scratch directory, which
        results show as ``/work`` and ``/tmp`` (as in bubblewrap), so that the same cell gives
        the same result wherever the workspace is."""
        if not self.unsafe_local:
            return None
        paths = {str(self.workspace): _launch.WORK}
        if worker.scratch:
            paths[worker.scratch] = paths[os.path.realpath(worker.scratch)] = "/tmp"
        return HostPaths(paths)

    def _lose(self, status: Status, kind: str, message: str) -> CellResult:
        _kill_current(self._holder)
        self._lost = True
        return failure(status, kind, message)

    def _over_workspace(self) -> str | None:
        """Checked while a cell runs: every 0.25 s, or less often if scanning is slow."""
        now = time.monotonic()
        if now < self._next_check:
            return None
        size, entries = _ws.size_of(self.workspace)
        self._next_check = now + 10 * (time.monotonic() - now)
        growing = size > self._bytes_at_start  # a cell may be cleaning up an over-full workspace
        if growing and (size > self.limits.workspace_bytes or entries >= _ws.MAX_ENTRIES):
            return (  # no byte count: how far it got before the check is a matter of timing
                f"the workspace grew past its limit of {self.limits.workspace_bytes} bytes "
                f"(or {_ws.MAX_ENTRIES} entries) during the cell; the sandbox was killed"
            )
        return None

    def _result(
        self,
        reply: dict[str, Any] | None,
        stopped: CellResult | None,
        duration_ms: float,
        host_paths: HostPaths | None,
    ) -> CellResult:
        if reply is None:
            assert stopped is not None
            return dataclasses.replace(stopped, duration_ms=duration_ms)
        return read_reply(reply, self.limits.output_bytes, duration_ms, host_paths)


_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawn(plan: _launch.Launch, limits: Limits) -> subprocess.Popen[bytes]:
    """Start the worker from one long-lived thread: bubblewrap's --die-with-parent follows the
    *thread* that forked it, so a sandbox created in a short-lived thread would otherwise die
    with that thread."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rar-sandbox-spawn")
    future = _SPAWNER.submit(
        subprocess.Popen, plan.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=plan.env, cwd=plan.cwd, pass_fds=plan.pass_fds,
        preexec_fn=rlimit_setter(limits), start_new_session=True,
    )  # fmt: skip
    return future.result()


def _read_child_pid(fd: int, deadline: float) -> int:
    """bubblewrap's --info-fd: ``{"child-pid": N}``, then end of file."""
    data = b""
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ChannelTimeout()
        if not poller.poll(int(left * 1000) + 1):
            continue
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    if not data:
        raise ChannelClosed("bwrap exited before starting the sandbox")
    pid = json.loads(data)["child-pid"]
    if not isinstance(pid, int):
        raise ValueError(f"bwrap reported a child pid of {pid!r}")
    return pid
