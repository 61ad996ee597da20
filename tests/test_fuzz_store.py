"""Fuzzing the store's readers: any bytes in a log or a pack file are read, or refused with a
:class:`~rar.errors.CorruptionError`; nothing else is raised and nothing hangs.

The inputs are arbitrary bytes, and real logs and packs (written by the store's own writers)
truncated, bit-flipped, overwritten and spliced, which is what a crash, a bad disk or a careless
edit leaves behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fuzzing import budget, json_values, no_hang
from rar.errors import CorruptionError
from rar.store.blobs import HEADER_SIZE, PACK_MAGIC, BlobLocation, PackReader, PackWriter
from rar.store.log import EventLog, iter_lines, read_events, read_tail
from rar.viewer.reading import read_log


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rar-fuzz-") as name:
        yield Path(name)


def _mutated(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` cut, with bits flipped, bytes overwritten, bytes inserted, or garbage added."""
    size = max(len(data), 1)
    positions = st.integers(min_value=0, max_value=size - 1)

    def flip(spots: list[tuple[int, int]]) -> bytes:
        out = bytearray(data)
        for at, bit in spots:
            out[at % len(out)] ^= 1 << bit
        return bytes(out)

    def overwrite(at: int, chunk: bytes) -> bytes:
        return data[:at] + chunk + data[at + len(chunk) :]

    def insert(at: int, chunk: bytes) -> bytes:
        return data[:at] + chunk + data[at:]

    return st.one_of(
        positions.map(lambda at: data[:at]),
        st.lists(st.tuples(positions, st.integers(0, 7)), min_size=1, max_size=4).map(flip),
        st.builds(overwrite, positions, st.binary(min_size=1, max_size=16)),
        st.builds(insert, positions, st.binary(min_size=1, max_size=16)),
        st.binary(max_size=64).map(lambda tail: data + tail),
    )


# --- the event log ------------------------------------------------------------------------------


def _real_log() -> bytes:
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "events.jsonl"
        log = EventLog(path)
        log.append({"type": "run.started", "span": "run", "goal": "g"})
        for i in range(4):
            log.append({"type": "effect", "span": "run", "kind": "tool", "request": {"i": i}})
        log.append({"type": "run.finished", "span": "run", "status": "completed"})
        log.close()
        return path.read_bytes()


REAL_LOG = _real_log()
LINES = st.one_of(
    json_values().map(lambda value: orjson.dumps(value)),
    st.builds(
        lambda seq, extra: orjson.dumps({"type": "e", "seq": seq, **extra}),
        json_values(),
        st.dictionaries(st.text(max_size=5), json_values(), max_size=3),
    ),
    st.binary(max_size=40).filter(lambda b: b"\n" not in b),
)
LOG_BYTES = st.one_of(
    st.binary(max_size=2048),
    st.lists(LINES, max_size=8).map(lambda lines: b"\n".join(lines)),
    st.lists(LINES, max_size=8).map(lambda lines: b"".join(line + b"\n" for line in lines)),
    _mutated(REAL_LOG),
)


def _write(scratch: Path, name: str, data: bytes) -> Path:
    path = scratch / name
    path.write_bytes(data)
    return path


@budget(300)
@given(LOG_BYTES)
@example(REAL_LOG)
@example(b"")
@example(b"\n\n")
@example(b'{"type": "e", "seq": 1e308}\n')
@example(b'{"type": "e", "seq": [1]}\n')
def test_the_log_reader_reads_any_bytes_or_reports_corruption(scratch: Path, data: bytes) -> None:
    path = _write(scratch, "events.jsonl", data)
    with no_hang():
        lines = list(iter_lines(path))
        try:
            events = read_events(path)
        except CorruptionError as exc:
            assert exc.line is not None and 1 <= exc.line <= len(lines)
            events = None
        try:
            tail = read_tail(path)
        except CorruptionError:
            tail = None
        seen = read_log(path)  # the viewer: never raises, stops at the first bad line
    # the lines are the file's bytes from its start, each newline where the file has one
    read = b"".join(
        line.data + (b"\n" if getattr(line, "terminated", True) else b"") for line in lines
    )
    assert data.startswith(read) and all(b"\n" not in line.data for line in lines)
    assert data.count(b"\n") - read.count(b"\n") == 0
    assert [line.number for line in lines] == list(range(1, len(lines) + 1))
    if events is not None:
        assert len(events) == len(lines)
        assert all(isinstance(e, dict) and "type" in e and "seq" in e for e in events)
        assert seen.events == events and seen.complete
    if tail is not None:
        assert tail.size + tail.torn_bytes == len(data)
        if lines:
            assert tail.digest == "sha256:" + hashlib.sha256(lines[-1].data).hexdigest()


# --- blob packs ------------------------------------------------------------------------------


def _real_pack() -> tuple[bytes, list[tuple[str, bytes, BlobLocation]]]:
    blobs = [
        b"",
        b'{"small": 1}',
        b"x" * 3000,  # compressed (zstd)
        bytes(range(256)) * 8,  # 2 KiB that zstd cannot shrink: stored raw
        orjson.dumps({"text": "the answer " * 400}),  # compressed, level 3
    ]
    with tempfile.TemporaryDirectory() as name:
        path = Path(name) / "w.pack"
        writer = PackWriter(path)
        digests = ["sha256:" + hashlib.sha256(raw).hexdigest() for raw in blobs]
        locations = writer.append_many(list(zip(digests, blobs, strict=True)))
        writer.close()
        return path.read_bytes(), list(zip(digests, blobs, locations, strict=True))


REAL_PACK, PACKED = _real_pack()
# found by a short atheris run: a damaged record, then a frame claiming 2.5e18 bytes
ATHERIS_PACK = PACK_MAGIC + bytes.fromhex(
    "42e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855007e010000000000000242"
    "527ecee49dd9b620ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "f0e1b8ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffff000bb80053c35ff92507fcfdfeff01070000fd0efc6b0a429d635bc810a851b2702704a571"
    "1300950254ab9a0a95899b377add0b16f673b5010000113b0000002828b52ffde03b10f50000b07b22746578"
    "74223a2274686520616e7377657220227d010044c27d6102"
)
PACK_BYTES = st.one_of(
    st.binary(max_size=512),
    st.binary(max_size=512).map(lambda body: PACK_MAGIC + body),
    _mutated(REAL_PACK),
)


@budget(800)
@given(PACK_BYTES)
@example(REAL_PACK)
@example(PACK_MAGIC)
@example(REAL_PACK[: len(PACK_MAGIC) + HEADER_SIZE - 1])
@example(ATHERIS_PACK)
def test_the_pack_reader_reads_any_bytes_or_reports_corruption(scratch: Path, data: bytes) -> None:
    _write(scratch, "w.pack", data)
    reader = PackReader(scratch)
    try:
        with no_hang():
            scan = reader.scan("w")  # a scan that resyncs past damage decodes records too
            assert scan.end <= scan.size == len(data)
            rescan, failures = reader.verify_pack("w")
            assert rescan == scan
            for record in scan.records:  # what a scan finds is read back, or refused
                try:
                    raw = reader.read(record.digest, record.location)
                except CorruptionError:
                    assert record in {failed for failed, _why in failures}
                    continue
                assert "sha256:" + hashlib.sha256(raw).hexdigest() == record.digest
            for digest, raw, location in PACKED:  # what the index says was written there
                with contextlib.suppress(CorruptionError):
                    assert reader.read(digest, location) == raw
    finally:
        reader.close()


def test_a_pristine_pack_scans_and_reads_back() -> None:
    with tempfile.TemporaryDirectory() as name:
        _write(Path(name), "w.pack", REAL_PACK)
        reader = PackReader(Path(name))
        scan, failures = reader.verify_pack("w")
        assert scan.problem is None and failures == [] and len(scan.records) == len(PACKED)
        assert {r.location.codec for r in scan.records} == {0, 1}  # both codecs are fuzzed
        for digest, raw, location in PACKED:
            assert reader.read(digest, location) == raw
        reader.close()


def test_the_scratch_files_stay_small(scratch: Path) -> None:
    assert all(os.path.getsize(p) < 1 << 20 for p in scratch.iterdir())


def test_a_zstd_frame_claiming_a_huge_size_is_corruption_not_a_memory_error(
    scratch: Path,
) -> None:
    digest, _raw, location = next(item for item in PACKED if item[2].codec == 1)
    data = bytearray(REAL_PACK)
    data[location.offset + HEADER_SIZE + 4] = 0xF0  # after the zstd magic: the descriptor
    _write(scratch, "w.pack", bytes(data))
    reader = PackReader(scratch)
    try:
        with pytest.raises(CorruptionError):
            reader.read(digest, location)
    finally:
        reader.close()


@pytest.mark.parametrize("claimed", [2999, 3001, None], ids=["fewer", "more", "unsaid"])
def test_a_zstd_frame_whose_size_disagrees_with_its_record_is_corruption(
    scratch: Path, claimed: int | None
) -> None:
    import struct

    import zstandard

    raw = b"x" * 3000
    if claimed is None:  # a frame without a size in its header, one byte longer
        stored = zstandard.ZstdCompressor(write_content_size=False).compress(raw + b"x")
    else:
        stored = zstandard.ZstdCompressor().compress(b"x" * claimed)
    header = struct.pack(">c32sBII", b"B", hashlib.sha256(raw).digest(), 1, len(raw), len(stored))
    assert len(header) == HEADER_SIZE
    _write(scratch, "w.pack", PACK_MAGIC + header + stored)
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    location = BlobLocation("w", len(PACK_MAGIC), 1, len(raw), len(stored))
    reader = PackReader(scratch)
    try:
        with pytest.raises(CorruptionError, match=r"zstd frame claims|cannot be decompressed"):
            reader.read(digest, location)
    finally:
        reader.close()
