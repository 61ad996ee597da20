"""The sandbox worker: a warm Python process that runs cells one after another.

It runs *inside* the sandbox (bubblewrap, or a plain subprocess in unsafe-local mode) and uses
the standard library only: it is started as a script, never imported by model code's parent.

Protocol: length-prefixed JSON frames (4-byte big-endian length, then UTF-8 JSON) on the pipes
that were its stdin and stdout. At start-up it moves those pipes to private descriptors, points
fd 0 at /dev/null and fds 1 and 2 at per-cell files in its scratch directory (so output written
below Python, by C code or child processes, is captured too), drops privileges when asked,
seeds ``numpy.random`` whenever a cell first imports it (nothing is preloaded: a cell pays for
what it imports), and sends a ``hello``
frame (its interpreter, ``sys.prefix``, which of numpy, scipy and matplotlib are missing). Each
``run`` frame runs one cell in one shared namespace (variables persist like a notebook) after
reseeding ``random`` and ``numpy.random``, and is answered by a ``result`` frame.
"""

from __future__ import annotations

import contextlib
import json
import linecache
import math
import os
import random
import resource
import shutil
import signal
import struct
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.sandbox import cellvalues
else:  # inside the sandbox: cellvalues.py is bound next to this file; rar is not importable
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import cellvalues
    finally:
        del sys.path[0]

HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024
MAX_VARIABLES_BYTES = 256 * 1024
MAIN_PID = os.getpid()  # set again once the worker knows its own pid (after the reaper fork)


class _Channel:
    def __init__(self) -> None:
        self.rfd = os.dup(0)  # non-inheritable copies: exec'd children never get them
        self.wfd = os.dup(1)

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_exact(self, size: int) -> bytes:
        parts: list[bytes] = []
        while size:
            chunk = os.read(self.rfd, min(size, 1 << 20))
            if not chunk:
                raise EOFError("the parent closed the channel")
            parts.append(chunk)
            size -= len(chunk)
        return b"".join(parts)

    def receive(self) -> dict[str, Any]:
        (size,) = HEADER.unpack(self._read_exact(HEADER.size))
        if size > MAX_FRAME:
            raise ValueError(f"frame of {size} bytes is too large")
        message: dict[str, Any] = json.loads(self._read_exact(size))
        return message

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, allow_nan=False).encode("utf-8", "replace")
        view = memoryview(HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(self.wfd, view) :]


class _Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.cap = int(config.get("output_bytes", 65536))
        self.scratch = str(config.get("scratch", "/tmp"))
        self.namespace: dict[str, Any] = {}
        self.seen: dict[str, tuple[Any, str]] = {}  # the object itself: no id() reuse
        self.environment = str(config.get("environment") or sys.prefix)
        self.in_cell = False
        self.preloaded: list[str] = []
        self.preload_errors: dict[str, str] = {}
        self.channel = _Channel()
        os.register_at_fork(after_in_child=self.channel.close)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self._open_output()
        signal.signal(signal.SIGXCPU, self._on_cpu_limit)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past RLIMIT_FSIZE raise EFBIG
        module = types.ModuleType("__main__")
        sys.modules["__main__"] = module
        self.namespace = module.__dict__

    def _out_path(self, fd: int) -> str:
        return os.path.join(self.scratch, f".rar-fd{fd}")

    def _open_output(self) -> None:
        for fd in (1, 2):
            new = os.open(
                self._out_path(fd), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600
            )
            os.dup2(new, fd)
            os.close(new)

    def _on_cpu_limit(self, _signum: int, _frame: object) -> None:
        if self.in_cell:
            raise cellvalues.CpuTimeExceeded("the cell used up its CPU-time limit")

    # --- start-up ------------------------------------------------------------------------------

    def limit_processes(self) -> None:
        limit = int(self.config.get("nproc", 64))
        if self.config.get("count_existing"):  # unsafe-local: the limit is per host user
            limit += _tasks_of(os.getuid())
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))

    def configure_matplotlib(self) -> None:
        """Its settings (SVG ids from a fixed salt, not uuid4: the same figure gives the same
        bytes) and, when preloading, the host's font list."""
        target = os.environ.get("MPLCONFIGDIR")
        if not target:
            return
        cache = self.config.get("mpl_cache") if self.config.get("preload") else None
        try:
            os.makedirs(target, exist_ok=True)
            with open(os.path.join(target, "matplotlibrc"), "w") as handle:
                handle.write("svg.hashsalt: rar-sandbox\n")
            if isinstance(cache, str) and os.path.isdir(cache):
                for name in os.listdir(cache):
                    if name.startswith("fontlist") and name.endswith(".json"):
                        shutil.copyfile(os.path.join(cache, name), os.path.join(target, name))
        except OSError as exc:
            self.preload_errors["matplotlib-config"] = str(exc)

    def preload(self) -> None:
        """Nothing is imported ahead of the first cell: a cell pays for what it imports.

        Importing numpy and scipy up front made every cold start ~150 ms slower, also for
        cells that use neither. What preloading guaranteed is kept: ``numpy.random`` is seeded
        with the cell's seed however and whenever it is first imported (by the cell, or by a
        library the cell imports), exactly as if it had been imported and reseeded before the
        cell started, so the draws are the same.
        """
        sys.meta_path.insert(0, _SEED_ON_IMPORT)

    def serve(self) -> None:
        self.channel.send(
            {
                "op": "hello",
                "pid": os.getpid(),
                "uid": os.getuid(),
                "python": sys.version,
                "executable": sys.executable,
                "prefix": sys.prefix,
                "missing": cellvalues.missing_libraries(),
                "preloaded": list(self.preloaded),
                "preload_errors": dict(self.preload_errors),
            }
        )
        while True:
            try:
                message = self.channel.receive()
            except EOFError:
                return
            if message.get("op") == "exit":
                return
            try:
                reply = self.run(message)
            except BaseException as exc:  # a late signal, or a bug here: answer, don't die
                if os.getpid() != MAIN_PID:
                    os._exit(0)
                reply = {
                    "op": "result",
                    "status": "limit" if cellvalues.is_limit(exc) else "error",
                    "error": cellvalues.describe(exc, None, self.environment),
                    "stdout": "",
                    "stderr": "",
                    "stdout_truncated": False,
                    "stderr_truncated": False,
                    "variables": {},
                }
            reply["token"] = message.get("token")  # lets the parent skip frames a cell forged
            self.channel.send(reply)

    # --- one cell ------------------------------------------------------------------------------

    def run(self, message: dict[str, Any]) -> dict[str, Any]:
        code = str(message.get("code", ""))
        filename = f"<cell-{int(message.get('cell', 0))}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        self._open_output()
        out, err = cellvalues.Capture(self.cap, 1), cellvalues.Capture(self.cap, 2)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        _reseed(int(message.get("seed", 0)))
        self._budget_cpu(float(message.get("cpu_seconds", 60.0)))
        status, error = "ok", None
        try:
            self.in_cell = True
            exec(compile(code, filename, "exec", dont_inherit=True), self.namespace)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                status = "error"
                error = cellvalues.describe(exc, _cell_frames(exc.__traceback__), self.environment)
        except BaseException as exc:
            status = "limit" if cellvalues.is_limit(exc) else "error"
            error = cellvalues.describe(exc, _cell_frames(exc.__traceback__), self.environment)
        finally:
            self.in_cell = False
            if os.getpid() != MAIN_PID:  # a child forked by the cell never answers
                os._exit(0)
            sys.stdout, sys.stderr = saved
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        stdout, out_cut = self._output(out, 1)
        stderr, err_cut = self._output(err, 2)
        return {
            "op": "result",
            "status": status,
            "error": error,
            "stdout": stdout,
            "stderr": stderr,
            "stdout_truncated": out_cut,
            "stderr_truncated": err_cut,
            "variables": self._variables(),
        }

    def _budget_cpu(self, seconds: float) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))

    def _output(self, capture: cellvalues.Capture, fd: int) -> tuple[str, bool]:
        text = capture.text()
        truncated = capture.truncated
        try:
            with open(self._out_path(fd), "rb") as handle:
                raw = handle.read(self.cap + 1)
                size = os.fstat(handle.fileno()).st_size
            if size > len(raw):
                truncated = True
            text += raw.decode("utf-8", "replace")
        except OSError:
            pass
        data = text.encode("utf-8", "replace")
        if len(data) > self.cap:
            data, truncated = data[: self.cap], True
        return data.decode("utf-8", "ignore"), truncated

    def _variables(self) -> dict[str, Any]:
        changed: dict[str, Any] = {}
        budget = MAX_VARIABLES_BYTES
        current: dict[str, tuple[Any, str]] = {}
        for name, value in list(self.namespace.items()):
            if (
                name.startswith("_")
                or isinstance(value, types.ModuleType | type)
                or callable(value)
            ):
                continue
            converted = cellvalues.jsonable(value, 0)
            if converted is cellvalues.SKIP:
                continue
            text = json.dumps(converted, sort_keys=True, ensure_ascii=False)
            current[name] = (value, text)
            seen = self.seen.get(name)
            same = seen is not None and seen[0] is value and seen[1] == text
            if not same and len(text) <= budget:
                changed[name] = converted
                budget -= len(text)
        self.seen = current
        return changed


def _cell_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without the worker's own frame (it starts at the cell)."""
    if tb is not None and tb.tb_frame.f_code is _Worker.run.__code__:
        return tb.tb_next
    return tb


def _tasks_of(uid: int) -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
    return count


def _reseed(seed: int) -> None:
    random.seed(seed)
    _SEED_ON_IMPORT.seed = seed
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None and hasattr(numpy_random, "seed"):
        numpy_random.seed(seed % 2**32)


class _SeedingLoader:
    """Runs the real loader of ``numpy.random``, then seeds it with the current cell's seed."""

    def __init__(self, loader: Any, hook: _SeedOnImport) -> None:
        self._loader = loader
        self._hook = hook

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        seed = getattr(module, "seed", None)
        if callable(seed):
            seed(self._hook.seed % 2**32)

    def __getattr__(self, name: str) -> Any:  # resources, get_data, is_package, ...
        return getattr(self._loader, name)


class _SeedOnImport:
    """A meta-path finder that only wraps the loader of ``numpy.random`` (see ``preload``)."""

    target = "numpy.random"

    def __init__(self) -> None:
        self.seed = 0
        self._finding = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.target or self._finding:
            return None
        self._finding = True
        try:
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                spec = find(name, path, target) if find is not None else None
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._finding = False
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _SeedingLoader(spec.loader, self)
        return spec


_SEED_ON_IMPORT = _SeedOnImport()


def _drop_privileges(config: dict[str, Any]) -> None:
    """Become the sandbox's unprivileged user (asked for when the namespace maps root)."""
    drop = config.get("drop")
    if not isinstance(drop, list):
        return
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    uid, gid = int(drop[0]), int(drop[1])
    for capability in range(64):  # empty the bounding set while we still may (PR_CAPBSET_DROP)
        prctl(24, capability, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # leaves no capability at all
    # Changing uid made the process non-dumpable, which makes /proc/self/* root-owned and
    # unreadable to it; make it dumpable again (RLIMIT_CORE is 0: no core files). It also
    # cleared the parent-death signal bubblewrap set (--die-with-parent): set it again.
    prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _fork_reaper() -> None:
    """Stay behind as the sandbox's pid 1 and reap every process; the worker is the child.

    bubblewrap's own init (without --as-pid-1) reports its child's exit and leaves its own
    reaping to the host's pid 1, which may take seconds; this one is reaped by bubblewrap.
    Returns in the child only. The sandbox ends when this process ends (the kernel kills the
    rest of the PID namespace), and it ends with the worker, with the worker's status.
    """
    child = os.fork()
    if child == 0:
        return
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)  # pid 1: the kernel drops them from inside
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 65536)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(0)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def main(argv: list[str]) -> int:
    config: dict[str, Any] = json.loads(argv[1])
    _drop_privileges(config)  # first: no cell and no library runs with the namespace's root
    if config.get("reaper"):
        _fork_reaper()
    global MAIN_PID
    MAIN_PID = os.getpid()
    worker = _Worker(config)
    worker.limit_processes()
    worker.configure_matplotlib()
    worker.preload()
    worker.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
