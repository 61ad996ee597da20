"""What the index says is checked against the logs and packs where it matters: damaged or lying
index content is never served, never blamed on the packs, and makes the index rebuild."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import record_small_run

from rar.cli import cli
from rar.demo import run_demo
from rar.errors import CorruptionError
from rar.redaction import Redactor
from rar.replay import replay
from rar.runtime.start import record
from rar.store.index import Index, PackScanner
from rar.store.store import Store
from rar.store.verify import verify_store

QUIET = Redactor(env={})
GOAL = "a goal worth keeping"


# the blobs these tests damage and misplace are in packs
pytestmark = pytest.mark.usefixtures("blobs_in_packs")


def _settled(store: Store) -> None:
    """Make every run directory old, so that the index's rows for them are trusted (not re-read
    as "racy"), and index them."""
    old = time.time_ns() - 600 * 10**9
    for run_id in store.run_ids():
        os.utime(store.run_dir(run_id), ns=(old, old))
    store.list_runs()
    store.index.catch_up(store.reader)
    store.close()


def _flip(path: Path, needle: bytes, *, offset: int = 1, value: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0, needle
    data[at + offset] = (data[at + offset] ^ 0x01) if value is None else value
    path.write_bytes(bytes(data))


def _quarantined(root: Path) -> list[Path]:
    return list(root.glob("index.sqlite.corrupt-*"))


def _blob_payloads(store: Store, run_id: str) -> list[Any]:
    values = []
    for event in store.events(run_id):
        for key in ("request", "result"):
            ref = event.get(key)
            if isinstance(ref, dict) and "value" not in ref:
                values.append(store.resolve_payload(ref))
    return values


# --- damaged rows ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    ["invalid-utf8-goal", "valid-utf8-goal", "event-count", "schema-text"],
)
def test_a_damaged_byte_in_the_index_is_never_listed(store: Store, damage: str) -> None:
    """Before: invalid UTF-8 made every `rar list` exit 4 with UnicodeDecodeError (in a row, or in
    the schema text, which spoils SQLite's own error message); valid text was listed as is."""
    runs = [record_small_run(store, steps=s, goal=GOAL) for s in (1, 2)]
    _settled(store)
    path = store.root / "index.sqlite"
    truth = [r.as_dict() for r in Store(store.root, read_only=True).list_runs()]
    if damage == "invalid-utf8-goal":
        _flip(path, GOAL.encode(), value=0xC3)
    elif damage == "valid-utf8-goal":
        _flip(path, GOAL.encode())  # "a" becomes "`": still text, no longer the goal
    elif damage == "event-count":
        # the row's bytes: run_id, status, goal, created_at, finished_at, events, ...
        # a row's record: run_id, status, goal, created_at, finished_at, events (one byte), ...
        needle = b"completed" + GOAL.encode()
        data = path.read_bytes()
        at = data.find(needle) + len(needle) + 2 * len("2026-01-01T00:00:00.000000Z")
        assert data[at] in {len(store.events(r.id)) for r in runs}
        _flip(path, needle, offset=at - data.find(needle))
    else:
        _flip(path, b"CREATE TABLE runs", offset=14, value=0xFF)
    result = CliRunner().invoke(cli, ["--store", str(store.root), "list", "--json"])
    assert result.exit_code == 0, result.output
    fresh = Store(store.root)
    try:
        assert [r.as_dict() for r in fresh.list_runs()] == truth
    finally:
        fresh.close()


def test_a_row_damaged_in_the_index_makes_it_rebuild(store: Store) -> None:
    record_small_run(store, steps=1, goal=GOAL)
    _settled(store)
    _flip(store.root / "index.sqlite", GOAL.encode())
    reader = Store(store.root)
    try:
        assert [r.goal for r in reader.list_runs()] == [GOAL]
        assert any("lied" in note or "damaged" in note for note in reader.notes)
    finally:
        reader.close()
    assert _quarantined(store.root)
    again = Store(store.root)  # the rebuilt index is sound: nothing more is moved aside
    try:
        assert [r.goal for r in again.list_runs()] == [GOAL]
        assert again.notes == []
    finally:
        again.close()
    assert len(_quarantined(store.root)) == 1


def test_a_damaged_cached_answer_is_never_served(store: Store) -> None:
    row = ("key1", "openai", "m", '{"digest":"r"}', '{"value":"the answer"}', "run", 3, "t")
    store.index.cache_put([row])
    assert store.index.cache_get("key1") == ('{"value":"the answer"}', "run", 3)
    store.close()
    _flip(store.root / "index.sqlite", b"the answer", value=ord("T"))
    reader = Store(store.root)
    try:
        assert reader.index.cache_get("key1") is None  # a miss: the provider is asked again
        assert reader.index.cache_recent(10) == []
    finally:
        reader.close()


# --- blob locations that lie --------------------------------------------------------------------


def _shift_offsets(store: Store, by: int | None = None) -> None:
    """Move every blob location of the index: by ``by`` bytes, or onto the next record."""
    conn = sqlite3.connect(store.root / "index.sqlite", isolation_level=None)
    try:
        if by is not None:
            conn.execute("UPDATE blobs SET offset = offset + ?", (by,))
        else:
            rows = conn.execute("SELECT digest, pack, offset FROM blobs ORDER BY pack, offset")
            rows = rows.fetchall()
            moved = rows[1:] + rows[:1]
            for (digest, _, _), (_, pack, offset) in zip(rows, moved, strict=True):
                conn.execute(
                    "UPDATE blobs SET pack=?, offset=? WHERE digest=?", (pack, offset, digest)
                )
            # every row now names another record: the sizes no longer match either
    finally:
        conn.close()


@pytest.mark.parametrize("shift", [1, 42, None], ids=["by-1", "by-a-header", "onto-next-record"])
def test_shifted_blob_offsets_are_not_blamed_on_the_pack(store: Store, shift: int | None) -> None:
    """Before: verify RUN and replay reported blob-corrupt for an intact pack."""
    run = run_demo(store)
    expected = _blob_payloads(store, run.id)
    assert expected
    _settled(store)
    _shift_offsets(store, shift)
    reader = Store(store.root)
    try:
        assert _blob_payloads(reader, run.id) == expected
        assert any("lied" in note for note in reader.notes)
        report = verify_store(reader, [run.id])
        assert report.ok, report.problems
    finally:
        reader.close()
    assert _quarantined(store.root)


def test_a_replay_reads_its_blobs_past_a_lying_index(store: Store) -> None:
    run = run_demo(store)
    _settled(store)
    _shift_offsets(store, 1)
    reader = Store(store.root)
    try:
        report = replay(run.id, store=reader, redactor=QUIET)
        assert report.reproducible, report
        assert verify_store(reader).ok
    finally:
        reader.close()


def test_a_blob_the_index_forgot_is_found_by_scanning_the_packs(store: Store) -> None:
    run = run_demo(store)
    expected = _blob_payloads(store, run.id)
    _settled(store)
    conn = sqlite3.connect(store.root / "index.sqlite", isolation_level=None)
    conn.execute("DELETE FROM blobs")  # the packs table still says every pack is indexed
    conn.close()
    reader = Store(store.root)
    try:
        assert _blob_payloads(reader, run.id) == expected
        assert any("not indexed" in note for note in reader.notes)
    finally:
        reader.close()


def test_a_damaged_pack_record_is_still_blamed_on_the_pack(store: Store) -> None:
    with record("big", store=store, redactor=QUIET) as run:
        run.effect("tool", {}, lambda: "y" * 4000)
    ref = [e for e in store.events(run.id) if e["type"] == "effect"][0]["result"]
    _settled(store)
    pack = next(store.packs_dir.glob("*.pack"))
    location = Store(store.root).locate_blob(ref["digest"])
    assert location is not None
    for offset in (location.offset + 50, location.offset + 5):  # its bytes, then its header digest
        data = bytearray(pack.read_bytes())
        data[offset] ^= 0xFF
        pack.write_bytes(bytes(data))
        reader = Store(store.root)
        try:
            with pytest.raises(CorruptionError, match=ref["digest"]):
                reader.get_blob(ref["digest"])
            assert reader.notes == []  # the index was right
        finally:
            reader.close()
    assert _quarantined(store.root) == []


def test_a_writer_does_not_skip_a_blob_the_index_lies_about(store: Store) -> None:
    big = {"text": "shared " * 800}
    with record("first", store=store, redactor=QUIET) as first:
        first.effect("tool", {"n": 1}, lambda: big)
    _settled(store)
    _shift_offsets(store, 1)
    for pack in store.packs_dir.glob("*.pack"):
        pack.unlink()  # and the blob the index names is nowhere: a writer must store it again
    writer_store = Store(store.root)
    with record("second", store=writer_store, redactor=QUIET) as second:
        second.effect("tool", {"n": 2}, lambda: big)
    writer_store.close()
    reader = Store(store.root)
    try:
        result = [e for e in reader.events(second.id) if e["type"] == "effect"][0]["result"]
        assert reader.resolve_payload(result) == big
    finally:
        reader.close()


def test_verdicts_tell_a_lie_from_pack_damage(store: Store) -> None:
    with record("two blobs", store=store, redactor=QUIET) as run:
        run.effect("tool", {"n": 1}, lambda: "a" * 3000)
        run.effect("tool", {"n": 2}, lambda: "b" * 3000)
    _settled(store)
    scanner = PackScanner(store.reader)
    locations = scanner.locations()
    digest, location = max(locations.items(), key=lambda item: item[1].stored_size)
    other = next(at for d, at in locations.items() if d != digest)
    shifted = dataclasses.replace(location, offset=location.offset + 1)
    assert scanner.verdict(digest, location) == "right"  # the index is right
    assert scanner.verdict(digest, other) == "lie"
    assert scanner.verdict(digest, shifted) == "lie"
    pack = store.reader.pack_path(location.pack)
    data = bytearray(pack.read_bytes())
    data[location.offset + 5] ^= 0xFF  # the digest in its record header
    pack.write_bytes(bytes(data))
    damaged = PackScanner(store.reader)
    assert damaged.verdict(digest, location) == "damaged"  # not the index's fault


# --- many random bit flips ----------------------------------------------------------------------


@pytest.mark.slow
def test_random_bit_flips_in_the_index_never_change_what_is_read(
    store: Store, tmp_path: Path
) -> None:
    runs = [record_small_run(store, steps=s, goal=f"goal {s}") for s in (1, 2, 3)]
    from rar.llm.cache import ResponseCache

    ResponseCache(store).rebuild()
    _settled(store)
    truth_store = Store(store.root, read_only=True)
    truth = [r.as_dict() for r in truth_store.list_runs()]
    payloads = {run.id: _blob_payloads(truth_store, run.id) for run in runs}
    truth_store.close()
    data = (store.root / "index.sqlite").read_bytes()
    rng = random.Random(7)
    copy = tmp_path / "copy"
    for position in rng.sample(range(len(data)), 150):
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(store.root, copy, copy_function=shutil.copy2)
        damaged = bytearray(data)
        damaged[position] ^= 1 << rng.randrange(8)
        (copy / "index.sqlite").write_bytes(bytes(damaged))
        reader = Store(copy)
        try:
            rows = [r.as_dict() for r in reader.list_runs()]
            assert [{**r, "dir_mtime_ns": 0} for r in rows] == [
                {**r, "dir_mtime_ns": 0} for r in truth
            ], position
            for run in runs:
                assert _blob_payloads(reader, run.id) == payloads[run.id], position
        finally:
            reader.close()


def test_an_index_that_lies_in_a_read_only_store_is_replaced_in_memory(store: Store) -> None:
    run = run_demo(store)
    expected = _blob_payloads(store, run.id)
    _settled(store)
    _shift_offsets(store, 1)
    reader = Store(store.root, read_only=True)
    try:
        assert reader.index.location == "temporary"
        assert _blob_payloads(reader, run.id) == expected
        assert reader.index.location in ("temporary", "memory")
    finally:
        reader.close()
    assert _quarantined(store.root) == []  # nothing is written in a read-only store
    index = Index(store.root / "index.sqlite", writable=False)
    index.close()
