"""`verify_store` re-hashes everything and names each broken item."""

from __future__ import annotations

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
