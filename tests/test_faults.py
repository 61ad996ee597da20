"""Disk full and I/O errors: a failed append raises AppendError and leaves the store intact.

Real failures are produced in child processes: ``RLIMIT_FSIZE`` (writes past the limit are cut
short, then fail with EFBIG, as on a full disk) by ``tests/scripts/fsize_writer.py``, and random
``write``/``fsync`` failures injected by libfiu (``fiu-run``) into
``tests/scripts/fiu_writer.py``.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from rar.errors import AppendError
from rar.hashing import digest_bytes
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.log import read_tail
from rar.store.store import EVENTS_NAME, Store
from rar.store.verify import verify_store
from rar.store.writer import RunWriter

SRC = Path(__file__).resolve().parents[1] / "src"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
RUN_ID = "20240101-000000-0000f5"
FIU_RUN = "/usr/bin/fiu-run"
FIU_PRELOAD = "/usr/lib/fiu/fiu_posix_preload.so"
TIMEOUT = 120  # bounds a hung child only


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def _fsize_writer(store_path: Path, mode: str, then: str = "abandon") -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "fsize_writer.py"), str(store_path), RUN_ID, mode, then],
        capture_output=True,
        env=_env(),
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _assert_whole_lines(log: Path) -> list[dict[str, Any]]:
    """The log ends with a newline and every line is a complete JSON event."""
    data = log.read_bytes()
    assert data.endswith(b"\n")
    events = [orjson.loads(line) for line in data.split(b"\n")[:-1]]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    return events


def _assert_reopens_and_continues(store_path: Path, run_id: str) -> None:
    """A fresh writer (no size limit in this process) appends to the run; the chain goes on."""
    log = store_path / run_id / EVENTS_NAME
    before = read_tail(log)
    store = Store(store_path)
    try:
        writer = RunWriter(store, run_id, redactor=Redactor(env={}), create=False)
        try:
            assert writer.log.repaired_bytes == 0
            seq, _ = writer.append(
                {"type": "note", "level": "info", "text": "space freed"}, sync=True
            )
            big = writer.payload({"after": "y" * 5000})  # a blob, in a new pack
            writer.append(
                {
                    "type": "bdi.update",
                    "component": "beliefs",
                    "op": "add",
                    "key": "after",
                    "value": big,
                },
                sync=True,
            )
        finally:
            writer.close()
        assert seq == before.seq + 1
        events = _assert_whole_lines(log)
        assert events[seq - 1]["prev"] == before.digest
        assert store.get_json(big["digest"]) == {"after": "y" * 5000}
        for report in (verify_store(store, [run_id]), verify_store(store)):
            assert report.ok, report.problems
    finally:
        store.close()


def _effects(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [e for e in store.events(run_id) if e["type"] == "effect"]


# --- the log line does not fit -------------------------------------------------------------------


def test_an_effect_whose_log_line_does_not_fit_raises_append_error_and_leaves_no_partial_line(
    tmp_path: Path,
) -> None:
    store_path = tmp_path / "runs"
    out = _fsize_writer(store_path, "log")
    log = store_path / RUN_ID / EVENTS_NAME

    error = out["error"]
    assert error is not None and error["type"] == "AppendError"
    assert error["path"] == str(log)
    message = error["message"]
    assert f"could not write {log}" in message
    assert os.strerror(errno.EFBIG) in message  # the reason, as the OS gave it
    assert "rolled back to its last complete line" in message
    # the line was written in part (the limit cut it), then rolled back
    assert out["after"]["log"] == out["before"]["log"] < out["limit"]

    events = _assert_whole_lines(log)
    store = Store(store_path)
    try:
        assert events[-1]["type"] == "effect"
        assert store.resolve_payload(events[-1]["request"]) == {"n": 2}
        for report in (verify_store(store, [RUN_ID]), verify_store(store)):
            assert report.ok, report.problems
            assert report.repaired == []
    finally:
        store.close()
    _assert_reopens_and_continues(store_path, RUN_ID)


def test_after_a_log_append_failed_the_same_run_continues_once_there_is_space(
    tmp_path: Path,
) -> None:
    store_path = tmp_path / "runs"
    out = _fsize_writer(store_path, "log", then="continue")
    assert out["error"]["type"] == "AppendError"
    assert out["status"] == "completed"
    store = Store(store_path)
    try:
        effects = _effects(store, RUN_ID)
        # the failed attempt left nothing; the retry is recorded once, after the three before it
        assert [store.resolve_payload(e["request"]) for e in effects] == [
            {"n": 0},
            {"n": 1},
            {"n": 2},
            {"n": "big"},
        ]
        assert store.resolve_payload(effects[-1]["result"]) == {"small": "big"}
        assert len(store.events(RUN_ID)) == out["events"]
        report = verify_store(store)
        assert report.ok, report.problems
    finally:
        store.close()


# --- the blob does not fit -----------------------------------------------------------------------


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_blob_that_does_not_fit_raises_append_error_and_leaves_the_pack_whole(
    tmp_path: Path,
) -> None:
    store_path = tmp_path / "runs"
    out = _fsize_writer(store_path, "blob")
    pack = store_path / "blobs" / "packs" / f"{RUN_ID}.1.pack"

    error = out["error"]
    assert error is not None and error["type"] == "AppendError"
    assert error["path"] == str(pack)
    assert f"could not write {pack}" in error["message"]
    assert os.strerror(errno.EFBIG) in error["message"]
    # the record was cut by the limit, then rolled back; no event names the blob
    assert out["after"]["pack"] == out["before"]["pack"] < out["limit"]
    assert out["after"]["log"] == out["before"]["log"]
    assert out["after"]["packs"] == out["before"]["packs"]

    _assert_whole_lines(store_path / RUN_ID / EVENTS_NAME)
    store = Store(store_path)
    try:
        scan = store.reader.scan(f"{RUN_ID}.1")
        assert scan.problem is None and scan.end == scan.size == out["before"]["pack"]
        for report in (verify_store(store, [RUN_ID]), verify_store(store)):
            assert report.ok, report.problems
            assert report.repaired == []
    finally:
        store.close()
    _assert_reopens_and_continues(store_path, RUN_ID)


def test_after_a_blob_write_failed_the_retried_effect_stores_the_blob(tmp_path: Path) -> None:
    store_path = tmp_path / "runs"
    out = _fsize_writer(store_path, "blob", then="continue")
    assert out["error"]["type"] == "AppendError"
    assert out["status"] == "completed"
    store = Store(store_path)
    try:
        last = _effects(store, RUN_ID)[-1]
        assert store.resolve_payload(last["request"]) == {"n": "big"}
        assert "value" not in last["result"]  # a blob
        assert len(store.resolve_payload(last["result"])["blob"]) == 60_000
        report = verify_store(store)
        assert report.ok, report.problems
    finally:
        store.close()


# --- failures around creating files (bugs: these fail today) ------------------------------------


def test_a_pack_whose_header_cannot_be_written_leaves_the_store_verifiable(tmp_path: Path) -> None:
    """A full disk when a writer creates its pack must not leave an empty 'pack' behind.

    PackWriter creates the file, fails to write the 8-byte magic, truncates it to 0 bytes and
    raises AppendError (correct), but the empty file stays; `rar verify` then reports it as
    "not a pack file (bad magic)" for ever, although nothing was lost.
    """
    store_path = tmp_path / "runs"
    out = _fsize_writer(store_path, "newpack")
    assert out["error"] is not None and out["error"]["type"] == "AppendError"
    store = Store(store_path)
    try:
        report = verify_store(store)
        empty = [p.name for p in store.packs_dir.iterdir() if p.stat().st_size == 0]
        assert report.ok and not empty, (report.problems, empty)
    finally:
        store.close()


@pytest.mark.usefixtures("blobs_in_packs")
def test_an_io_error_while_creating_a_pack_is_raised_as_append_error(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PackWriter's directory fsync fails (EIO): run.effect must raise AppendError, not OSError.

    The effect needs a new pack: an earlier finished run already stored (and indexed) the
    empty-workspace snapshot, so the second run has no pack until its first large result.
    """
    import rar.store.blobs as blobs

    with record("first", store=store, seed=1, redactor=Redactor(env={})) as first:
        first.effect("tool", {"n": 0}, lambda: 1)
    run = record("second", store=store, seed=2, redactor=Redactor(env={}))

    def failing_fsync_dir(path: Path) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))

    try:
        with monkeypatch.context() as patch:
            patch.setattr(blobs, "fsync_dir", failing_fsync_dir)
            with pytest.raises(AppendError):
                run.effect("tool", {"n": 1}, lambda: {"big": "z" * 5000})
        assert run.effect("tool", {"n": 2}, lambda: {"big": "z" * 5000}) == {"big": "z" * 5000}
    finally:
        run.finish()
    report = verify_store(store)
    assert report.ok, report.problems


def _start_on_full_disk(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    store_path = tmp_path / "runs"
    out = _fsize_writer(store_path, "start")
    assert out["error"] is not None  # record() could not start the run
    return store_path, out["error"]


def test_record_on_a_full_disk_raises_a_rar_error_not_a_bare_os_error(tmp_path: Path) -> None:
    """record() fails writing the first manifest (EFBIG): the error should be a StoreError
    (AppendError / StoreNotWritableError) with a clear message, like every other append."""
    _, error = _start_on_full_disk(tmp_path)
    assert error["rar_error"], error


def test_a_run_that_could_not_start_does_not_make_verify_fail(tmp_path: Path) -> None:
    """record() failed before the run existed (no manifest, empty log): nothing was ever
    acknowledged, so the leftover directory must not be a verify problem for ever."""
    store_path, _ = _start_on_full_disk(tmp_path)
    store = Store(store_path)
    try:
        report = verify_store(store)
        assert report.ok, report.problems
    finally:
        store.close()


# --- a partial write whose rollback fails too ---------------------------------------------------


class _PartialWrite:
    """For files whose name ends with ``suffix``: the next write stops half way, the write after
    it fails with ENOSPC, and ``ftruncate`` fails with EIO ``truncate_failures`` times (-1: always).
    Other files are untouched. Installed with ``monkeypatch`` on ``os.write``/``os.ftruncate``.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, suffix: str, truncate_failures: int):
        self.suffix = suffix
        self.truncate_failures = truncate_failures
        self.writes = 0
        self._write, self._ftruncate = os.write, os.ftruncate
        self._patch = monkeypatch
        monkeypatch.setattr(os, "write", self.write)
        monkeypatch.setattr(os, "ftruncate", self.ftruncate)

    def _ours(self, fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}").endswith(self.suffix)

    def write(self, fd: int, data: Any) -> int:
        if not self._ours(fd):
            return self._write(fd, data)
        self.writes += 1
        if self.writes == 1:
            return self._write(fd, bytes(data)[: len(data) // 2])
        if self.writes == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._write(fd, data)

    def ftruncate(self, fd: int, length: int) -> None:
        if self._ours(fd) and self.truncate_failures != 0:
            self.truncate_failures -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self._ftruncate(fd, length)

    def undo(self) -> None:
        self._patch.setattr(os, "write", self._write)
        self._patch.setattr(os, "ftruncate", self._ftruncate)


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_pack_record_that_could_not_be_rolled_back_does_not_corrupt_later_blobs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Disk full half way through a blob record, and the rollback's ftruncate fails too: the
    next blob the writer acknowledges must still read back (the log guards against exactly this
    with its ``_partial`` flag; the pack writer keeps appending after the half record and records
    the new blob at a stale offset)."""
    run = record("pack rollback", store=store, seed=1, redactor=Redactor(env={}))
    first = {"a": os.urandom(3000).hex()}
    second = {"b": os.urandom(3000).hex()}
    faults = _PartialWrite(monkeypatch, ".pack", truncate_failures=1)
    with pytest.raises(AppendError):
        run.effect("tool", {"n": 1}, lambda: first)
    faults.undo()
    assert run.effect("tool", {"n": 2}, lambda: second) == second  # acknowledged
    run.finish()

    reader = Store(store.root)
    try:
        [effect] = [e for e in reader.events(run.id) if e["type"] == "effect"]
        assert reader.resolve_payload(effect["request"]) == {"n": 2}
        assert reader.resolve_payload(effect["result"]) == second
        report = verify_store(reader)
        assert report.ok, report.problems
    finally:
        reader.close()


def test_a_log_line_that_could_not_be_rolled_back_at_once_is_cut_before_the_next_append(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = record("log rollback", store=store, seed=1, redactor=Redactor(env={}))
    faults = _PartialWrite(monkeypatch, EVENTS_NAME, truncate_failures=1)
    with pytest.raises(AppendError):
        run.effect("tool", {"n": 1}, lambda: {"text": "a" * 500})
    log = run.dir / EVENTS_NAME
    assert not log.read_bytes().endswith(b"\n")  # the half line is still there ...
    faults.undo()
    assert run.effect("tool", {"n": 2}, lambda: {"text": "b" * 500}) == {"text": "b" * 500}
    run.finish()  # ... and was cut before the next line was written

    events = _assert_whole_lines(log)
    effects = [e for e in events if e["type"] == "effect"]
    assert [store.resolve_payload(e["request"]) for e in effects] == [{"n": 2}]
    report = verify_store(store)
    assert report.ok, report.problems


def test_a_log_whose_partial_line_cannot_be_cut_refuses_appends_and_is_repaired_on_reopen(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = record("log rollback", store=store, seed=1, redactor=Redactor(env={}))
    log = run.dir / EVENTS_NAME
    complete = log.read_bytes()
    faults = _PartialWrite(monkeypatch, EVENTS_NAME, truncate_failures=-1)
    with pytest.raises(AppendError):
        run.effect("tool", {"n": 1}, lambda: {"text": "a" * 500})
    torn = len(log.read_bytes()) - len(complete)
    assert torn > 0
    with pytest.raises(AppendError, match="partial write could not be removed"):
        run.effect("tool", {"n": 2}, lambda: 2)  # nothing is fused onto the half line
    with pytest.raises(AppendError):
        run.finish()  # the process gives up; the writer is closed, the lock released
    assert log.read_bytes()[: len(complete)] == complete
    faults.undo()

    writer = RunWriter(store, run.id, redactor=Redactor(env={}), create=False)
    try:
        assert writer.log.repaired_bytes == torn
        writer.append({"type": "note", "level": "info", "text": "resumed"}, sync=True)
    finally:
        writer.close()
    events = _assert_whole_lines(log)
    assert not [e for e in events if e["type"] == "effect"]
    report = verify_store(store)
    assert report.ok, report.problems


# --- random write/fsync failures (libfiu) -------------------------------------------------------

FIU_CASES = {
    "write-errors": ["enable_random name=posix/io/rw/write,probability=0.03"],
    "short-and-failed-writes": [
        "enable_random name=posix/io/rw/write,probability=0.03",
        "enable_random name=posix/io/rw/write/reduce,probability=0.1",
    ],
    "fsync-errors": ["enable_random name=posix/io/sync/fsync,probability=0.04"],
}
# the faults each case injects, as fiu_writer.py counts them on the store's files
FIU_FIRES = {
    "write-errors": {"write_errors"},
    "short-and-failed-writes": {"write_errors", "short_writes"},
    "fsync-errors": {"fsync_errors"},
}
FIU_RUNS = 12
FIU_EFFECTS = 50


def _fiu_available() -> bool:
    return Path(FIU_RUN).exists() and Path(FIU_PRELOAD).exists()


def _request_i(store: Store, event: dict[str, Any]) -> int:
    request = event["request"]
    value = request["value"] if "value" in request else store.get_json(request["digest"])
    return int(value["i"])


@pytest.mark.slow
@pytest.mark.skipif(
    not _fiu_available(),
    reason=f"{FIU_RUN} and {FIU_PRELOAD} (Debian fiu-utils, libfiu) are not installed",
)
@pytest.mark.parametrize("case", sorted(FIU_CASES))
def test_random_io_failures_lose_no_acknowledged_effect_and_leave_no_fused_lines(
    tmp_path: Path, case: str
) -> None:
    store_path = tmp_path / "runs"
    acks_path = tmp_path / "acks.txt"
    args = [FIU_RUN, "-x"]
    for command in FIU_CASES[case]:
        args += ["-c", command]
    args += [
        sys.executable,
        str(SCRIPTS / "fiu_writer.py"),
        str(store_path),
        str(acks_path),
        str(FIU_RUNS),
        str(FIU_EFFECTS),
    ]
    proc = subprocess.run(args, capture_output=True, env=_env(), timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")

    acked: dict[str, set[int]] = {}
    failed: dict[str, set[int]] = {}
    start_failed: set[str] = set()
    outcomes = 0
    lines = acks_path.read_text().splitlines()
    assert lines and lines[-1].startswith("faults "), lines[-1:]
    fired: dict[str, dict[str, int]] = json.loads(lines.pop()[len("faults ") :])
    for line in lines:
        word, run_id, *rest = line.split(" ", 3)
        if word == "ack":
            acked.setdefault(run_id, set()).add(int(rest[0]))
        elif word == "fail":
            failed.setdefault(run_id, set()).add(int(rest[0]))
        elif word == "unexpected":
            # only a bare OSError from creating a pack (see the AppendError test above) is known
            assert rest[1].startswith("OSError "), line
            failed.setdefault(run_id, set()).add(int(rest[0]))
        elif word == "start-failed":
            start_failed.add(run_id)
        outcomes += word in {"ack", "fail", "unexpected"}
    started = FIU_RUNS - len(start_failed)
    assert outcomes == started * FIU_EFFECTS  # the child ran to the end
    assert sum(map(len, acked.values())) > started * FIU_EFFECTS // 2  # faults stayed modest
    # the faults fired, into the log itself, and only the kind this case injects
    assert FIU_FIRES[case] <= fired.keys(), fired
    for what, where in fired.items():
        if what in FIU_FIRES[case]:
            assert where["log"] > 0, (case, fired)
        else:
            assert sum(where.values()) == 0, (case, fired)
    # ... and some made run.effect fail: the checks below see failed effects, not only acked ones
    assert sum(map(len, failed.values())) > 0, (case, fired)
    # a run went on past a failed effect: later effects were acknowledged after the fault
    assert any(max(acked.get(r, {-1})) > min(f) for r, f in failed.items()), (acked, failed)

    store = Store(store_path)
    try:
        allowed_problems = set()
        for run_id in sorted(os.listdir(store_path)):
            run_dir = store_path / run_id
            log = run_dir / EVENTS_NAME
            if not log.exists():
                continue
            # no half line fused with a later one: every line parses, seqs count up
            data = log.read_bytes()
            assert data == b"" or data.endswith(b"\n"), run_id
            lines = data.split(b"\n")[:-1]
            events = [orjson.loads(raw) for raw in lines]
            assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), run_id
            assert [e["prev"] for e in events[1:]] == [digest_bytes(raw) for raw in lines[:-1]]
            recorded = [_request_i(store, e) for e in events if e["type"] == "effect"]
            assert len(recorded) == len(set(recorded)), run_id
            # every acknowledged effect is there; no failed one is
            assert acked.get(run_id, set()) <= set(recorded), run_id
            assert not failed.get(run_id, set()) & set(recorded), run_id

            report = verify_store(store, [run_id])
            if not (run_dir / "manifest.json").exists():
                # record() failed before the first manifest was written and could not remove the
                # directory (see test_a_run_that_could_not_start_does_not_make_verify_fail)
                assert run_id in start_failed and not events
            assert report.ok, (run_id, report.problems)
        for pack in store.packs_dir.iterdir():
            if pack.stat().st_size == 0:
                # a pack whose header could not be written (see
                # test_a_pack_whose_header_cannot_be_written_leaves_the_store_verifiable)
                allowed_problems.add((None, "pack", str(pack)))
        report = verify_store(store)
        problems = {
            (p.run_id, p.what, p.path if p.what == "pack" else None) for p in report.problems
        }
        assert problems == allowed_problems, report.problems
        assert len(report.problems) == len(allowed_problems)
        if allowed_problems:
            assert all("bad magic" in p.detail for p in report.problems if p.what == "pack")
    finally:
        store.close()
