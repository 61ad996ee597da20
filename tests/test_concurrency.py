"""Several processes and one store: runs, the derived index, the run lock, shared blobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rar.errors import RunLockedError
from rar.hashing import digest_value
from rar.redaction import Redactor
from rar.store.index import RunRow
from rar.store.store import EVENTS_NAME, Store
from rar.store.verify import verify_store
from rar.store.writer import RunWriter

SRC = Path(__file__).resolve().parents[1] / "src"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
TIMEOUT = 120  # bounds a hung child only
WORKERS = 4
RUNS = 5
SHARED = {"shared": "the same large payload in every run " * 200}  # as in concurrent_writer.py


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def _writer(store_path: Path, worker: int, runs: int, go: str = "-") -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(SCRIPTS / "concurrent_writer.py"),
            str(store_path),
            str(worker),
            str(runs),
            go,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )


def _results(proc: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines()]


def _pack_records(store: Store) -> Counter[str]:
    """How many records each digest has over all packs."""
    counts: Counter[str] = Counter()
    for name in store.reader.iter_pack_names():
        scan = store.reader.scan(name)
        assert scan.problem is None, (name, scan.problem)
        counts.update(record.digest for record in scan.records)
    return counts


def _list(store_path: Path) -> list[RunRow]:
    store = Store(store_path)
    try:
        return store.list_runs()
    finally:
        store.close()


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """4 processes record 5 runs each into one store, all starting at the same moment."""
    root = tmp_path_factory.mktemp("concurrent")
    store_path = root / "runs"
    go = root / "go"
    procs = [_writer(store_path, worker, RUNS, str(go)) for worker in range(WORKERS)]
    ready = [root / f"go.ready{worker}" for worker in range(WORKERS)]
    deadline = time.monotonic() + TIMEOUT
    while not all(path.exists() for path in ready):  # every worker has started up
        assert all(proc.poll() is None for proc in procs) and time.monotonic() < deadline
        time.sleep(0.001)
    go.touch()
    results = [r for proc in procs for r in _results(proc)]
    return store_path, results


def test_four_processes_recording_into_one_store_give_exactly_their_twenty_runs(
    shared_store: tuple[Path, list[dict[str, Any]]],
) -> None:
    store_path, results = shared_store
    assert len(results) == WORKERS * RUNS
    expected = {r["run_id"]: r for r in results}
    store = Store(store_path)
    try:
        rows = store.list_runs()
        assert sorted(row.run_id for row in rows) == sorted(expected)
        for row in rows:
            result = expected[row.run_id]
            assert row.status == result["status"]
            assert row.status == ("failed" if row.run_id.endswith("4") else "completed")
            assert row.events == result["events"] == len(store.events(row.run_id))
            assert row.head == result["head"]
            assert store.display_status(row) == row.status
        report = verify_store(store)
        assert report.ok, report.problems
        assert report.runs == WORKERS * RUNS
    finally:
        store.close()


def test_listing_after_deleting_the_index_rebuilds_the_same_rows_from_the_logs(
    shared_store: tuple[Path, list[dict[str, Any]]],
) -> None:
    store_path, _ = shared_store
    before = _list(store_path)
    for suffix in ("", "-wal", "-shm"):
        (store_path / f"index.sqlite{suffix}").unlink(missing_ok=True)
    assert _list(store_path) == before
    assert (store_path / "index.sqlite").exists()
    assert _list(store_path) == before  # and served from the rebuilt index


def test_listing_after_corrupting_the_index_rebuilds_the_same_rows(
    shared_store: tuple[Path, list[dict[str, Any]]],
) -> None:
    store_path, results = shared_store
    before = _list(store_path)
    index = store_path / "index.sqlite"
    with open(index, "r+b") as handle:
        handle.write(b"this is not an sqlite database at all" * 4)
    assert _list(store_path) == before
    # blob look-ups work from the rebuilt index too
    store = Store(store_path)
    try:
        assert store.get_json(results[0]["shared"]) == SHARED
        assert verify_store(store).ok
    finally:
        store.close()


def test_blobs_written_by_concurrent_writers_all_read_back_and_verify(
    shared_store: tuple[Path, list[dict[str, Any]]],
) -> None:
    store_path, results = shared_store
    shared = digest_value(SHARED)
    assert {r["shared"] for r in results} == {shared}
    store = Store(store_path)
    try:
        counts = _pack_records(store)
        # writers running at the same time may each store it (duplicates are allowed) ...
        assert 1 <= counts[shared] <= WORKERS
        # ... but never twice from one writer, and every record re-hashes to its digest
        for name in store.reader.iter_pack_names():
            digests = [rec.digest for rec in store.reader.scan(name).records]
            assert len(digests) == len(set(digests)), name
        for run in results:
            effects = [e for e in store.events(run["run_id"]) if e["type"] == "effect"]
            for event in effects:
                assert store.resolve_payload(event["result"]) is not None
            assert [e["result"]["digest"] for e in effects[:2]] == [shared, shared]
        report = verify_store(store)
        assert report.ok, report.problems
        assert report.blobs == sum(counts.values())
    finally:
        store.close()


def test_a_run_recorded_after_another_finished_reuses_its_blobs(tmp_path: Path) -> None:
    store_path = tmp_path / "runs"
    [first] = _results(_writer(store_path, 0, 1))
    store = Store(store_path)
    try:
        before = _pack_records(store)
    finally:
        store.close()
    assert before[first["shared"]] == 1  # recorded twice in the run, stored once

    [second] = _results(_writer(store_path, 1, 1))  # another process, after the first finished
    store = Store(store_path)
    try:
        after = _pack_records(store)
        assert second["shared"] == first["shared"]
        assert after[first["shared"]] == 1  # no new record for the identical payload
        # the second run's own packs hold only what the first run did not have
        own = [name for name in store.reader.iter_pack_names() if name.startswith(second["run_id"])]
        for name in own:
            assert not {r.digest for r in store.reader.scan(name).records} & set(before)
        effects = [e for e in store.events(second["run_id"]) if e["type"] == "effect"]
        assert store.resolve_payload(effects[0]["result"]) == SHARED
        report = verify_store(store)
        assert report.ok, report.problems
    finally:
        store.close()


def test_a_second_process_cannot_write_a_run_being_written(tmp_path: Path) -> None:
    store_path = tmp_path / "runs"
    run_id = "20240103-000000-00a0c4"
    holder = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "hold_writer.py"), str(store_path), run_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == b"ready\n"
        log = store_path / run_id / EVENTS_NAME
        size = log.stat().st_size

        store = Store(store_path)
        try:
            with pytest.raises(RunLockedError) as caught:
                RunWriter(store, run_id, redactor=Redactor(env={}), create=False)
            error = caught.value
            assert error.run_id == run_id  # type: ignore[attr-defined]
            assert f"pid {holder.pid} " in error.holder  # type: ignore[attr-defined]
            assert f"pid {holder.pid} " in str(error) and run_id in str(error)
            assert log.stat().st_size == size  # the refused writer touched nothing
            assert store.is_writing(run_id)
            # reading and verifying while the run is written is fine
            report = verify_store(store, [run_id])
            assert report.ok, report.problems
        finally:
            store.close()

        holder.stdin.write(b"go on\n")
        holder.stdin.close()
        out = holder.stdout.read()
        holder.wait(timeout=TIMEOUT)
        assert holder.returncode == 0, holder.stderr.read().decode() if holder.stderr else ""
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        for stream in (holder.stdin, holder.stdout, holder.stderr):
            if stream is not None:
                stream.close()

    store = Store(store_path)
    try:
        events = store.events(run_id)
        assert len(events) == int(out)
        effects = [e for e in events if e["type"] == "effect"]
        assert [store.resolve_payload(e["request"])["i"] for e in effects] == list(range(6))
        assert not [e for e in events if e["type"] == "note"]  # nothing from the refused writer
        report = verify_store(store)
        assert report.ok, report.problems
        assert not store.is_writing(run_id)
    finally:
        store.close()
