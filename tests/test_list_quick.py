"""Listing reads a run's row the quick way only when it gives the careful way's row exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store

QUIET = Redactor(env={})


def _runs(store: Store, count: int = 3) -> list[str]:
    ids = []
    for i in range(count):
        run = record(f"run {i}", store=store, seed=i, durable=False, redactor=QUIET)
        with run:
            run.effect("tool", {"name": "t", "args": {"i": i}}, lambda i=i: {"v": i})
        ids.append(run.id)
    return ids


def _agree(store: Store, run_id: str) -> str:
    quick = store._quick_row(run_id, str(store.run_dir(run_id)))
    careful = store.row_from_files(run_id)
    if quick is None:
        return "careful"
    assert careful is not None and quick == careful, (quick, careful)
    return "quick"


def test_sound_runs_take_the_quick_way(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True)
    for run_id in _runs(store):
        assert _agree(store, run_id) == "quick"


def _damage(path: Path, how: str, run_dir: Path) -> None:
    log = run_dir / "events.jsonl"
    manifest = run_dir / "manifest.json"
    if how == "torn":
        with log.open("ab") as handle:
            handle.write(b'{"seq": 99, "ty')
    elif how == "unterminated":
        log.write_bytes(log.read_bytes().rstrip(b"\n"))
    elif how == "empty-log":
        log.write_bytes(b"")
    elif how == "no-log":
        log.unlink()
    elif how == "log-link":
        target = path / "elsewhere.jsonl"
        target.write_bytes(log.read_bytes())
        log.unlink()
        log.symlink_to(target)
    elif how == "manifest-link":
        target = path / "elsewhere.json"
        target.write_bytes(manifest.read_bytes())
        manifest.unlink()
        manifest.symlink_to(target)
    elif how == "no-manifest":
        manifest.unlink()
    elif how == "bad-manifest":
        manifest.write_bytes(b"{not json")
    elif how == "manifest-not-object":
        manifest.write_bytes(b"[1, 2]")
    elif how == "bad-status":
        manifest.write_bytes(manifest.read_bytes().replace(b'"completed"', b'"nonsense"'))
    elif how == "bad-last-line":
        data = log.read_bytes().rstrip(b"\n")
        head, _, _ = data.rpartition(b"\n")
        log.write_bytes(head + b"\nnot json at all\n")
    elif how == "string-seq":
        data = log.read_bytes().rstrip(b"\n")
        head, _, _ = data.rpartition(b"\n")
        log.write_bytes(head + b'\n{"seq": "7", "type": "note"}\n')
    elif how == "long-last-line":
        with log.open("ab") as handle:
            handle.write(b'{"seq": 50, "type": "note", "text": "' + b"x" * 20000 + b'"}\n')
    elif how == "log-is-dir":
        log.unlink()
        log.mkdir()
    else:  # pragma: no cover
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    [
        "torn", "unterminated", "empty-log", "no-log", "log-link", "manifest-link", "no-manifest",
        "bad-manifest", "manifest-not-object", "bad-status", "bad-last-line", "string-seq",
        "long-last-line", "log-is-dir",
    ],
)  # fmt: skip
def test_odd_runs_agree_or_go_the_careful_way(tmp_path: Path, how: str) -> None:
    store = Store(tmp_path / "store", create=True)
    run_id = _runs(store, 1)[0]
    _damage(tmp_path, how, store.run_dir(run_id))
    way = _agree(store, run_id)
    if how == "empty-log":
        assert way == "quick"
    elif how != "bad-status":
        assert way == "careful"


def test_listing_a_store_without_its_index_gives_the_same_rows(tmp_path: Path) -> None:
    store = Store(tmp_path / "store", create=True)
    ids = _runs(store, 4)
    _damage(tmp_path, "torn", store.run_dir(ids[1]))
    _damage(tmp_path, "no-manifest", store.run_dir(ids[2]))
    rows = {r.run_id: r for r in store.list_runs()}
    store.close()
    for suffix in ("", "-wal", "-shm"):
        path = tmp_path / "store" / f"index.sqlite{suffix}"
        if path.exists():
            path.unlink()
    again = Store(tmp_path / "store")
    rebuilt = {r.run_id: r for r in again.list_runs()}
    careful = {i: again.row_from_files(i) for i in ids}
    assert set(rebuilt) == set(rows) == set(ids)
    for run_id in ids:
        assert rebuilt[run_id] == careful[run_id]
        assert rebuilt[run_id].status == rows[run_id].status
        assert rebuilt[run_id].events == rows[run_id].events
    assert rebuilt[ids[2]].status == "incomplete"
