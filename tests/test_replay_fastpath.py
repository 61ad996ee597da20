"""Replay reads and verifies the record in one pass, and serves recorded bytes as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from rar.hashing import Canonical, canonical, digest_bytes
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.replay.engine import ReplayRefusedError
from rar.replay.source import served_ref
from rar.store.store import Store
from rar.store.verify import verify_run, verify_store

QUIET = Redactor(env={})
AWKWARD = {
    "big": 1e21,
    "small": 1e-7,
    "half": 0.5,
    "whole": 2.0,
    "neg_zero": -0.0,
    "wide": 2.0**60,
    "text": "é ü 😀",
    "\U0001f600 key": 1,
    "nested": [{"b": 1, "a": [1.25, None, True]}],
}


def entry(run: Any, count: int) -> list[Any]:
    out = []
    for i in range(count):
        out.append(run.effect("tool", {"name": "t", "args": {"i": i}}, lambda i=i: {"i": i}))
        out.append(run.effect("tool", {"name": "awkward", "i": i}, lambda: dict(AWKWARD)))
        out.append(run.effect("tool", {"name": "big", "i": i}, lambda i=i: {"blob": "x" * 5000}))
    return out


def _record(tmp_path: Path, count: int = 3) -> tuple[Store, str]:
    store = Store(tmp_path / "store", create=True)
    run = execute(entry, inputs={"count": count}, store=store, durable=False, redactor=QUIET)
    return store, run.id


def test_verify_run_returns_the_events_as_the_store_reads_them(tmp_path: Path) -> None:
    store, run_id = _record(tmp_path)
    report, events = verify_run(store, run_id)
    assert report.ok
    assert events == store.events(run_id)
    plain = verify_store(store, [run_id])
    assert (report.events, report.blobs, report.problems) == (
        plain.events,
        plain.blobs,
        plain.problems,
    )


def test_replay_reads_the_log_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, run_id = _record(tmp_path)

    def no_second_read(self: Store, run: str) -> list[dict[str, Any]]:
        if run == run_id:
            raise AssertionError("the source log was read again after verification")
        return original(self, run)

    original = Store.events
    monkeypatch.setattr(Store, "events", no_second_read)
    report = replay(run_id, store=store, redactor=QUIET)
    assert report.reproducible, report.as_dict()


def test_served_lines_are_the_recorded_bytes(tmp_path: Path) -> None:
    store, run_id = _record(tmp_path)
    report = replay(run_id, store=store, redactor=QUIET)
    assert report.reproducible, report.as_dict()
    source = [e for e in store.events(run_id) if e["type"] == "effect"]
    replayed = [e for e in store.events(report.replay_run) if e["type"] == "effect"]
    assert [e["result"] for e in replayed] == [e["result"] for e in source]
    assert verify_store(store, [report.replay_run]).ok
    # the awkward values (floats, non-BMP keys) went the general way, and still match
    for event in replayed:
        ref = event["result"]
        if "value" in ref:
            data = canonical(ref["value"])
            assert digest_bytes(data) == ref["digest"] and len(data) == ref["size"]


def test_served_ref_only_reuses_bytes_it_can_prove() -> None:
    plain = {"a": [1, "b", None], "c": {"d": True}}
    data = canonical(plain)
    ref = {"digest": digest_bytes(data), "size": len(data), "value": plain}
    served = served_ref(ref)
    assert served is not None and isinstance(served["value"], Canonical)
    assert served["value"].data == data
    for value in (AWKWARD, {"x": 1e21}, {"x": 1.0}, {"\U0001f600": 1, "a": 2}):
        data = canonical(value)
        ref = {"digest": digest_bytes(data), "size": len(data), "value": orjson.loads(data)}
        assert served_ref(ref) is ref or served_ref(ref)["value"].data == data  # type: ignore[index]
    lying = {"digest": digest_bytes(b"{}"), "size": 2, "value": {"a": 1}}
    assert served_ref(lying) is lying  # not the bytes it names: written the general way
    assert served_ref(None) is None
    blob = {"digest": digest_bytes(b"x"), "size": 1}
    assert served_ref(blob) is blob


def test_a_tampered_record_is_still_refused(tmp_path: Path) -> None:
    store, run_id = _record(tmp_path)
    log = store.run_dir(run_id) / "events.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"i":1', b'"i":7', 1) if b'"i":1' in lines[3] else lines[3] + b" "
    log.write_bytes(b"\n".join(lines))
    with pytest.raises(ReplayRefusedError, match="fails verification"):
        replay(run_id, store=store, redactor=QUIET)


def test_a_damaged_blob_is_still_refused(tmp_path: Path) -> None:
    store, run_id = _record(tmp_path)
    store.close()
    pack = next((tmp_path / "store" / "blobs" / "packs").glob(f"{run_id}*.pack"))
    data = bytearray(pack.read_bytes())
    at = data.find(b"x" * 100)
    if at < 0:  # compressed: flip a byte near the end of the pack instead
        at = len(data) - 10
    data[at] ^= 0x01
    pack.write_bytes(bytes(data))
    with pytest.raises(ReplayRefusedError, match="fails verification"):
        replay(run_id, store=Store(tmp_path / "store"), redactor=QUIET)
