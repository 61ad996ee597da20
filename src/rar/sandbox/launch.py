"""How a worker is started: the bubblewrap command line, its environment, its seccomp filter.

Everything here runs in the parent; nothing here runs model code.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rar.sandbox import interpreter as _interpreter
from rar.sandbox.limits import Limits

SANDBOX_UID = 65534  # "nobody", inside the sandbox and (when RAR runs as root) on the host
SANDBOX_GID = 65534
WORK = "/work"
WORKER_PATH = Path(__file__).with_name("worker.py")
VALUES_PATH = Path(__file__).with_name("cellvalues.py")  # imported by the worker
INNER_WORKER = "/opt/rar/worker.py"
INNER_VALUES = "/opt/rar/cellvalues.py"
INNER_MPL_CACHE = "/opt/rar/matplotlib"
PASSWD = (
    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
    "nobody:x:65534:65534:sandbox:/work:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nnogroup:x:65534:\n"
HOSTS = "127.0.0.1 localhost sandbox\n::1 localhost\n"
# Syscalls model code has no business making; they fail with EPERM (seccomp, when available).
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
    "chroot", "unshare", "setns", "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
    "userfaultfd", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "acct", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "open_by_handle_at", "name_to_handle_at", "quotactl", "syslog",
    "vhangup", "fanotify_init", "iopl", "ioperm", "lookup_dcookie", "fsopen", "fsmount",
    "open_tree", "move_mount", "mount_setattr",
    # memory outside the address-space limit that outlives a process or needs no mapping
    "memfd_create", "shmget", "msgget",
)  # fmt: skip
CLONE_NEWUSER = 0x10000000


def environment(*, home: str, tmp: str, python_bin: str) -> dict[str, str]:
    """The worker's whole environment, built from nothing: no variable of the caller's passes."""
    return {
        "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "SOURCE_DATE_EPOCH": "0",  # PDF/SVG/PS files carry no creation date: same cell, same bytes
        "MPLCONFIGDIR": f"{tmp}/.rar-matplotlib",
        "XDG_CACHE_HOME": f"{tmp}/.cache",
        "XDG_CONFIG_HOME": f"{tmp}/.config",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MALLOC_ARENA_MAX": "2",
    }


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes | None:
    """A BPF program denying DENIED_SYSCALLS (and new user namespaces), or None without
    ``pyseccomp``/libseccomp. ``clone3`` answers ENOSYS so that libc falls back to ``clone``,
    whose flags a filter can inspect."""
    try:
        import pyseccomp as seccomp  # type: ignore[import-not-found,unused-ignore]
    except Exception:  # missing module, or libseccomp not found
        return None
    try:
        flt = seccomp.SyscallFilter(seccomp.ALLOW)
        for name in DENIED_SYSCALLS:
            with contextlib.suppress(Exception):  # unknown on this architecture
                flt.add_rule(seccomp.ERRNO(1), name)
        mask = seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
        flt.add_rule(seccomp.ERRNO(1), "clone", mask)
        flt.add_rule(seccomp.ERRNO(38), "clone3")
        fd = os.memfd_create("rar-seccomp")
        with os.fdopen(fd, "w+b") as handle:
            flt.export_bpf(handle)
            handle.seek(0)
            return handle.read()
    except Exception:
        return None


@functools.lru_cache(maxsize=1)
def matplotlib_cache() -> str | None:
    """A host directory holding matplotlib's font list, built once (on the host, by matplotlib
    itself, with a scrubbed environment) so that a fresh worker need not rescan fonts."""
    try:
        version = importlib.metadata.version("matplotlib")
    except importlib.metadata.PackageNotFoundError:
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = base / "rar" / "sandbox" / f"matplotlib-{version}"
    if any(target.glob("fontlist*.json")):
        return str(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
        env = environment(home=str(building), tmp=str(building), python_bin="/usr/bin")
        env["MPLCONFIGDIR"] = str(building)
        subprocess.run(
            [sys.executable, "-s", "-c", "import matplotlib.font_manager"],
            env=env, cwd=building, capture_output=True, timeout=300, check=True,
        )  # fmt: skip
        for extra in building.iterdir():
            if not extra.name.startswith("fontlist"):
                shutil.rmtree(extra, ignore_errors=True) if extra.is_dir() else extra.unlink()
        building.chmod(0o755)
        for item in building.iterdir():
            item.chmod(0o644)
        try:
            building.rename(target)
        except OSError:  # another process won the race
            shutil.rmtree(building, ignore_errors=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return str(target) if any(target.glob("fontlist*.json")) else None


@dataclass
class Launch:
    """One worker start: the command and the descriptors it inherits."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    pass_fds: list[int] = field(default_factory=list)  # closed in the parent after the start
    info_fd: int | None = None  # bubblewrap writes {"child-pid": N} here
    block_fd: int | None = None  # root mode: one byte here lets bubblewrap go on
    map_ids: bool = False  # root mode: the parent writes the namespace's uid/gid maps
    scratch: str | None = None  # unsafe-local: a private temporary directory


def _data_fd(data: bytes) -> int:
    read, write = os.pipe()
    os.write(write, data)  # small: always fits the pipe buffer
    os.close(write)
    return read


def bubblewrap(
    bwrap: str, workspace: Path, limits: Limits, worker_config: dict[str, Any], *, root_mode: bool
) -> Launch:
    """The bubblewrap command for one worker (see docs/sandbox.md for each choice)."""
    python = _interpreter.current()
    python.check()  # before any descriptor is opened
    info_r, info_w = os.pipe()
    launch = Launch(argv=[], env={}, info_fd=info_r, pass_fds=[info_w])
    args = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--as-pid-1", "--hostname", "sandbox", "--info-fd", str(info_w)]  # fmt: skip
    if root_mode:
        block_r, block_w = os.pipe()
        launch.block_fd, launch.map_ids = block_w, True
        launch.pass_fds.append(block_r)
        args += ["--userns-block-fd", str(block_r)]
    else:
        args += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    made = {"/etc", "/opt", "/opt/rar"}
    args += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/opt",
             "--perms", "0755", "--dir", "/opt/rar"]  # fmt: skip
    for name, text in (("passwd", PASSWD), ("group", GROUP), ("hosts", HOSTS)):
        fd = _data_fd(text.encode())
        launch.pass_fds.append(fd)
        args += ["--perms", "0644", "--ro-bind-data", str(fd), f"/etc/{name}"]
    for name in ("ld.so.cache", "ld.so.conf", "localtime"):
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--ro-bind", str(WORKER_PATH), INNER_WORKER]
    args += ["--ro-bind", str(VALUES_PATH), INNER_VALUES]
    cache = worker_config.get("mpl_cache")
    if isinstance(cache, str):
        args += ["--ro-bind", cache, INNER_MPL_CACHE]
        worker_config = {**worker_config, "mpl_cache": INNER_MPL_CACHE}
    tmp = str(limits.tmp_bytes)
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", tmp, "--tmpfs", "/tmp",
             "--perms", "1777", "--size", tmp, "--tmpfs", "/dev/shm",
             "--bind", str(workspace), WORK]  # fmt: skip
    made |= {"/tmp", "/dev", "/proc", WORK}
    args += python.bwrap_args(made)  # after the tmpfs: an environment under /tmp lands on top
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    program = seccomp_program()
    if program is not None:
        fd = _data_fd(program)
        launch.pass_fds.append(fd)
        args += ["--seccomp", str(fd)]
    worker_config = {**worker_config, "reaper": True}  # pid 1 (see worker._fork_reaper)
    if root_mode:
        worker_config = {**worker_config, "drop": [SANDBOX_UID, SANDBOX_GID]}
    inner = python.inside(python.executable)  # the venv's bin/python: pyvenv.cfg applies
    args += ["--chdir", WORK, "--", inner, "-s", "-P", INNER_WORKER, json.dumps(worker_config)]
    launch.argv = args
    launch.env = environment(home=WORK, tmp="/tmp", python_bin=os.path.dirname(inner))
    return launch


def local(workspace: Path, worker_config: dict[str, Any]) -> Launch:
    """unsafe_local: the same worker as a plain subprocess (rlimits and scrubbed env only)."""
    scratch = tempfile.mkdtemp(prefix="rar-sandbox-scratch-")
    config = {**worker_config, "scratch": scratch, "count_existing": True}
    python = _interpreter.current().executable  # unresolved: a venv stays a venv
    return Launch(
        argv=[python, "-s", "-P", str(WORKER_PATH), json.dumps(config)],
        env=environment(home=str(workspace), tmp=scratch, python_bin=os.path.dirname(python)),
        cwd=str(workspace),
        scratch=scratch,
    )


def write_id_maps(child_pid: int) -> None:
    """Root mode: map the namespace's root to host root (so bubblewrap can set up the mounts
    it is asked for) and the sandbox's uid/gid to the unprivileged host uid/gid 65534. The
    worker switches to 65534 before anything else; every cell runs as host "nobody", where
    RLIMIT_NPROC is enforced (the kernel exempts host root from it)."""
    mapping = f"0 0 1\n{SANDBOX_UID} {SANDBOX_UID} 1\n"
    with open(f"/proc/{child_pid}/uid_map", "w") as handle:
        handle.write(mapping)
    with open(f"/proc/{child_pid}/gid_map", "w") as handle:
        handle.write(f"0 0 1\n{SANDBOX_GID} {SANDBOX_GID} 1\n")
