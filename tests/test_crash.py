"""Crash safety: a writer killed with SIGKILL loses nothing it acknowledged.

The child (``tests/scripts/crash_writer.py``) records one run and prints the number of effects
acknowledged after every ``run.effect`` returns; the parent kills it at a random moment and checks
the store: acknowledged effects are all in the log, the run and the whole store verify, a torn
tail (if the kill hit a write) is reported as a warning and left as it is by ``rar verify``, and
the writer that reopens the run moves a torn log tail to ``lost+found`` and extends the chain.
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


def _files(store_path: Path) -> dict[str, bytes]:
    """Every file of the store except the derived index, by path."""
    return {
        str(path.relative_to(store_path)): path.read_bytes()
        for path in sorted(store_path.rglob("*"))
        if path.is_file() and not path.name.startswith("index.sqlite")
    }


class Findings(NamedTuple):
    """What ``rar verify`` reported after one kill, and what reopening the run moved aside."""

    torn_bytes: int  # the log's torn tail
    log: list[str]  # the warnings about the killed run's log
    packs: set[str]  # the packs with a torn last record (whole store, every kill so far)
    moved: bytes  # what the reopening writer moved to lost+found


def _check_after_kill(store_path: Path, run_id: str, acknowledged: int) -> Findings:
    """Every check of one kill; returns what verify reported."""
    store = Store(store_path)
    log = store.run_dir(run_id) / EVENTS_NAME
    try:
        # (a) every acknowledged effect is in the log, in order; at most one more (recorded,
        # killed before the acknowledgement was printed)
        ordinals = _effect_ordinals(store, run_id)
        assert ordinals == list(range(len(ordinals)))
        assert acknowledged <= len(ordinals) <= acknowledged + 1

        # (b) the run verifies; a torn last line is a warning and stays where it is
        torn = read_tail(log).torn_bytes
        files = _files(store_path)
        report = verify_store(store, [run_id])
        assert report.ok, report.problems
        assert report.repaired == []
        warned = [w for w in report.warnings if w.run_id == run_id]
        assert [w.what for w in warned] == (["torn-line"] if torn else []), report.warnings
        assert _files(store_path) == files

        # (c) the whole store verifies; every torn pack record is a warning and stays
        torn_packs = _torn_packs(store)
        report = verify_store(store)
        assert report.ok, report.problems
        warned_packs = {Path(w.path or "").stem for w in report.warnings if w.what == "torn-record"}
        assert warned_packs == torn_packs, report.warnings
        # no other run's log has a torn line: the writers that reopened them moved it aside
        assert [w.run_id for w in report.warnings if w.what != "torn-record"] == (
            [run_id] if torn else []
        )
        assert _files(store_path) == files
    finally:
        store.close()

    # (d) the run reopens for writing: a torn tail is moved to lost+found, the chain continues
    store = Store(store_path)
    try:
        before = read_tail(log)
        torn_tail = log.read_bytes()[before.size :]
        writer = RunWriter(store, run_id, redactor=Redactor(env={}), create=False)
        try:
            assert writer.log.repaired_bytes == torn
            moved = writer.log.lost_found.read_bytes() if writer.log.lost_found else b""
            assert moved == torn_tail
            seq, _ = writer.append({"type": "note", "level": "info", "text": "resumed"}, sync=True)
        finally:
            writer.close()
        assert seq == before.seq + (2 if torn else 1)  # after the writer's note of the repair
        lines = log.read_bytes().split(b"\n")
        assert orjson.loads(lines[before.seq])["prev"] == before.digest
        report = verify_store(store, [run_id])
        assert report.ok and report.warnings == [], (report.problems, report.warnings)
        assert len(_effect_ordinals(store, run_id)) >= acknowledged
    finally:
        store.close()
    warnings = [w.detail for w in warned]
    return Findings(torn, warnings, torn_packs, moved)


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
    findings: Findings


def _kill_loop(store_path: Path, work: Path, lane: int, kills: int) -> list[Kill]:
    """Start, kill and check ``kills`` writers one after the other; returns what was found."""
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
        findings = _check_after_kill(store_path, _run_id(n), acknowledged)
        done.append(Kill(_run_id(n), tear, torn_pack, findings))

    store = Store(store_path)
    try:
        rows = store.list_runs()
        assert sorted(r.run_id for r in rows) == [_run_id(lane * 1000 + k) for k in range(kills)]
        assert {store.display_status(r) for r in rows} == {"interrupted"}
        report = verify_store(store)
        assert report.ok and report.repaired == [], report
        assert {w.what for w in report.warnings} <= {"torn-record"}, report.warnings
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
        findings = kill.findings
        if kill.tear == "log":
            assert findings.torn_bytes >= len(TORN), kill  # the kill's own tear, if any, and ours
            assert findings.moved.endswith(TORN), kill
            [warning] = findings.log
            assert f"torn line ({findings.torn_bytes} bytes at offset" in warning, kill
        if kill.tear == "pack":
            assert kill.torn_pack in findings.packs, kill  # reported, and never cut
    # every torn tail left was reported (and each kill's checks saw nothing else)
    assert sum(bool(k.findings.log) for k in kills) >= sum(k.tear == "log" for k in kills) > 0
    torn_packs = {k.torn_pack for k in kills if k.tear == "pack"}
    assert torn_packs and all(any(p in k.findings.packs for k in kills) for p in torn_packs)


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


def _lost_found(store_path: Path, run_id: str) -> dict[str, bytes]:
    folder = store_path / run_id / "lost+found"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def test_a_torn_last_line_is_moved_to_lost_found_when_a_writer_reopens_the_run(
    tmp_path: Path,
) -> None:
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
            seq, _ = writer.append({"type": "note", "level": "info", "text": "resumed"}, sync=True)
        finally:
            writer.close()
        # the torn bytes are kept, not deleted
        assert _lost_found(store_path, run_id) == {"events.jsonl.1.torn": TORN}
        data = log.read_bytes()
        assert data.startswith(complete)  # cut back to the last complete line, then appended
        note, resumed = (orjson.loads(line) for line in data[len(complete) :].splitlines())
        assert note["type"] == "note" and note["level"] == "warning"
        assert note["prev"] == digest_bytes(last) and note["seq"] == orjson.loads(last)["seq"] + 1
        assert (
            f"moved a torn last line ({len(TORN)} bytes at offset {len(complete)}" in note["text"]
        )
        assert "lost+found/events.jsonl.1.torn" in note["text"]
        assert resumed["seq"] == seq == note["seq"] + 1
        report = verify_store(store)
        assert report.ok, report.problems
        assert report.warnings == [] and report.repaired == []
    finally:
        store.close()


def test_a_complete_last_line_without_its_newline_is_completed_when_a_writer_reopens_the_run(
    tmp_path: Path,
) -> None:
    """It may have been acknowledged (only the newline is missing): it is kept, not cut."""
    store_path, run_id = _crashed_run(tmp_path)
    log = store_path / run_id / EVENTS_NAME
    complete = log.read_bytes()
    log.write_bytes(complete[:-1])
    store = Store(store_path)
    try:
        report = verify_store(store, [run_id])
        assert report.ok, report.problems
        assert [w.what for w in report.warnings] == ["unterminated-line"]
        assert log.read_bytes() == complete[:-1]  # verify leaves it
        effects = len(_effect_ordinals(store, run_id))
        writer = RunWriter(store, run_id, redactor=Redactor(env={}), create=False)
        writer.close()
        assert writer.log.repaired_bytes == 0 and writer.log.lost_found is None
        data = log.read_bytes()
        assert data.startswith(complete)  # the newline was added
        note = orjson.loads(data[len(complete) :])
        assert note["type"] == "note" and "completed the last line" in note["text"]
        assert len(_effect_ordinals(store, run_id)) == effects
        assert not (store_path / run_id / "lost+found").exists()
        report = verify_store(store)
        assert report.ok and report.warnings == [], (report.problems, report.warnings)
    finally:
        store.close()


def test_rar_verify_reports_a_torn_last_line_leaves_it_and_exits_0(tmp_path: Path) -> None:
    store_path, run_id = _crashed_run(tmp_path)
    log = store_path / run_id / EVENTS_NAME
    complete = log.read_bytes()
    with open(log, "ab") as handle:
        handle.write(TORN)

    for _ in range(2):  # nothing changes: the second verify reports the same
        result = CliRunner().invoke(cli, ["--store", str(store_path), "verify", "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["ok"] is True and report["problems"] == [] and report["repaired"] == []
        [warning] = report["warnings"]
        assert warning["run_id"] == run_id and warning["what"] == "torn-line"
        assert warning["offset"] == len(complete) and warning["path"] == str(log)
        assert f"{len(TORN)} bytes" in warning["detail"]
        assert log.read_bytes() == complete + TORN


def test_rar_verify_human_output_names_the_run_with_a_torn_line(tmp_path: Path) -> None:
    store_path, run_id = _crashed_run(tmp_path, effects=2)
    with open(store_path / run_id / EVENTS_NAME, "ab") as handle:
        handle.write(TORN)
    result = CliRunner().invoke(cli, ["--store", str(store_path), "verify"])
    assert result.exit_code == 0, result.output
    assert "warning" in result.stdout and run_id in result.stdout
    assert "torn" in result.stdout and "repaired" not in result.stdout


@pytest.mark.parametrize("tear", ["torn", "unterminated"])
def test_a_resumed_run_keeps_a_torn_tail_in_lost_found_and_the_complete_events(
    store: Store, tear: str
) -> None:
    from rar.replay import resume
    from rar.runtime.run import Run
    from rar.runtime.start import record

    quiet = Redactor(env={})
    calls: list[int] = []

    def perform(i: int) -> dict[str, object]:
        calls.append(i)
        return {"n": i, "pad": "p" * 300}  # a blob, in the run's pack

    def steps(run: Run, count: int) -> list[object]:
        return [run.effect("tool", {"n": i}, lambda i=i: perform(i))["n"] for i in range(count)]

    run = record("crashed", store=store, redactor=quiet, inputs={"count": 3})
    steps(run, 3)
    run._writer.close()  # the process dies: the run stays RUNNING, lock released
    log = run.dir / EVENTS_NAME
    complete = log.read_bytes()
    if tear == "torn":
        log.write_bytes(complete + TORN)
    else:
        log.write_bytes(complete[:-1])
    assert calls == [0, 1, 2]

    report = resume(run.id, store=store, function=lambda run, count: steps(run, 5), redactor=quiet)
    assert report.reproducible and report.served == 3 and report.live == 2, report
    assert calls == [0, 1, 2, 3, 4]  # the recorded effects were served, not performed again
    data = log.read_bytes()
    assert data.startswith(complete)  # every complete event is kept
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    assert [e["ordinal"] for e in effects] == [0, 1, 2, 3, 4]
    notes = [e["text"] for e in store.events(run.id) if e["type"] == "note"]
    if tear == "torn":
        assert _lost_found(store.root, run.id) == {"events.jsonl.1.torn": TORN}
        assert any("moved a torn last line" in n for n in notes), notes
    else:
        assert _lost_found(store.root, run.id) == {}
        assert any("completed the last line" in n for n in notes), notes
    report_check = verify_store(store, [run.id])
    assert report_check.ok and report_check.warnings == [], report_check
