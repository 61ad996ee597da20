"""The code sandbox: each contained escape is a test; the failure comes back as a value, the
runtime stays alive, and no process is left behind."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import resource
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rar.cli.sandbox_cmd import sandbox_group
from rar.hashing import canonical
from rar.sandbox import (
    VOLATILE_FIELDS,
    Limits,
    Sandbox,
    SandboxClosedError,
    SandboxUnavailableError,
)
from rar.sandbox.limits import MiB
from rar.store.store import Store

CASES = Path(__file__).parent / "sandbox_cases"
HAVE_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed")
LIMITS = Limits(
    memory_bytes=512 * MiB,
    cpu_seconds=1,
    worker_cpu_seconds=60,
    wall_seconds=5,
    processes=32,
    file_bytes=32 * MiB,
    tmp_bytes=64 * MiB,
    workspace_bytes=64 * MiB,
)


def case(name: str, **values: object) -> str:
    prefix = "".join(f"{key} = {value!r}\n" for key, value in values.items())
    return prefix + (CASES / name).read_text()


def assert_gone(pids: tuple[int, ...] | list[int]) -> None:
    assert pids, "no process ids to check"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.fixture
def make_box(tmp_path: Path) -> Iterator[object]:
    """Sandboxes made by a test are closed after it, and every pid they had must be gone."""
    boxes: list[tuple[Sandbox, tuple[int, ...]]] = []

    def make(limits: Limits = LIMITS, **kwargs: object) -> Sandbox:
        workspace = tmp_path / f"ws{len(boxes)}"
        box = Sandbox(workspace, limits=limits, **kwargs)  # type: ignore[arg-type]
        boxes.append((box, box.process_ids()))
        return box

    yield make
    for box, first in boxes:
        last = box.process_ids()
        box.close()
        assert_gone(first + last)


@pytest.fixture
def box(make_box: object) -> Sandbox:
    return make_box()  # type: ignore[operator,no-any-return]


# --- escapes ------------------------------------------------------------------------------------


@needs_bwrap
def test_etc_passwd_is_synthetic(box: Sandbox) -> None:
    result = box.run_cell(
        "passwd = open('/etc/passwd').read()\n"
        "import os\nshadow = os.path.exists('/etc/shadow')\netc = sorted(os.listdir('/etc'))"
    )
    assert result.ok, result.error
    passwd = result.variables["passwd"]
    assert passwd != Path("/etc/passwd").read_text()
    assert {line.split(":")[0] for line in passwd.splitlines()} == {"root", "nobody"}
    assert result.variables["shadow"] is False
    assert "shadow" not in result.variables["etc"]


@needs_bwrap
def test_home_directory_secrets_are_unreachable(box: Sandbox) -> None:
    secret = Path.home() / f".rar-sandbox-secret-{uuid.uuid4().hex}"
    secret.write_text("sk-test-home-secret")
    try:
        result = box.run_cell(
            f"import os\nhome = os.path.exists({str(Path.home())!r}) and "
            f"os.listdir({str(Path.home())!r})\nopen({str(secret)!r}).read()"
        )
    finally:
        secret.unlink()
    assert result.status == "error"
    assert result.error is not None and result.error["type"] in (
        "FileNotFoundError",
        "PermissionError",
    )
    assert secret.name not in json.dumps(result.variables)


@needs_bwrap
def test_writes_outside_the_workspace_fail(box: Sandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    result = box.run_cell(case("escape_writes.py", OUTSIDE=str(outside)))
    assert result.ok, result.error
    refusals = {errno.EROFS, errno.ENOENT, errno.EACCES, errno.EPERM}
    assert all(code in refusals for code in result.variables["errors"].values()), result.variables
    assert not outside.exists()
    assert (box.workspace / "inside.txt").read_text() == "fine"


@needs_bwrap
def test_no_network_even_to_the_hosts_loopback(box: Sandbox) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.3)
    try:
        result = box.run_cell(case("network.py", PORT=listener.getsockname()[1]))
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody reached the host's listener
    finally:
        listener.close()
    assert result.ok, result.error
    seen = result.variables["outcome"]
    assert seen["loopback"].startswith("ConnectionRefusedError"), seen  # its own, empty lo
    assert "Network is unreachable" in seen["outside"], seen  # no route at all: no traffic
    assert seen["outside_seconds"] < 1
    assert seen["dns"] == "gaierror"
    assert result.variables["interfaces"] == ["lo"]


@needs_bwrap
def test_fork_bomb_is_bounded_by_nproc(box: Sandbox) -> None:
    result = box.run_cell(case("fork_bomb.py"), timeout=10)
    assert result.status == "limit", result.error
    assert result.error is not None and result.error["type"] == "BlockingIOError"
    assert 0 < result.variables["forked"] < LIMITS.processes
    assert box.run_cell("alive = True").variables == {"alive": True}


@needs_bwrap
def test_memory_bomb_is_a_memory_error(box: Sandbox) -> None:
    pids = box.process_ids()
    result = box.run_cell("before = 1\nhog = bytearray(2 * 1024**3)")
    assert result.status == "limit"
    assert result.error is not None and result.error["type"] == "MemoryError"
    numpy_hog = box.run_cell("import numpy as np\nhog = np.ones(2 * 1024**3 // 8)")
    assert numpy_hog.status == "limit" and "Unable to allocate" in numpy_hog.error["message"]  # type: ignore[index]
    assert box.run_cell("after = before + 1").variables == {"after": 2}
    assert box.process_ids() == pids  # same worker: nothing was killed


@needs_bwrap
def test_endless_loop_hits_the_cpu_limit(box: Sandbox) -> None:
    pids = box.process_ids()
    box.run_cell("kept = 'state'")
    started = time.monotonic()
    result = box.run_cell("while True:\n    pass", timeout=30)  # generous under load
    assert result.status == "limit"
    assert result.error is not None and result.error["type"].endswith("CpuTimeExceeded")
    assert time.monotonic() - started < 30
    assert box.run_cell("again = kept").variables == {"again": "state"}
    assert box.process_ids() == pids


@needs_bwrap
def test_signal_ignoring_loop_is_killed_at_the_lifetime_cpu_cap(make_box: object) -> None:
    limits = Limits(memory_bytes=512 * MiB, cpu_seconds=1, worker_cpu_seconds=2, wall_seconds=30)
    box: Sandbox = make_box(limits, preload=False)  # type: ignore[operator]
    old = box.process_ids()
    result = box.run_cell(
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile 1: pass"
    )
    assert result.status == "killed", result.error
    assert_gone(old)
    assert box.run_cell("x = 1").worker_restarted


@needs_bwrap
def test_long_sleep_hits_the_wall_timeout_and_a_fresh_worker_follows(box: Sandbox) -> None:
    box.run_cell("y = 1")
    old = box.process_ids()
    started = time.monotonic()
    result = box.run_cell("import time\ntime.sleep(60)", timeout=1)
    assert result.status == "timeout"
    assert 1 <= time.monotonic() - started < 5
    assert result.error is not None and "fresh worker" in result.error["message"]
    assert_gone(old)
    after = box.run_cell("y")
    assert after.worker_restarted and after.status == "error"
    assert after.error is not None and after.error["type"] == "NameError"
    assert not box.run_cell("z = 2").worker_restarted


@needs_bwrap
def test_the_parents_environment_never_reaches_the_sandbox(
    make_box: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + uuid.uuid4().hex)
    box: Sandbox = make_box()  # type: ignore[operator]
    result = box.run_cell(case("env_leak.py"))
    assert result.ok, result.error
    assert not any(result.variables["found"].values()), result.variables
    assert "OPENAI_API_KEY" not in result.variables["names"]
    assert {"1", "self"} <= set(result.variables["readable"])
    assert result.variables["found"].get("/proc/self/environ") is False  # read, and clean


@needs_bwrap
def test_symlinks_and_special_files_are_refused_and_never_followed(
    box: Sandbox, tmp_path: Path
) -> None:
    trap = tmp_path / "trap.fifo"  # a host FIFO: opening it for reading would wake the writer
    os.mkfifo(trap)
    opened = threading.Event()

    def writer() -> None:
        with open(trap, "wb"):
            opened.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    result = box.run_cell(
        "import os\nos.symlink('/etc/passwd', 'passwd')\n"
        f"os.symlink({str(trap)!r}, 'trap')\nos.symlink('/root', 'home')\n"
        "os.mkfifo('pipe')\nopen('real.txt', 'w').write('data')"
    )
    assert result.ok, result.error
    refused = {item.path: item.kind for item in result.refused}
    assert refused == {"passwd": "symlink", "trap": "symlink", "home": "symlink", "pipe": "fifo"}
    assert [art.path for art in result.artifacts] == ["real.txt"]
    assert not opened.wait(0.2), "the collector opened a symlink's target"
    os.close(os.open(trap, os.O_RDONLY | os.O_NONBLOCK))  # release the writer
    thread.join(5)


@needs_bwrap
def test_killing_the_parent_from_inside_only_touches_the_sandbox(box: Sandbox) -> None:
    pids = box.process_ids()
    result = box.run_cell("import os\nparent = os.getppid()\nos.kill(parent, 9)")
    assert result.status in ("ok", "error")
    assert result.variables.get("parent") == 1  # the sandbox's own init, not the caller
    assert box.run_cell("fine = 1").variables == {"fine": 1}
    assert box.process_ids() == pids
    everyone = box.run_cell("import os\nos.kill(-1, 9)")  # every process it may signal
    assert everyone.status in ("ok", "error")  # ESRCH: nothing else it may signal
    assert box.process_ids() == pids
    assert box.run_cell("back = 1").variables == {"back": 1}


@needs_bwrap
def test_gigabytes_of_output_are_capped(box: Sandbox) -> None:
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = box.run_cell("for _ in range(1024):\n    print('x' * (1 << 20))")  # 1 GiB
    assert result.ok and result.stdout_truncated
    assert len(result.stdout.encode()) == LIMITS.output_bytes
    below = box.run_cell("import os\nfor _ in range(64):\n    os.write(1, b'y' * (1 << 20))")
    assert below.status == "limit" and below.stdout_truncated  # EFBIG past RLIMIT_FSIZE
    assert len(below.stdout.encode()) <= LIMITS.output_bytes
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert grown_kib < 64 * 1024


@needs_bwrap
def test_tmp_and_workspace_are_bounded(make_box: object) -> None:
    limits = Limits(memory_bytes=512 * MiB, tmp_bytes=8 * MiB, workspace_bytes=8 * MiB,
                    file_bytes=32 * MiB, wall_seconds=10)  # fmt: skip
    box: Sandbox = make_box(limits, preload=False)  # type: ignore[operator]
    tmp = box.run_cell("open('/tmp/big', 'wb').write(b'0' * (16 << 20))")
    assert tmp.status == "limit" and "No space left" in tmp.error["message"]  # type: ignore[index]
    after = box.run_cell("for i in range(3):\n    open(f'f{i}', 'wb').write(b'0' * (4 << 20))")
    assert after.status == "limit"
    assert after.error is not None and after.error["type"] == "WorkspaceLimitExceeded"
    for name in ("f0", "f1", "f2"):
        (box.workspace / name).unlink()
    started = time.monotonic()
    during = box.run_cell(
        "import itertools\n"
        "for i in itertools.count():\n    open(f'g{i}', 'wb').write(b'0' * (1 << 20))"
    )
    assert during.status == "limit" and "during the cell" in during.error["message"]  # type: ignore[index]
    assert time.monotonic() - started < 10


# --- what is captured ------------------------------------------------------------------------


@needs_bwrap
def test_variables_and_artifacts_are_captured(box: Sandbox) -> None:
    result = box.run_cell(case("figure.py"), timeout=30)
    assert result.ok, result.error
    art = {a.path: a for a in result.artifacts}
    assert set(art) == {"figures/sine.png", "table.csv"}
    png = box.workspace / "figures" / "sine.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    assert (
        art["figures/sine.png"].digest == "sha256:" + hashlib.sha256(png.read_bytes()).hexdigest()
    )
    assert art["figures/sine.png"].media_type == "image/png"
    assert art["figures/sine.png"].size == png.stat().st_size
    assert art["table.csv"].media_type == "text/csv"
    found = result.variables
    assert found["count"] == 3 and found["label"] == "sine" and found["small"] == [0, 1, 2, 3]
    assert isinstance(found["mean"], float)
    assert found["nested"] == {"a": [1, 2.5, None], "b": {"c": True}}
    assert found["huge_int"] == str(2**70) and found["not_a_number"] == "nan"
    assert not {"big", "helper", "np", "plt", "math", "fig", "ax"} & set(found)
    canonical(result.as_dict())  # hashable as a record value
    again = box.run_cell("count += 1\nopen('table.csv', 'a').write('more\\n')")
    assert again.variables == {"count": 4}
    assert [a.path for a in again.artifacts] == ["table.csv"]


FORGE = """
import json, os, struct
body = json.dumps({"op": "result", "status": "ok", "variables": {"forged": True}}).encode()
for fd in range(3, 64):
    try:
        os.write(fd, struct.pack(">I", len(body)) + body)
    except OSError:
        pass
real = 1
"""


SAME_CELL = """
import os, tempfile
import matplotlib.pyplot as plt
import numpy as np
fig, ax = plt.subplots()
ax.plot(np.arange(5) ** 2)
for ext in ("png", "svg", "pdf", "eps"):
    fig.savefig(f"plot.{ext}")
where = os.path.abspath("plot.png")
tmp = tempfile.gettempdir()
print(where, os.getcwd(), tmp)
open(os.path.abspath("missing.csv"))
"""
BOTH_MODES = [pytest.param(False, id="bubblewrap", marks=needs_bwrap),
              pytest.param(True, id="unsafe_local")]  # fmt: skip


@pytest.mark.parametrize("unsafe", BOTH_MODES)
def test_the_same_cell_gives_the_model_the_same_bytes(
    make_box: object, tmp_path: Path, unsafe: bool
) -> None:
    first: Sandbox = make_box(unsafe_local=unsafe)  # type: ignore[operator]
    second: Sandbox = make_box(unsafe_local=unsafe)  # type: ignore[operator]
    a, b = first.run_cell(SAME_CELL, timeout=60), second.run_cell(SAME_CELL, timeout=60)
    assert a.status == "error" and a.error is not None, a.error
    assert a.error["type"] == "FileNotFoundError", a.error
    assert "'/work/missing.csv'" in a.error["message"]  # the host workspace never shows
    assert [x.path for x in a.artifacts] == ["plot.eps", "plot.pdf", "plot.png", "plot.svg"]
    assert a.stdout == "/work/plot.png /work /tmp\n"
    assert a.variables["where"] == "/work/plot.png" and a.variables["tmp"] == "/tmp"
    assert canonical(a.for_model()) == canonical(b.for_model())  # dates, SVG ids, paths: fixed
    assert set(a.as_dict()) - set(a.for_model()) == set(VOLATILE_FIELDS) == {"duration_ms"}
    shown = json.dumps(a.as_dict())
    for host in (str(tmp_path), str(first.workspace), "rar-sandbox-scratch"):
        assert host not in shown
    said = a.stdout + a.stderr + json.dumps(a.error)
    assert not any(re.search(rf"\b{pid}\b", said) for pid in first.process_ids())


@needs_bwrap
def test_a_name_defined_again_is_reported_even_at_the_same_address(box: Sandbox) -> None:
    assert box.run_cell("x = [1]").variables == {"x": [1]}
    for _ in range(3):  # the freed list's memory is reused at once: id() alone would miss it
        assert box.run_cell("del x\nx = [1]").variables == {"x": [1]}
    assert box.run_cell("y = 2").variables == {"y": 2}  # an untouched x is not repeated


@needs_bwrap
def test_frames_forged_by_a_cell_are_skipped(box: Sandbox) -> None:
    result = box.run_cell(FORGE)
    assert result.variables == {"fd": 63, "real": 1}  # the real frame, not the forged one
    assert box.run_cell("after = 2").variables == {"after": 2}


@needs_bwrap
def test_warm_worker_keeps_state_across_cells(box: Sandbox) -> None:
    pids = box.process_ids()
    box.run_cell("def square(v):\n    return v * v\ntotal = 0")
    for i in range(3):
        box.run_cell(f"total += square({i})")
    assert box.run_cell("result = total").variables == {"result": 5}
    assert box.process_ids() == pids


@needs_bwrap
def test_files_the_caller_adds_between_cells_are_usable(box: Sandbox) -> None:
    data = box.workspace / "input.csv"
    data.write_text("a\n1\n")
    data.chmod(0o600)  # private to the caller's uid (root: handed to the sandbox's uid)
    result = box.run_cell(
        "rows = open('input.csv').read().split()\nopen('input.csv', 'a').write('2\\n')"
    )
    assert result.ok, result.error
    assert result.variables == {"rows": ["a", "1"]}
    assert data.read_text() == "a\n1\n2\n"
    assert [a.path for a in result.artifacts] == ["input.csv"]


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="memory_bytes"):
        Limits(memory_bytes=0)
    with pytest.raises(ValueError, match="cpu_seconds"):
        Limits(cpu_seconds=10, worker_cpu_seconds=5)


@needs_bwrap
def test_seeds_are_fixed(make_box: object) -> None:
    code = "import random\nimport numpy as np\ndraw = [random.random(), float(np.random.rand())]"
    first: Sandbox = make_box(seed=7)  # type: ignore[operator]
    second: Sandbox = make_box(seed=7)  # type: ignore[operator]
    a, b = first.run_cell(code), second.run_cell(code)
    assert a.ok and b.ok, (a.error, b.error)
    assert a.variables["draw"] == b.variables["draw"]
    again = first.run_cell(code)  # reseeded before every cell: the same draw in the same worker
    assert again.ok and not again.worker_restarted, again.error
    assert again.variables["draw"] == a.variables["draw"]
    other: Sandbox = make_box(seed=8)  # type: ignore[operator]
    changed = other.run_cell(code)
    assert changed.ok, changed.error
    assert changed.variables["draw"] != a.variables["draw"]


@needs_bwrap
def test_seccomp_blocks_new_namespaces(box: Sandbox) -> None:
    if not box.info["seccomp"]:
        pytest.skip("pyseccomp is not installed: no seccomp filter")
    result = box.run_cell(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "rc = libc.unshare(0x10000000)\nerr = ctypes.get_errno()"
    )
    assert result.variables == {"rc": -1, "err": errno.EPERM}


@needs_bwrap
def test_runs_as_nobody_without_capabilities(box: Sandbox) -> None:
    result = box.run_cell(
        "import os\nuid = os.getuid()\n"
        "caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')]"
    )
    assert result.variables == {"uid": 65534, "caps": ["0000000000000000"]}
    assert box.info["host_uid"] == (65534 if os.geteuid() == 0 else os.getuid())


# --- availability, unsafe-local, lifecycle ---------------------------------------------------


def test_missing_bubblewrap_raises_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        Sandbox(tmp_path / "ws")


def test_a_failing_bubblewrap_raises_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: "/bin/false")
    with pytest.raises(SandboxUnavailableError, match="bubblewrap"):
        Sandbox(tmp_path / "ws", preload=False)


def test_unsafe_local_runs_the_same_worker_and_says_so(
    make_box: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)  # no bwrap needed
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + uuid.uuid4().hex)
    box: Sandbox = make_box(unsafe_local=True)  # type: ignore[operator]
    result = box.run_cell(
        "import os\nkey = 'OPENAI_API_KEY' in os.environ\nopen('out.txt', 'w').write('x')"
    )
    assert result.ok and result.unsafe and result.variables == {"key": False}
    assert [a.path for a in result.artifacts] == ["out.txt"]
    assert box.info["isolation"].startswith("none")
    old = box.process_ids()
    assert box.run_cell("import time\ntime.sleep(30)", timeout=0.5).status == "timeout"
    assert_gone(old)


@needs_bwrap
def test_the_sandbox_dies_with_its_host_process(tmp_path: Path) -> None:
    script = (
        "import os, sys\nfrom rar.sandbox import Sandbox\n"
        f"box = Sandbox({str(tmp_path / 'ws')!r}, preload=False)\nbox.run_cell('import time')\n"
        "import threading, time\nprint(*box.process_ids(), flush=True)\n"
        "threading.Thread(target=box.run_cell, args=('time.sleep(60)',)).start()\n"
        "time.sleep(0.3)\nos.kill(os.getpid(), 9)\n"  # dies while the cell runs
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == -9, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _exists(pid)]
        if not alive:
            break
        time.sleep(0.05)
    assert_gone(pids)


@needs_bwrap
def test_a_sandbox_made_in_a_short_lived_thread_keeps_its_worker(tmp_path: Path) -> None:
    made: list[Sandbox] = []
    thread = threading.Thread(target=lambda: made.append(Sandbox(tmp_path / "ws", preload=False)))
    thread.start()
    thread.join()
    time.sleep(0.2)
    with made[0] as box:
        result = box.run_cell("x = 1")
        assert result.ok and not result.worker_restarted


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@needs_bwrap
def test_close_is_final_and_idempotent(box: Sandbox) -> None:
    pids = box.process_ids()
    box.close()
    box.close()
    assert_gone(pids)
    with pytest.raises(SandboxClosedError):
        box.run_cell("1")


@needs_bwrap
def test_results_go_through_run_effect(box: Sandbox, store: Store) -> None:
    from rar.redaction import Redactor
    from rar.runtime.start import record

    run = record("sandbox", store=store, seed=1, redactor=Redactor(env={}))
    with run:
        code = "x = 6 * 7"
        value = run.effect("sandbox", {"code": code}, lambda: box.run_cell(code).as_dict())
    assert value["status"] == "ok" and value["variables"] == {"x": 42}


# --- the command line ----------------------------------------------------------------------


@needs_bwrap
def test_cli_run_json(tmp_path: Path) -> None:
    script = tmp_path / "cell.py"
    script.write_text("print('hi')\nanswer = 42\nopen('a.txt', 'w').write('A')\n")
    workspace = tmp_path / "ws"
    out = CliRunner().invoke(
        sandbox_group, ["run", str(script), "--json", "--workspace", str(workspace)]
    )
    assert out.exit_code == 0, out.output
    record = json.loads(out.output)
    assert record["status"] == "ok" and record["stdout"] == "hi\n"
    assert record["variables"] == {"answer": 42}
    assert [a["path"] for a in record["artifacts"]] == ["a.txt"]
    assert (workspace / "a.txt").read_text() == "A"


@needs_bwrap
def test_cli_run_human_error_and_timeout(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("x = 1\n1 / 0\n")
    out = CliRunner().invoke(sandbox_group, ["run", str(script)])
    assert out.exit_code == 1
    assert "status: error" in out.output and "ZeroDivisionError" in out.output
    assert "x = 1" in out.output
    script.write_text("import time\ntime.sleep(30)\n")
    out = CliRunner().invoke(sandbox_group, ["run", str(script), "--timeout", "0.5"])
    assert out.exit_code == 1 and "status: timeout" in out.output


def test_cli_bad_input_and_unsafe_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = CliRunner().invoke(sandbox_group, ["run", str(tmp_path / "missing.py")])
    assert out.exit_code == 2
    monkeypatch.setattr(shutil, "which", lambda *_a, **_k: None)
    script = tmp_path / "ok.py"
    script.write_text("v = 1\n")
    out = CliRunner().invoke(sandbox_group, ["run", str(script)])
    assert out.exit_code == 3 and "apt-get install bubblewrap" in out.output
    out = CliRunner().invoke(sandbox_group, ["run", str(script), "--unsafe-local", "--json"])
    assert out.exit_code == 0 and json.loads(out.output)["unsafe"] is True


# --- nothing left in the workspace runs with elevated rights -------------------------------------


def _unsafe_modes(root: Path) -> dict[str, str]:
    """Entries of ``root`` (and ``root`` itself) with setuid, setgid, sticky or o+w bits."""
    from rar.sandbox.workspace import UNSAFE_BITS

    found = {}
    for path in [root, *root.rglob("*")]:
        mode = os.lstat(path).st_mode
        if not stat.S_ISLNK(mode) and mode & UNSAFE_BITS:
            found[str(path.relative_to(root))] = oct(stat.S_IMODE(mode))
    return found


@needs_bwrap
def test_setuid_and_setgid_files_are_refused_and_their_bits_cleared(box: Sandbox) -> None:
    result = box.run_cell(
        "import os, shutil\n"
        "for name, mode in [('suid', 0o4755), ('sgid', 0o2755), ('both', 0o6755)]:\n"
        "    shutil.copy('/bin/true', name)\n"
        "    os.chmod(name, mode)\n"
        "os.link('suid', 'suid-link')\n"
        "open('sticky', 'w').write('s')\nos.chmod('sticky', 0o1644)\n"
        "open('open', 'w').write('o')\nos.chmod('open', 0o666)\n"
        "os.mkdir('shared')\nos.chmod('shared', 0o3777)\n"
        "os.chmod('/work', 0o7777)\n"
        "modes = {n: oct(os.stat(n).st_mode & 0o7777) for n in ['suid', 'sgid', 'both', 'shared']}"
    )
    assert result.ok, result.error
    # inside, the chmods worked: the sandbox's user owns these files
    assert result.variables["modes"] == {
        "suid": "0o4755", "sgid": "0o2755", "both": "0o6755", "shared": "0o3777"
    }  # fmt: skip
    refused = {item.path: item.kind for item in result.refused}
    assert refused == {"suid": "setuid", "sgid": "setgid", "both": "setuid", "suid-link": "setuid"}
    assert all("bits were cleared" in item.reason for item in result.refused)
    assert sorted(art.path for art in result.artifacts) == ["open", "sticky"]
    assert _unsafe_modes(box.workspace) == {}
    assert stat.S_IMODE(os.lstat(box.workspace / "suid").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(box.workspace / "shared").st_mode) == 0o775
    again = box.run_cell("pass")
    assert again.ok and again.refused == () and again.artifacts == ()  # said once


@needs_bwrap
def test_a_file_made_setuid_between_cells_is_cleared_before_the_next_cell(box: Sandbox) -> None:
    first = box.run_cell(
        "import subprocess\nopen('late', 'w').write('x')\n"
        "subprocess.Popen(['sh', '-c', 'sleep 0.3; chmod 4755 late'])"
    )
    assert first.ok and [art.path for art in first.artifacts] == ["late"]
    deadline = time.monotonic() + 5
    while not os.lstat(box.workspace / "late").st_mode & stat.S_ISUID:
        assert time.monotonic() < deadline, "the background chmod never happened"
        time.sleep(0.05)
    assert box.run_cell("pass").ok
    assert _unsafe_modes(box.workspace) == {}


@needs_bwrap
def test_a_file_made_setuid_after_the_last_cell_is_cleared_when_the_sandbox_closes(
    make_box: object,
) -> None:
    box: Sandbox = make_box()  # type: ignore[operator]
    assert box.run_cell(
        "import subprocess\nopen('late', 'w').write('x')\n"
        "subprocess.Popen(['sh', '-c', 'sleep 0.3; chmod 4755 late'])"
    ).ok
    deadline = time.monotonic() + 5
    while not os.lstat(box.workspace / "late").st_mode & stat.S_ISUID:
        assert time.monotonic() < deadline, "the background chmod never happened"
        time.sleep(0.05)
    box.close()
    assert _unsafe_modes(box.workspace) == {}


def test_collecting_clears_unsafe_bits_without_following_links(tmp_path: Path) -> None:
    from rar.sandbox import workspace as ws

    root = tmp_path / "ws"
    root.mkdir()
    before = ws.scan(root)
    host = tmp_path / "host-tool"  # outside the workspace: a link to it must not be chmodded
    host.write_bytes(b"#!/bin/sh\n")
    host.chmod(0o4755)
    (root / "tool").write_bytes(b"#!/bin/sh\n")
    (root / "tool").chmod(0o6755)
    os.symlink(host, root / "to-host")
    (root / "notes.txt").write_text("n")
    (root / "notes.txt").chmod(0o666)
    artifacts, refused, _after = ws.collect(root, before)
    assert [(r.path, r.kind) for r in refused] == [("to-host", "symlink"), ("tool", "setuid")]
    assert [a.path for a in artifacts] == ["notes.txt"]
    assert stat.S_IMODE(os.lstat(root / "tool").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(root / "notes.txt").st_mode) == 0o664
    assert stat.S_IMODE(os.lstat(host).st_mode) == 0o4755  # the link was not followed


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file of another user")
def test_a_hard_link_to_a_host_file_of_another_user_keeps_its_mode_and_is_refused(
    tmp_path: Path,
) -> None:
    from rar.sandbox import workspace as ws

    root = tmp_path / "ws"
    root.mkdir()
    os.chown(root, 65534, 65534)  # as after hand_over
    host = tmp_path / "host-tool"
    host.write_bytes(b"#!/bin/sh\n")
    os.chown(host, 1234, 1234)
    host.chmod(0o4755)
    before = ws.scan(root)
    os.link(host, root / "tool")
    artifacts, refused, _after = ws.collect(root, before)
    assert artifacts == [] and [(r.path, r.kind) for r in refused] == [("tool", "setuid")]
    assert "left alone" in refused[0].reason
    assert stat.S_IMODE(os.lstat(host).st_mode) == 0o4755  # the host's file is not changed
    assert ws.collect(root, _after)[1] == []  # refused once, not after every cell


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_rar_sandbox_run_prints_no_credential(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rar.cli import cli

    key = "sk-proj-" + "Zq8" * 16
    cell = tmp_path / "leak.py"
    cell.write_text(f"token = {key!r}\nprint(token)\nraise ValueError(token)\n")
    for extra in ([], ["--json"]):
        outcome = CliRunner().invoke(cli, ["sandbox", "run", str(cell), *extra])
        assert outcome.exit_code == 1, outcome.output
        assert key not in outcome.output and "[REDACTED:" in outcome.output
