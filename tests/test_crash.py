"""Crash safety: a writer killed with SIGKILL loses nothing it acknowledged.

The child (``tests/scripts/crash_writer.py``) records one run and prints the number of effects
acknowledged after every ``run.effect`` returns; the parent kills it at a random moment and checks
the store: acknowledged effects are all in the log, the run and the whole store verify, a torn
tail (if the kill hit a write) is repaired and reported, and the run can be reopened and extended.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.hashing import digest_bytes
from rar.redaction import Redactor
from rar.store.blobs import PACK_MAGIC
from rar.store.log import read_tail
from rar.store.store import EVENTS_NAME, Store
from rar.store.verify import verify_store
from rar.store.writer import RunWriter

SRC = Path(__file__).resolve().parents[1] / "src"
SCRIPT = Path(__file__).resolve().parent / "scripts" / "crash_writer.py"
KILLS = 30
START_TIMEOUT = 60.0  # generous: only bounds a hung child, never decides the outcome


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def _run_id(n: int) -> str:
    return f"20240101-000000-{n:06x}"


def _start_writer(
    store_path: Path,
    run_id: str,
    seed: int,
    durable: bool,
    out: Path,
    stop_after: int | None = None,
) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        str(SCRIPT),
        str(store_path),
        run_id,
        str(seed),
        "1" if durable else "0",
    ]
    if stop_after is not None:
        args.append(str(stop_after))
    with open(out, "wb") as stdout:
        return subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE, env=_env())


def _acknowledged(out: Path) -> int:
    """The last count the child printed completely (a line cut by the kill does not count)."""
    text = out.read_bytes().decode()
    lines = text.split("\n")[:-1]  # the part after the last newline is incomplete
    return int(lines[-1]) if lines else 0


def _wait_for_output(proc: subprocess.Popen[bytes], out: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while out.stat().st_size == 0:
        if proc.poll() is not None:
            raise AssertionError(
                f"writer exited early ({proc.returncode}): "
                f"{proc.stderr.read().decode() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("writer produced no output")
        time.sleep(0.001)


def _effect_ordinals(store: Store, run_id: str) -> list[int]:
    return [
        store.resolve_payload(e["request"])["i"]
        for e in store.events(run_id)
        if e["type"] == "effect"
    ]


def _torn_packs(store: Store) -> set[str]:
    torn = set()
    for name in store.reader.iter_pack_names():
        problem = store.reader.scan(name).problem
        assert problem is None or problem.startswith("torn"), (name, problem)
        if problem:
            torn.add(name)
    return torn


class Repairs(NamedTuple):
    """What ``rar verify`` repaired after one kill."""

    torn_bytes: int  # the log's torn tail before the repair
    log: list[str]  # the `repaired` entries about logs (verifying the killed run)
    packs: set[str]  # the packs whose torn last record was dropped


def _check_after_kill(store_path: Path, run_id: str, acknowledged: int) -> Repairs:
    """Every check of one kill; returns what verify repaired."""
    store = Store(store_path)
    try:
        log = store.run_dir(run_id) / EVENTS_NAME
        # (a) every acknowledged effect is in the log, in order; at most one more (recorded,
        # killed before the acknowledgement was printed)
        ordinals = _effect_ordinals(store, run_id)
        assert ordinals == list(range(len(ordinals)))
        assert acknowledged <= len(ordinals) <= acknowledged + 1

        # (b) the run verifies; a torn last line is dropped and listed under `repaired`
        torn = read_tail(log).torn_bytes
        report = verify_store(store, [run_id])
        assert report.ok, report.problems
        repaired_log = [r for r in report.repaired if not r.startswith("pack ")]
        assert len(repaired_log) == (1 if torn else 0), report.repaired
        assert read_tail(log).torn_bytes == 0
        assert log.read_bytes().endswith(b"\n")

        # (c) the whole store verifies; a torn pack record is dropped and listed
        torn_packs = _torn_packs(store)
        report = verify_store(store)
        assert report.ok, report.problems
        repaired_packs = {
            r.split()[1].rstrip(":") for r in report.repaired if r.startswith("pack ")
        }
        assert repaired_packs == torn_packs, report.repaired
        # no other run's log needed repair: earlier kills' repairs held
        assert len(report.repaired) == len(repaired_packs), report.repaired
        assert not _torn_packs(store)
        assert verify_store(store).repaired == []  # repaired once, for good
    finally:
        store.close()

    # (d) the run reopens for writing and its chain continues
    store = Store(store_path)
    try:
        before = read_tail(log)
        writer = RunWriter(store, run_id, redactor=Redactor(env={}), create=False)
        try:
            assert writer.log.repaired_bytes == 0  # verify repaired it already
            seq, _ = writer.append({"type": "note", "level": "info", "text": "resumed"}, sync=True)
        finally:
            writer.close()
        assert seq == before.seq + 1
        last = log.read_bytes().split(b"\n")[-2]
        assert orjson.loads(last)["prev"] == before.digest
        report = verify_store(store, [run_id])
        assert report.ok, report.problems
        assert len(_effect_ordinals(store, run_id)) >= acknowledged
    finally:
        store.close()
    return Repairs(torn, repaired_log, repaired_packs)


# A SIGKILL almost never lands inside a write(2) (none did in 90 kills measured), so the kill
# loop also leaves, on a schedule, what a kill during a write would: a torn last line in the log
# or a torn last record in the run's pack.
TEARS = (None, "log", "pack")
TORN_RECORD = struct.pack(">c32sBII", b"B", bytes(32), 0, 100, 100) + b"x" * 10


def _tear(store_path: Path, run_id: str, tear: str | None) -> str | None:
    """Leave a torn tail in the killed run's log or pack; return the pack's name."""
    if tear == "log":
        with open(store_path / run_id / EVENTS_NAME, "ab") as handle:
            handle.write(TORN)
    elif tear == "pack":
        packs = store_path / "blobs" / "packs"
        mine = sorted(packs.glob(f"{run_id}.*.pack"))
        if not mine:  # killed before its first blob: a pack that got its header only
            mine = [packs / f"{run_id}.1.pack"]
            mine[0].write_bytes(PACK_MAGIC)
        with open(mine[-1], "ab") as handle:
            handle.write(TORN_RECORD)
        return mine[-1].stem
    return None


class Kill(NamedTuple):
    run_id: str
    tear: str | None
    torn_pack: str | None  # the pack _tear tore
    repairs: Repairs


def _kill_loop(store_path: Path, work: Path, lane: int, kills: int) -> list[Kill]:
    """Start, kill and check ``kills`` writers one after the other; returns what was repaired."""
    rng = random.Random(20240917 + lane)
    Store(store_path, create=True).close()
    done: list[Kill] = []
    for k in range(kills):
        n = lane * 1000 + k
        out = work / f"out-{n}.txt"
        proc = _start_writer(store_path, _run_id(n), seed=n, durable=k % 2 == 0, out=out)
        try:
            _wait_for_output(proc, out)
            time.sleep(rng.uniform(0.005, 0.080))
        finally:
            proc.kill()
            proc.wait()
            if proc.stderr:
                proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        acknowledged = _acknowledged(out)
        assert acknowledged >= 1
        tear = TEARS[k % len(TEARS)]
        torn_pack = _tear(store_path, _run_id(n), tear)
        repairs = _check_after_kill(store_path, _run_id(n), acknowledged)
        done.append(Kill(_run_id(n), tear, torn_pack, repairs))

    store = Store(store_path)
    try:
        rows = store.list_runs()
        assert sorted(r.run_id for r in rows) == [_run_id(lane * 1000 + k) for k in range(kills)]
        assert {store.display_status(r) for r in rows} == {"interrupted"}
        report = verify_store(store)
        assert report.ok and report.repaired == [], report
    finally:
        store.close()
    return done


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_no_acknowledged_effect(tmp_path: Path) -> None:
    # Two independent lanes (one store each) so that one lane's checks overlap the other
    # lane's child start-up; KILLS kills in all.
    lanes = 2
    with ThreadPoolExecutor(lanes) as pool:
        futures = [
            pool.submit(_kill_loop, tmp_path / f"runs-{lane}", tmp_path, lane, KILLS // lanes)
            for lane in range(lanes)
        ]
        kills = [kill for future in futures for kill in future.result()]
    assert len(kills) == KILLS
    for kill in kills:
        repairs = kill.repairs
        # only the killed run's own files are ever repaired
        assert all(entry.startswith(f"{kill.run_id}: ") for entry in repairs.log), kill
        assert all(name.startswith(f"{kill.run_id}.") for name in repairs.packs), kill
        if kill.tear == "log":
            assert repairs.torn_bytes >= len(TORN), kill  # the kill's own tear, if any, and ours
            assert repairs.log == [
                f"{kill.run_id}: dropped a torn last line "
                f"({repairs.torn_bytes} bytes never acknowledged)"
            ], kill
        if kill.tear == "pack":
            assert repairs.packs == {kill.torn_pack}, kill
    # every torn tail left was repaired (and the kill loop checked that nothing else was)
    assert sum(bool(k.repairs.log) for k in kills) >= sum(k.tear == "log" for k in kills) > 0
    assert sum(len(k.repairs.packs) for k in kills) >= sum(k.tear == "pack" for k in kills) > 0


def _crashed_run(tmp_path: Path, effects: int = 6) -> tuple[Path, str]:
    """A run whose writer died after ``effects`` acknowledged effects (no run.finished)."""
    store_path = tmp_path / "runs"
    run_id = _run_id(0xABC)
    out = tmp_path / "out.txt"
    proc = _start_writer(store_path, run_id, seed=1, durable=True, out=out, stop_after=effects)
    _, err = proc.communicate(timeout=START_TIMEOUT)
    assert proc.returncode == 0, err.decode()
    assert _acknowledged(out) == effects
    return store_path, run_id


TORN = b'{"duration_us":12,"kind":"tool","ordinal":99,"prev":"sha256:0123'


def test_a_torn_last_line_is_dropped_when_a_writer_reopens_the_run(tmp_path: Path) -> None:
    store_path, run_id = _crashed_run(tmp_path)
    log = store_path / run_id / EVENTS_NAME
    complete = log.read_bytes()
    last = complete.split(b"\n")[-2]
    with open(log, "ab") as handle:
        handle.write(TORN)

    store = Store(store_path)
    try:
        writer = RunWriter(store, run_id, redactor=Redactor(env={}), create=False)
        try:
            assert writer.log.repaired_bytes == len(TORN)
            assert log.read_bytes() == complete  # cut back to the last complete line
            seq, _ = writer.append({"type": "note", "level": "info", "text": "resumed"}, sync=True)
        finally:
            writer.close()
        assert seq == orjson.loads(last)["seq"] + 1
        new = log.read_bytes()[len(complete) :]
        assert new.endswith(b"\n") and new.count(b"\n") == 1
        assert orjson.loads(new)["prev"] == digest_bytes(last)
        report = verify_store(store)
        assert report.ok, report.problems
        assert report.repaired == []
    finally:
        store.close()


def test_rar_verify_repairs_a_torn_last_line_reports_it_and_exits_0(tmp_path: Path) -> None:
    store_path, run_id = _crashed_run(tmp_path)
    log = store_path / run_id / EVENTS_NAME
    complete = log.read_bytes()
    with open(log, "ab") as handle:
        handle.write(TORN)

    result = CliRunner().invoke(cli, ["--store", str(store_path), "verify", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["problems"] == []
    assert len(report["repaired"]) == 1
    assert report["repaired"][0].startswith(run_id)
    assert f"{len(TORN)} bytes" in report["repaired"][0]
    assert log.read_bytes() == complete

    # the repair is done once: a second verify finds nothing to repair
    result = CliRunner().invoke(cli, ["--store", str(store_path), "verify", run_id])
    assert result.exit_code == 0, result.output
    assert "repaired" not in result.stdout


def test_rar_verify_human_output_names_the_repaired_run(tmp_path: Path) -> None:
    store_path, run_id = _crashed_run(tmp_path, effects=2)
    with open(store_path / run_id / EVENTS_NAME, "ab") as handle:
        handle.write(TORN)
    result = CliRunner().invoke(cli, ["--store", str(store_path), "verify"])
    assert result.exit_code == 0, result.output
    assert "repaired" in result.stdout and run_id in result.stdout
    assert "torn" in result.stdout
