"""``rar study`` from the command line: bad input, a separately started Dask cluster, and a
study killed with SIGKILL and run again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rar.store.store import Store

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
TIMEOUT = 240  # bounds a hung child only
QUESTION = "What activation energy do the Kissinger DSC data in the corpus give?"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO / "src"), str(TESTS), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.pop("RAR_DEBUG", None)
    return env


def _rar(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(store), *args],
        capture_output=True, text=True, timeout=TIMEOUT, env=_env(),
    )  # fmt: skip


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "no study spec at"),
        ("questions: [a\nseeds: 1", "is not valid YAML"),
        ("questions: [Why is it so]\nmodes: [owl_max]", "unknown mode 'owl_max'"),
        ("questions: []\nseeds: [1]", "has an empty grid"),
        ("questions: [Why is it so]\nseeds: []", "has an empty grid"),
        ("questions: [Why is it so]\ncolour: red", "colour: unknown key"),
        ("- just a list", "must be a mapping"),
    ],
)
def test_a_bad_spec_is_one_clear_line(tmp_path: Path, text: str | None, expected: str) -> None:
    path = tmp_path / "missing.yaml" if text is None else _spec(tmp_path, text)
    proc = _rar("study", str(path), store=tmp_path / "runs")
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists() or not Store(tmp_path / "runs").list_runs()


def test_an_unreachable_scheduler_is_one_clear_line(tmp_path: Path) -> None:
    spec = _spec(tmp_path, f"questions:\n  - {QUESTION}\n")
    address = f"tcp://127.0.0.1:{_free_port()}"
    proc = _rar("study", str(spec), "--scheduler", address, "--connect-timeout", "1",
                store=tmp_path / "runs")  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert f"cannot reach the Dask scheduler at {address}" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not Store(tmp_path / "runs").list_runs()  # nothing recorded


def test_an_unknown_study_is_a_clear_error(tmp_path: Path) -> None:
    proc = _rar("study", "report", "nosuchrun", store=tmp_path / "runs")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@pytest.fixture
def dask_cluster() -> Iterator[str]:
    """A ``dask scheduler`` and two ``dask worker`` processes on loopback."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    worker = [sys.executable, "-m", "distributed.cli.dask_worker"]
    procs = [subprocess.Popen([*dask, "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], env=_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]  # fmt: skip
    try:
        for _ in range(2):
            procs.append(subprocess.Popen(
                [*worker, address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard"],
                env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))  # fmt: skip
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.slow
def test_the_grid_runs_on_a_separately_started_scheduler(tmp_path: Path, dask_cluster: str) -> None:
    spec = _spec(tmp_path, f"name: remote\nquestions:\n  - {QUESTION}\nseeds: [1, 2]\n"
                 "modes: [owl_lite, owl_dl]\n")  # fmt: skip
    proc = _rar("study", str(spec), "--scheduler", dask_cluster, "--json", store=tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["counts"] == {"cells": 4, "completed": 4, "failed": 0, "reused": 0}
    store = Store(tmp_path / "r")
    assert all(store.manifest(c["run_id"]).status.value == "completed" for c in result["cells"])
    report = _rar("study", "report", result["run_id"], "--json", store=tmp_path / "r")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["replay"]["all_reproducible"] is True


def _completed(store: Store) -> Counter[str]:
    counts: Counter[str] = Counter()
    for row in store.list_runs():
        if row.status == "completed":
            manifest = store.manifest(row.run_id)
            if "study_cell" in manifest.tags:
                counts[manifest.tags["study_cell"]] += 1
    return counts


@pytest.mark.slow
def test_a_study_killed_mid_way_resumes_without_duplicates(tmp_path: Path) -> None:
    spec = _spec(tmp_path, f"name: killed\nquestions:\n  - {QUESTION}\nseeds: [1, 2, 3, 4, 5]\n"
                 "modes: [owl_lite, owl_dl]\n")  # fmt: skip
    root = tmp_path / "runs"
    study = subprocess.Popen(
        [sys.executable, "-m", "rar", "--store", str(root), "study", str(spec), "--workers", "2"],
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and sum(_completed(Store(root)).values()) < 2:
            assert study.poll() is None, study.stderr.read() if study.stderr else ""
            time.sleep(0.2)
        os.kill(study.pid, signal.SIGKILL)
        study.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the LocalCluster's orphaned workers
            os.killpg(study.pid, signal.SIGKILL)
    before = _completed(Store(root))
    assert 2 <= sum(before.values()) < 10
    proc = _rar("study", str(spec), "--workers", "2", "--json", store=root)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["counts"]["completed"] == 10
    assert result["counts"]["reused"] >= sum(before.values())
    after = _completed(Store(root))
    assert len(after) == 10 and set(after.values()) == {1}  # every cell once, none twice
    assert {c["digest"] for c in result["cells"] if c["reused"]} >= set(before)
