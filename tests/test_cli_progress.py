"""Long commands show progress on a terminal, and only there."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import record_small_run

from rar.replay import execute, replay
from rar.store.store import Store
from rar.store.verify import verify_store


def steps(run: Any, n: int) -> int:
    total = 0
    for i in range(n):
        total += run.effect("tool", {"name": "step", "args": {"i": i}}, lambda i=i: i)
    return total


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run rar with stderr on a pseudo-terminal (stdout a pipe); return code, out, err."""
    leader, follower = pty.openpty()
    tests = str(Path(__file__).parent)  # the entrypoint lives in this module
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm", "PYTHONPATH": tests}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rar", *args], cwd=cwd, stdout=subprocess.PIPE,
        stderr=follower, env=env,
    )  # fmt: skip
    os.close(follower)
    err = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read() if proc.stdout else b""
    proc.wait(timeout=60)
    os.close(leader)
    return proc.returncode, out.decode(), err.decode("utf-8", "replace")


def test_verify_and_replay_report_progress_to_a_callback(store: Store) -> None:
    for _ in range(3):
        record_small_run(store)
    seen: list[tuple[int, int]] = []
    assert verify_store(store, progress=lambda done, total: seen.append((done, total))).ok
    assert seen == [(1, 3), (2, 3), (3, 3)]
    run = execute(steps, inputs={"n": 5}, store=store)
    served: list[tuple[int, int]] = []
    report = replay(run.id, store=store, progress=lambda done, total: served.append((done, total)))
    assert report.reproducible
    assert served[-1] == (report.served, report.served) and len(served) == report.served


def test_a_terminal_sees_progress_and_a_pipe_or_json_does_not(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs", create=True)
    run = execute(steps, inputs={"n": 200}, store=store)
    store.close()
    code, out, err = _on_a_terminal(["replay", run.id], tmp_path)
    assert code == 0, err
    assert "Replaying effects" in err and "reproducible" in out
    code, out, err = _on_a_terminal(["verify"], tmp_path)
    assert code == 0 and "Verifying runs" in err
    code, out, err = _on_a_terminal(["replay", run.id, "--json"], tmp_path)
    assert code == 0 and "Replaying" not in err
    piped = subprocess.run(
        [sys.executable, "-m", "rar", "verify"], cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert piped.returncode == 0 and "Verifying" not in piped.stderr
