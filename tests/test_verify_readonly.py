"""`rar verify` and `verify_store` are read-only and tell the truth.

Whatever they find, every file of the store stays byte-identical (logs, packs, manifests and
index.sqlite, which verify never opens), each kind of damage is reported, and verifying runs while
other processes write them raises no false alarm.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.science.runtime import ask_question
from rar.store.blobs import CODEC_ZSTD, HEADER_SIZE
from rar.store.store import EVENTS_NAME, Store
from rar.store.verify import VerifyReport, verify_store

SRC = Path(__file__).resolve().parents[1] / "src"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
QUIET = Redactor(env={})
TIMEOUT = 120  # bounds a hung child only
VERIFIES = 30
SLOW_RUN = "20240105-000000-00510a"


def _checksums(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``, by relative path."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


# --- a store with one run of each kind, copied for every test -------------------------------------


def _small(store: Store) -> str:
    with record("small", store=store, seed=1, redactor=QUIET) as run:
        for i in range(3):
            run.effect("tool", {"i": i}, lambda i=i: i * 2)
    return run.id


def _big(store: Store) -> str:
    """Results large enough to be blobs: several records in the run's own pack."""
    with record("big", store=store, seed=2, redactor=QUIET) as run:
        for i in range(8):
            run.effect("tool", {"i": i}, lambda i=i: {"big": f"{i}" * (400 + 300 * i)})
    return run.id


def _interrupted(store: Store) -> str:
    run = record("interrupted", store=store, seed=3, redactor=QUIET)
    for i in range(3):
        run.effect("tool", {"i": i}, lambda i=i: {"text": f"{i}" * 500})
    run._writer.close()  # the process dies: the run stays running, its lock released
    return run.id


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("pristine") / "runs"
    store = Store(root, create=True)
    try:
        runs = {"small": _small(store), "interrupted": _interrupted(store)}
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("RAR_CARRY_LIMIT", "0")  # the pack damaged below holds every blob
            runs["big"] = _big(store)
        science = ask_question("Why do alpine glaciers retreat?", store=store)
        runs["science"] = science.run_id
    finally:
        store.close()
    assert (root / "index.sqlite").exists()
    return root, runs


@pytest.fixture
def copy(pristine: tuple[Path, dict[str, str]], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root, runs = pristine
    target = tmp_path / "runs"
    shutil.copytree(root, target)
    return target, runs


# --- damage of every kind ----------------------------------------------------------------------


def _flip(path: Path, index: int, bit: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[index] ^= bit
    path.write_bytes(bytes(data))


def _pack(root: Path, run_id: str) -> Path:
    [pack] = sorted((root / "blobs" / "packs").glob(f"{run_id}.*.pack"))
    return pack


def _offsets(root: Path, run_id: str) -> list[int]:
    store = Store(root)
    try:
        return [r.location.offset for r in store.reader.scan(_pack(root, run_id).stem).records]
    finally:
        store.close()


def _record_field(offset_in_header: int, bit: int = 0x01, record: int = 2) -> Callable[..., None]:
    def damage(root: Path, runs: dict[str, str]) -> None:
        start = _offsets(root, runs["big"])[record]
        _flip(_pack(root, runs["big"]), start + offset_in_header, bit)

    return damage


def _zstd_frame_size(root: Path, runs: dict[str, str]) -> None:
    """The frame descriptor of a compressed record now claims ~2.5e18 bytes."""
    store = Store(root)
    try:
        scan = store.reader.scan(_pack(root, runs["big"]).stem)
    finally:
        store.close()
    record = next(r for r in scan.records if r.location.codec == CODEC_ZSTD)
    path = _pack(root, runs["big"])
    data = bytearray(path.read_bytes())
    data[record.location.offset + HEADER_SIZE + 4] = 0xF0
    path.write_bytes(bytes(data))


def _log(root: Path, run_id: str) -> Path:
    return root / run_id / EVENTS_NAME


def _log_middle_line(root: Path, runs: dict[str, str]) -> None:
    path = _log(root, runs["small"])
    _flip(path, path.read_bytes().index(b'"kind":"tool"') + 9)


def _log_last_line(root: Path, runs: dict[str, str]) -> None:
    path = _log(root, runs["small"])
    _flip(path, path.read_bytes().rindex(b'"status":"completed"') + 11)


def _log_last_newline(root: Path, runs: dict[str, str]) -> None:
    path = _log(root, runs["small"])
    path.write_bytes(path.read_bytes()[:-1])


def _log_middle_newline(root: Path, runs: dict[str, str]) -> None:
    path = _log(root, runs["small"])
    data = path.read_bytes()
    third = data.index(b"\n", data.index(b"\n") + 1)
    path.write_bytes(data[:third] + data[third + 1 :])


def _torn_line(run: str) -> Callable[..., None]:
    def damage(root: Path, runs: dict[str, str]) -> None:
        with _log(root, runs[run]).open("ab") as handle:
            handle.write(b'{"duration_us":12,"kind":"tool","ordinal":99,"prev":"sha256:01')

    return damage


def _torn_record(root: Path, runs: dict[str, str]) -> None:
    with _pack(root, runs["big"]).open("ab") as handle:
        handle.write(struct.pack(">c32sBII", b"B", bytes(32), 0, 100, 100) + b"x" * 10)


def _manifest(field: str, value: object, run: str = "small") -> Callable[..., None]:
    def damage(root: Path, runs: dict[str, str]) -> None:
        path = root / runs[run] / "manifest.json"
        manifest = orjson.loads(path.read_bytes())
        manifest[field] = value
        path.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))

    return damage


def _manifest_bytes(root: Path, runs: dict[str, str]) -> None:
    _flip(root / runs["small"] / "manifest.json", 0)  # "{" is no longer JSON


# name: (damage, "problem" or "warning", the `what` reported)
DAMAGE: dict[str, tuple[Callable[[Path, dict[str, str]], None], str, str]] = {
    "pack-record-marker": (_record_field(0), "problem", "pack"),
    "pack-record-digest": (_record_field(7), "problem", "blob-corrupt"),
    "pack-record-codec": (_record_field(33, 0x04), "problem", "pack"),
    "pack-record-raw-length": (_record_field(36), "problem", "blob-corrupt"),
    "pack-record-length": (_record_field(38, 0x80), "problem", "pack"),
    "pack-record-length-low": (_record_field(41, 0x10), "problem", "blob-corrupt"),
    "pack-record-payload": (_record_field(60), "problem", "blob-corrupt"),
    "pack-last-record-length": (_record_field(40, 0x01, record=-1), "problem", "pack"),
    "pack-zstd-frame-size": (_zstd_frame_size, "problem", "blob-corrupt"),
    "pack-magic": (lambda root, runs: _flip(_pack(root, runs["big"]), 3), "problem", "pack"),
    "pack-torn-tail": (_torn_record, "warning", "torn-record"),
    "log-middle-line": (_log_middle_line, "problem", "chain"),
    "log-last-line": (_log_last_line, "problem", "head"),
    "log-last-newline-removed": (_log_last_newline, "problem", "unterminated-line"),
    "log-middle-newline-removed": (_log_middle_newline, "problem", "malformed-line"),
    "log-torn-after-finish": (_torn_line("small"), "problem", "torn-line"),
    "log-torn-interrupted": (_torn_line("interrupted"), "warning", "torn-line"),
    "manifest-bytes": (_manifest_bytes, "problem", "manifest"),
    "manifest-goal": (_manifest("goal", "another goal"), "problem", "manifest-changed"),
    "manifest-status": (_manifest("status", "failed"), "problem", "manifest-changed"),
    "manifest-finished-at": (
        _manifest("finished_at", "2031-01-01T00:00:00.000000Z"),
        "problem",
        "manifest-changed",
    ),
    "manifest-stats": (_manifest("stats", {"effects": {}}), "problem", "manifest-changed"),
    "manifest-events": (_manifest("events", 2), "problem", "head"),
}

# what verifying the runs one by one reports where it differs (None: nothing)
RUN_BY_RUN: dict[str, str | None] = {
    "pack-record-marker": "blob-corrupt",
    "pack-record-digest": "blob-missing",  # the record names another blob now
    "pack-record-codec": "blob-corrupt",
    "pack-record-length": "blob-corrupt",
    "pack-last-record-length": "blob-corrupt",
    "pack-magic": None,  # every record is intact: every blob is found
    "pack-torn-tail": None,
    "log-torn-interrupted": "",  # the same warning, checked below
}


def _cli(root: Path, *args: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(cli, ["--store", str(root), "verify", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def _found(report: dict[str, object], severity: str) -> set[str]:
    items = report["problems" if severity == "problem" else "warnings"]
    assert isinstance(items, list)
    return {item["what"] for item in items}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_verify_reports_the_damage_and_changes_no_file(
    copy: tuple[Path, dict[str, str]], kind: str
) -> None:
    root, runs = copy
    damage, severity, what = DAMAGE[kind]
    damage(root, runs)
    before = _checksums(root)
    assert "index.sqlite" in before

    store = Store(root)
    try:
        whole, each = verify_store(store), verify_store(store, sorted(runs.values()))
    finally:
        store.close()
    assert _checksums(root) == before
    found = whole.as_dict()
    assert what in _found(found, severity), (kind, found)
    assert whole.ok == (severity == "warning"), (kind, found)
    # run by run, packs are not checked as such: what a run refers to is
    expected = RUN_BY_RUN.get(kind, what)
    if expected:
        assert expected in {p.what for p in each.problems}, (kind, each)
    elif expected is None:
        assert each.ok and each.warnings == [], (kind, each)
    else:
        assert each.ok and [w.what for w in each.warnings] == [what], (kind, each)
    assert whole.repaired == each.repaired == []

    code, found = _cli(root)
    assert _checksums(root) == before
    assert what in _found(found, severity), (kind, found)
    assert code == (0 if severity == "warning" else 1)
    for run_id in runs.values():
        _cli(root, run_id)
        CliRunner().invoke(cli, ["--store", str(root), "verify", run_id])  # the human output
    assert _checksums(root) == before


def test_an_intact_store_verifies_and_verify_changes_nothing(
    copy: tuple[Path, dict[str, str]],
) -> None:
    root, runs = copy
    before = _checksums(root)
    code, found = _cli(root)
    assert code == 0 and found["ok"] is True, found
    assert found["problems"] == [] and found["warnings"] == [] and found["repaired"] == []
    code, found = _cli(root, runs["science"])  # its evidence anchors are checked (blobs read)
    assert code == 0, found
    assert _checksums(root) == before


def test_verify_without_an_index_creates_none(copy: tuple[Path, dict[str, str]]) -> None:
    root, runs = copy
    for suffix in ("", "-wal", "-shm"):
        (root / f"index.sqlite{suffix}").unlink(missing_ok=True)
    before = _checksums(root)
    code, found = _cli(root)
    assert code == 0, found
    code, found = _cli(root, runs["science"])
    assert code == 0, found
    store = Store(root)
    try:
        assert verify_store(store).ok and verify_store(store, list(runs.values())).ok
    finally:
        store.close()
    assert _checksums(root) == before
    assert not list(root.glob("index.sqlite*"))


def test_verify_finds_blobs_a_stale_index_does_not_know(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    _small(store)
    store.close()
    old = {p.name: p.read_bytes() for p in root.glob("index.sqlite*")}
    store = Store(root)
    big = _big(store)
    store.close()
    for path in root.glob("index.sqlite*"):
        path.unlink()
    for name, data in old.items():  # the index as it was before the big run was recorded
        (root / name).write_bytes(data)
    before = _checksums(root)
    store = Store(root)
    try:
        report = verify_store(store, [big])
        assert report.ok, report.problems
        assert report.blobs > 8
    finally:
        store.close()
    assert _checksums(root) == before


# --- verifying while runs are written ------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def _writing(root: Path) -> list[str]:
    return sorted(p.parent.name for p in root.glob(f"*/{EVENTS_NAME}"))


def _alarms(report: VerifyReport) -> list[str]:
    return [f"{p.run_id}: {p.what} {p.detail}" for p in report.problems]


@pytest.mark.slow
def test_verifying_runs_while_they_are_written_raises_no_false_alarm(tmp_path: Path) -> None:
    """A slow writer (effects in a loop until killed) and four processes recording runs into
    one store, verified again and again meanwhile: the whole store, each run, and the CLI."""
    root = tmp_path / "runs"
    slow = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "crash_writer.py"), str(root), SLOW_RUN, "7", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    many: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while not list(root.glob(f"*/{EVENTS_NAME}")):
            assert slow.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        many = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(SCRIPTS / "concurrent_writer.py"),
                    str(root),
                    str(w),
                    "12",
                    "-",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=_env(),
            )
            for w in range(4)
        ]
        alarms: list[str] = []
        being_written = 0
        for attempt in range(VERIFIES):
            store = Store(root)
            try:
                if attempt % 3 == 0:
                    report = verify_store(store)
                elif attempt % 3 == 1:
                    report = verify_store(store, _writing(root))
                else:
                    result = CliRunner().invoke(cli, ["--store", str(root), "verify", "--json"])
                    report = VerifyReport(problems=[])
                    found = json.loads(result.stdout)
                    alarms += [f"cli: {p['run_id']}: {p['what']}" for p in found["problems"]]
                    assert result.exit_code == (1 if found["problems"] else 0)
                    being_written += bool(found["notes"])
            finally:
                store.close()
            alarms += _alarms(report)
            being_written += any("being written" in note for note in report.notes)
            time.sleep(0.02)
        assert alarms == []
        assert slow.poll() is None, "the slow writer stopped early"
        assert being_written > VERIFIES // 2  # the verifies did overlap the writes
    finally:
        slow.kill()
        slow.wait()
        for proc in many:
            proc.wait(timeout=TIMEOUT)
            assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
        for proc in (slow, *many):
            if proc.stderr:
                proc.stderr.close()
    store = Store(root)
    try:
        report = verify_store(store)  # the slow writer was killed: at most a torn tail, a warning
        assert report.ok, report.problems
        assert {w.what for w in report.warnings} <= {"torn-line", "torn-record"}
    finally:
        store.close()
