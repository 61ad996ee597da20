"""`verify_store` re-hashes everything and names each broken item; it never repairs."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from helpers import record_small_run

from rar.store.log import read_events
from rar.store.store import Store
from rar.store.verify import verify_store


def _log(store: Store, run_id: str):  # type: ignore[no-untyped-def]
    return store.run_dir(run_id) / "events.jsonl"


def test_an_intact_store_verifies(store: Store) -> None:
    run = record_small_run(store)
    report = verify_store(store)
    assert report.ok, report.problems
    assert report.runs == 1 and report.events == len(store.events(run.id)) and report.blobs > 0


@pytest.mark.parametrize("position", [0.1, 0.5, 0.9])
def test_a_changed_byte_anywhere_in_a_log_is_reported(store: Store, position: float) -> None:
    run = record_small_run(store)
    path = _log(store, run.id)
    data = bytearray(path.read_bytes())
    index = int(len(data) * position)
    while data[index : index + 1] in (b"\n", b'"', b"{", b"}", b":", b","):
        index += 1
    data[index] = ord("7") if data[index] != ord("7") else ord("8")
    path.write_bytes(bytes(data))
    report = verify_store(store, [run.id])
    assert not report.ok
    assert {p.what for p in report.problems} & {
        "chain",
        "head",
        "malformed-line",
        "seq",
        "manifest-changed",
    }


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_changed_byte_in_a_blob_is_reported(store: Store) -> None:
    record_small_run(store)
    pack = next(store.packs_dir.glob("*.pack"))
    data = bytearray(pack.read_bytes())
    data[-3] ^= 0x01  # inside the last record's stored bytes
    pack.write_bytes(bytes(data))
    report = verify_store(Store(store.root))
    assert not report.ok
    assert any(p.what == "blob-corrupt" for p in report.problems)


def test_a_removed_line_breaks_the_chain(store: Store) -> None:
    run = record_small_run(store)
    path = _log(store, run.id)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3] + lines[4:]))
    problems = verify_store(store, [run.id]).problems
    chain = [p for p in problems if p.what == "chain"]
    assert chain and chain[0].seq == 4


def test_an_appended_line_after_finish_is_reported_against_the_manifest_head(store: Store) -> None:
    run = record_small_run(store)
    path = _log(store, run.id)
    events = read_events(path)
    from rar.hashing import canonical, digest_bytes

    extra = {
        "type": "note",
        "text": "forged",
        "seq": len(events) + 1,
        "ts": events[-1]["ts"],
        "span": "run",
        "prev": digest_bytes(path.read_bytes().splitlines()[-1]),
    }
    with path.open("ab") as handle:
        handle.write(canonical(extra) + b"\n")
    problems = verify_store(store, [run.id]).problems
    assert "head" in [p.what for p in problems]


def test_an_edited_manifest_is_reported(store: Store) -> None:
    run = record_small_run(store)
    path = store.run_dir(run.id) / "manifest.json"
    manifest = orjson.loads(path.read_bytes())
    manifest["goal"] = "a different goal"
    path.write_bytes(orjson.dumps(manifest))
    problems = verify_store(store, [run.id]).problems
    assert any(p.what == "manifest-changed" and "goal" in p.detail for p in problems)


def test_a_malformed_line_in_the_middle_is_reported_not_skipped(store: Store) -> None:
    run = record_small_run(store)
    path = _log(store, run.id)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"this is": not json\n'
    path.write_bytes(b"".join(lines))
    problems = verify_store(store, [run.id]).problems
    assert any(p.what == "malformed-line" and p.seq == 3 for p in problems)
    from rar.errors import CorruptionError

    with pytest.raises(CorruptionError, match="line 3"):
        store.events(run.id)


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_missing_blob_is_reported(store: Store) -> None:
    run = record_small_run(store, steps=2)
    big = "x" * 3000
    from rar.redaction import Redactor
    from rar.runtime.start import record

    with record("big", store=store, redactor=Redactor(env={})) as big_run:
        big_run.effect("tool", {"name": "big"}, lambda: big)
    for pack in store.packs_dir.glob(f"{big_run.id}*.pack"):
        pack.unlink()
    (store.root / "index.sqlite").unlink()
    report = verify_store(Store(store.root), [big_run.id])
    assert any(p.what == "blob-missing" for p in report.problems)
    assert verify_store(Store(store.root), [run.id]).ok


def test_a_run_without_manifest_is_reported(store: Store) -> None:
    run = record_small_run(store)
    (store.run_dir(run.id) / "manifest.json").unlink()
    problems = verify_store(store).problems
    assert [p.what for p in problems] == ["manifest"]
    assert run.id in problems[0].detail


# --- verify reports; it never repairs -------------------------------------------------------


def _effects(store: Store, run_id: str) -> list[dict[str, object]]:
    return [e for e in store.events(run_id) if e["type"] == "effect"]


def _big_run(store: Store, effects: int = 8) -> str:
    """A run whose results are blobs in its own pack (several records)."""
    from rar.redaction import Redactor
    from rar.runtime.start import record

    with record("big", store=store, seed=2, redactor=Redactor(env={})) as run:
        for i in range(effects):
            run.effect("tool", {"i": i}, lambda i=i: {"big": f"{i}" * (400 + 300 * i)})
    return run.id


def _record_offsets(store: Store, run_id: str) -> tuple[Path, list[int]]:
    [pack] = sorted(store.packs_dir.glob(f"{run_id}.*.pack"))
    return pack, [r.location.offset for r in store.reader.scan(pack.stem).records]


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_damaged_length_in_the_middle_of_a_pack_is_reported_and_the_pack_left_whole(
    store: Store,
) -> None:
    run_id = _big_run(store)
    pack, offsets = _record_offsets(store, run_id)
    damaged = store.reader.scan(pack.stem).records[2].digest
    data = bytearray(pack.read_bytes())
    data[offsets[2] + 38] ^= 0x80  # the stored length: the record now claims megabytes
    pack.write_bytes(bytes(data))
    report = verify_store(Store(store.root))
    assert pack.read_bytes() == bytes(data)  # nothing cut
    assert not report.ok and report.repaired == [] and report.warnings == []
    [damage] = [p for p in report.problems if p.what == "pack"]
    assert damage.path == str(pack) and damage.offset == offsets[2]
    assert f"next intact record at offset {offsets[3]}" in damage.detail
    # the records after the damage are still found: only the damaged one is missing
    [lost] = [p for p in report.problems if p.what == "blob-corrupt" and p.run_id == run_id]
    assert "is damaged" in lost.detail and f"offset {offsets[2]}" in lost.detail
    assert {p.what for p in report.problems} == {"pack", "blob-corrupt"}
    # readers still find every intact blob, those after the damage included (index rebuilt)
    for suffix in ("", "-wal", "-shm"):
        (store.root / f"index.sqlite{suffix}").unlink(missing_ok=True)
    fresh = Store(store.root)
    try:
        effects = _effects(fresh, run_id)
        intact = [e for e in effects if e["result"]["digest"] != damaged]
        assert len(intact) == len(effects) - 1
        for event in intact:
            assert fresh.resolve_payload(event["result"])["big"][0] == str(event["ordinal"])
    finally:
        fresh.close()


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_torn_record_at_the_end_of_a_pack_is_a_warning_and_stays(store: Store) -> None:
    import struct

    run_id = _big_run(store)
    pack, _ = _record_offsets(store, run_id)
    size = pack.stat().st_size
    with pack.open("ab") as handle:  # what a writer killed mid-write leaves
        handle.write(struct.pack(">c32sBII", b"B", bytes(32), 0, 100, 100) + b"x" * 10)
    torn = pack.read_bytes()
    report = verify_store(Store(store.root))
    assert report.ok, report.problems
    assert [(w.what, w.path, w.offset) for w in report.warnings] == [
        ("torn-record", str(pack), size)
    ]
    assert pack.read_bytes() == torn
    # readers pass over it
    fresh = Store(store.root)
    try:
        results = [fresh.resolve_payload(e["result"]) for e in _effects(fresh, run_id)]
        assert [r["big"][0] for r in results] == [str(i) for i in range(8)]
    finally:
        fresh.close()


def test_a_removed_last_newline_of_a_finished_run_is_reported_and_the_line_kept(
    store: Store,
) -> None:
    run = record_small_run(store)
    path = _log(store, run.id)
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    report = verify_store(store, [run.id])
    assert path.read_bytes() == data[:-1]  # the sealed run.finished line is still there
    assert [p.what for p in report.problems] == ["unterminated-line"]
    assert report.problems[0].seq == len(data.splitlines())
    assert store.events(run.id)[-1]["type"] == "run.finished"  # readers still see it


def test_a_torn_last_line_after_a_finished_run_is_a_problem_not_a_crash(store: Store) -> None:
    run = record_small_run(store)
    path = _log(store, run.id)
    with path.open("ab") as handle:
        handle.write(b'{"seq": 99, "torn')
    report = verify_store(store, [run.id])
    assert [p.what for p in report.problems] == ["torn-line"]
    assert report.warnings == []


# --- the final state is sealed in run.finished ------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("status", "failed"),
        ("finished_at", "2031-01-01T00:00:00.000000Z"),
        ("stats", {"effects": {"tool": 99}}),
    ],
)
def test_an_edited_final_state_of_the_manifest_is_reported(
    store: Store, field: str, value: object
) -> None:
    run = record_small_run(store)
    path = store.run_dir(run.id) / "manifest.json"
    manifest = orjson.loads(path.read_bytes())
    finished = store.events(run.id)[-1]
    assert finished[field] == manifest[field]  # sealed
    manifest[field] = value
    path.write_bytes(orjson.dumps(manifest))
    [problem] = verify_store(store, [run.id]).problems
    assert problem.what == "manifest-changed" and problem.detail.endswith(f": {field}")
    assert problem.seq == finished["seq"]
    assert orjson.loads(problem.expected or "") == {field: finished[field]}
    assert orjson.loads(problem.actual or "") == {field: value}


def test_a_run_finished_without_the_sealed_fields_compares_only_its_status(store: Store) -> None:
    """Logs written before run.finished carried finished_at and stats still verify."""
    from rar.hashing import canonical, digest_bytes

    run = record_small_run(store)
    path = _log(store, run.id)
    lines = path.read_bytes().splitlines(keepends=True)
    old = orjson.loads(lines[-1])
    del old["finished_at"], old["stats"]
    lines[-1] = canonical(old) + b"\n"
    path.write_bytes(b"".join(lines))
    manifest_path = store.run_dir(run.id) / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    manifest["head"] = digest_bytes(lines[-1][:-1])
    manifest["stats"] = {"edited": 1}  # not sealed in this log: nothing to compare it with
    manifest_path.write_bytes(orjson.dumps(manifest))
    assert verify_store(store, [run.id]).ok
    manifest["status"] = "failed"
    manifest_path.write_bytes(orjson.dumps(manifest))
    assert [p.what for p in verify_store(store, [run.id]).problems] == ["manifest-changed"]


def test_a_run_that_finished_twice_is_compared_with_its_last_run_finished(store: Store) -> None:
    from rar.redaction import Redactor
    from rar.replay import execute, resume
    from rar.runtime.run import Run, RunWaiting

    quiet = Redactor(env={})

    def waits(run: Run) -> int:
        run.effect("tool", {"n": 1}, lambda: 1)
        raise RunWaiting("2000-01-01T00:00:00Z", "for the test")

    def goes_on(run: Run) -> int:
        run.effect("tool", {"n": 1}, lambda: 1)
        return int(run.effect("tool", {"n": 2}, lambda: 2))

    run = execute(waits, store=store, redactor=quiet)
    assert store.manifest(run.id).status == "waiting"
    resume(run.id, store=store, function=goes_on, redactor=quiet)
    first, last = [e for e in store.events(run.id) if e["type"] == "run.finished"]
    assert (first["status"], last["status"]) == ("waiting", "completed")
    assert verify_store(store, [run.id]).ok

    path = store.run_dir(run.id) / "manifest.json"
    manifest = orjson.loads(path.read_bytes())
    manifest["finished_at"] = first["finished_at"]  # the earlier finish's: no longer the last
    path.write_bytes(orjson.dumps(manifest))
    [problem] = verify_store(store, [run.id]).problems
    assert problem.what == "manifest-changed" and problem.seq == last["seq"]


def test_a_flipped_key_is_a_damaged_event_not_an_internal_error(store: Store) -> None:
    """One bit flipped in a snapshot line's "tree" key: reported as a damaged event (it once
    escaped as KeyError: 'tree')."""
    run = record_small_run(store)
    path = _log(store, run.id)
    data = path.read_bytes()
    at = data.index(b'"tree"')
    flipped = bytearray(data)
    flipped[at + 4] ^= 0x04  # "tree" -> "tra"... one bit: e (0x65) -> a (0x61)
    path.write_bytes(bytes(flipped))
    report = verify_store(store, [run.id])  # must not raise
    assert not report.ok
    shape = [p for p in report.problems if p.what == "event-shape"]
    assert shape and "not a valid snapshot event" in shape[0].detail, report.problems
