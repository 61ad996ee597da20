"""The store: blobs, run ids, the derived index and clear errors."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import record_small_run

from rar.errors import (
    AmbiguousRunIdError,
    BlobMissingError,
    CorruptionError,
    ManifestMissingError,
    RunNotFoundError,
    StoreNotWritableError,
)
from rar.hashing import digest_bytes
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import INCOMPLETE, Store, default_store_path


def test_identical_payloads_across_runs_are_stored_once(store: Store) -> None:
    big = {"text": "identical " * 500}
    for _ in range(3):
        with record("dedup", store=store, redactor=Redactor(env={})) as run:
            run.effect("tool", {"name": "t"}, lambda: big)
    fresh = Store(store.root)
    fresh.index.catch_up(fresh.reader)
    digest = [e for e in store.events(run.id) if e["type"] == "effect"][0]["result"]["digest"]
    records = [
        r
        for name in fresh.reader.iter_pack_names()
        for r in fresh.reader.scan(name).records
        if r.digest == digest
    ]
    assert len(records) == 1


@pytest.mark.usefixtures("blobs_in_packs")
def test_blobs_are_verified_on_read(store: Store) -> None:
    with record("b", store=store, redactor=Redactor(env={})) as run:
        run.effect("tool", {}, lambda: "y" * 4000)
    ref = [e for e in store.events(run.id) if e["type"] == "effect"][0]["result"]
    pack = next(store.packs_dir.glob("*.pack"))
    data = bytearray(pack.read_bytes())
    location = Store(store.root).locate_blob(ref["digest"])
    assert location is not None
    data[location.offset + 50] ^= 0xFF
    pack.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=ref["digest"]):
        Store(store.root).get_blob(ref["digest"])


def test_a_missing_blob_is_a_clear_error(store: Store) -> None:
    absent = digest_bytes(b"never stored")
    with pytest.raises(BlobMissingError, match="not present") as info:
        store.get_blob(absent)
    assert absent in str(info.value)


def test_a_unique_prefix_of_the_id_or_its_random_part_resolves(store: Store) -> None:
    run = record_small_run(store)
    assert store.resolve(run.id) == run.id
    assert store.resolve(run.id[:17]) == run.id
    assert store.resolve(run.id.rsplit("-", 1)[1][:4]) == run.id


def test_unknown_and_ambiguous_run_ids_are_clear_errors(store: Store) -> None:
    a = record_small_run(store, steps=1)
    record_small_run(store, steps=1)
    with pytest.raises(RunNotFoundError, match="no run matches 'zzz'"):
        store.resolve("zzz")
    with pytest.raises(AmbiguousRunIdError, match="matches 2 runs"):
        store.resolve(a.id[:4])


def test_list_is_newest_first_with_event_counts(store: Store) -> None:
    runs = [record_small_run(store, steps=s) for s in (1, 2, 3)]
    rows = store.list_runs()
    assert [r.run_id for r in rows] == [
        r.id for r in sorted(runs, key=lambda r: (r.manifest.created_at, r.id), reverse=True)
    ]
    assert {r.run_id: r.events for r in rows} == {r.id: len(store.events(r.id)) for r in runs}
    assert all(r.status == "completed" for r in rows)


def test_a_deleted_index_is_rebuilt_from_the_logs(store: Store) -> None:
    runs = [record_small_run(store, steps=2) for _ in range(3)]
    before = [r.as_dict() for r in store.list_runs()]
    store.close()
    for path in store.root.glob("index.sqlite*"):
        path.unlink()
    fresh = Store(store.root)
    assert [r.as_dict() for r in fresh.list_runs()] == before
    ref = [e for e in fresh.events(runs[0].id) if e["type"] == "snapshot"][0]["tree"]
    assert fresh.get_json(ref)["format"] == "rar.tree/1"


def test_a_corrupt_index_is_moved_aside_and_rebuilt(store: Store) -> None:
    record_small_run(store, steps=2)
    before = [r.as_dict() for r in store.list_runs()]
    store.close()
    for path in store.root.glob("index.sqlite-*"):
        path.unlink()
    (store.root / "index.sqlite").write_bytes(b"this is not a database" * 100)
    fresh = Store(store.root)
    assert [r.as_dict() for r in fresh.list_runs()] == before
    assert list(store.root.glob("index.sqlite.corrupt-*"))


def test_a_run_changed_behind_the_index_is_reread(store: Store) -> None:
    import time

    import orjson

    run = record_small_run(store, steps=1)
    run_dir = store.run_dir(run.id)
    old = time.time_ns() - 60 * 10**9
    os.utime(run_dir, ns=(old, old))  # an old, settled directory: its row is trusted
    assert store.list_runs()[0].goal == "test goal"
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    manifest["goal"] = "edited"
    tmp = run_dir / "manifest.tmp"
    tmp.write_bytes(orjson.dumps(manifest))
    tmp.replace(run_dir / "manifest.json")  # how manifests are rewritten: the dir mtime moves
    assert store.list_runs()[0].goal == "edited"


def test_a_log_growing_while_running_is_seen_by_list(store: Store) -> None:
    run = record("open", store=store, redactor=Redactor(env={}))
    try:
        before = store.list_runs()[0].events
        run.effect("tool", {}, lambda: 1)
        assert store.list_runs()[0].events == before + 1
        assert store.list_runs()[0].status == "running"
    finally:
        run.finish()
    assert store.list_runs()[0].status == "completed"


def test_an_unwritable_store_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreNotWritableError, match="--store DIR or the RAR_HOME"):
        record("x", store=blocker / "runs", redactor=Redactor(env={}))


def test_a_missing_manifest_is_a_clear_error(store: Store) -> None:
    run = record_small_run(store, steps=1)
    (store.run_dir(run.id) / "manifest.json").unlink()
    with pytest.raises(ManifestMissingError, match="no usable manifest"):
        store.manifest(run.id)


def test_rar_home_sets_the_default_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAR_HOME", str(tmp_path / "elsewhere"))
    assert default_store_path() == tmp_path / "elsewhere"
    monkeypatch.delenv("RAR_HOME")
    assert default_store_path() == Path("runs")


def test_a_taken_run_id_is_a_clear_error_and_a_fresh_id_is_drawn_when_none_was_given(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rar.errors import RunExistsError
    from rar.runtime import start as run_module

    first = record("a", store=store, redactor=Redactor(env={}), run_id="fixed-id")
    first.finish()
    with pytest.raises(RunExistsError, match="already exists"):
        record("b", store=store, redactor=Redactor(env={}), run_id="fixed-id")
    ids = iter(["fixed-id", "fresh-id"])
    monkeypatch.setattr(run_module, "new_run_id", lambda: next(ids))
    second = record("c", store=store, redactor=Redactor(env={}))
    second.finish()
    assert second.id == "fresh-id"
    assert store.manifest("fixed-id").goal == "a"


# --- run directories that are not (yet) runs, and run files that are links ----------------------

_KILLED_START = """
import os, signal, sys
import rar.runtime.run as run_module
from rar.redaction import Redactor
from rar.runtime.start import record

def killed(*args, **kwargs):  # the start is stopped right before its first manifest is written
    os.kill(os.getpid(), signal.SIGKILL)

run_module.Run._begin = killed
record("never started", store=sys.argv[1], run_id=sys.argv[2], redactor=Redactor(env={}))
"""


def _kill_a_start(store_path: Path, run_id: str) -> None:
    import signal
    import subprocess
    import sys

    src = Path(__file__).resolve().parents[1] / "src"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_START, str(store_path), run_id],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert not (store_path / run_id / "manifest.json").exists()


def test_run_directories_of_starts_killed_before_the_manifest_are_listed_as_incomplete(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    from click.testing import CliRunner

    from rar.cli import cli

    run = record_small_run(store, steps=1)
    _kill_a_start(store.root, "20240101-000000-00000001")
    for n in range(2, 12):  # the review found 11 of them
        shutil.copytree(
            store.run_dir("20240101-000000-00000001"), store.run_dir(f"20240101-000000-{n:08x}")
        )
    rows = {row.run_id: row for row in store.list_runs()}
    assert rows[run.id].status == "completed" and rows[run.id].problem is None
    incomplete = [row for row in rows.values() if row.status == INCOMPLETE]
    assert len(incomplete) == 11
    for row in incomplete:
        assert row.problem is not None and row.problem.startswith("never started")
        assert row.events == 0 and row.goal is None
        assert row.created_at == "2024-01-01T00:00:00.000000Z"
    assert store.index.run_rows().keys() == {run.id}  # never indexed
    [note] = [r.getMessage() for r in caplog.records if "incomplete" in r.getMessage()]
    assert note.startswith("note: 11 run directories are listed as incomplete")
    assert "20240101-000000-00000001: never started" in note
    result = CliRunner().invoke(cli, ["--store", str(store.root), "list", "--json"])
    assert result.exit_code == 0, result.output
    listed = {r["run_id"]: r["status"] for r in json.loads(result.stdout)}
    assert listed == {row.run_id: row.status for row in rows.values()}
    result = CliRunner().invoke(cli, ["--store", str(store.root), "list"])
    assert result.exit_code == 0 and result.output.count("incomplete") == 11


def test_directories_that_are_not_runs_are_not_listed(store: Store) -> None:
    run = record_small_run(store, steps=1)
    (store.root / "notes").mkdir()
    (store.root / "notes" / "readme.txt").write_text("mine")
    assert [row.run_id for row in store.list_runs()] == [run.id]


def test_a_run_whose_manifest_is_damaged_is_listed_as_incomplete(store: Store) -> None:
    run = record_small_run(store, steps=1)
    (store.run_dir(run.id) / "manifest.json").write_text('{"status": "completed"')
    [row] = store.list_runs()
    assert row.status == INCOMPLETE and row.problem is not None and "unreadable" in row.problem
    assert row.events == len(store.events(run.id))


def test_a_symlinked_manifest_is_not_read_through(store: Store, tmp_path: Path) -> None:
    run = record_small_run(store, steps=1)
    outside = tmp_path / "outside.json"
    manifest = store.run_dir(run.id) / "manifest.json"
    data = json.loads(manifest.read_bytes())
    outside.write_text(json.dumps({**data, "goal": "served from outside the store"}))
    manifest.unlink()
    manifest.symlink_to(outside)
    [row] = store.list_runs()
    assert row.status == INCOMPLETE and row.goal is None
    assert row.problem is not None and "symbolic link" in row.problem
    with pytest.raises(ManifestMissingError, match="symbolic link"):
        store.manifest(run.id)
    assert store.resolve(run.id) == run.id  # still found: `rar show` says what is wrong


def test_a_symlinked_log_is_not_read_through(store: Store, tmp_path: Path) -> None:
    from rar.viewer.reading import read_log

    run = record_small_run(store, steps=1)
    log = store.run_dir(run.id) / "events.jsonl"
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(log.read_bytes())
    log.unlink()
    log.symlink_to(outside)
    with pytest.raises(CorruptionError, match="symbolic link"):
        store.events(run.id)
    [row] = store.list_runs()
    assert row.status == INCOMPLETE and "symbolic link" in (row.problem or "")
    viewed = read_log(log)
    assert viewed.events == [] and "symbolic link" in viewed.problems[0]["detail"]


def test_a_symlinked_run_directory_is_not_a_run(store: Store, tmp_path: Path) -> None:
    run = record_small_run(store, steps=1)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(store.run_dir(run.id), elsewhere)
    (store.root / "20240101-000000-linked00").symlink_to(elsewhere)
    assert [row.run_id for row in store.list_runs()] == [run.id]
    with pytest.raises(RunNotFoundError):
        store.resolve("20240101-000000-linked00")
