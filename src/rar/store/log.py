"""The append-only, hash-chained event log of one run (``events.jsonl``).

Each line is the RFC 8785 canonical JSON of one event followed by ``\\n``. Every event names the
digest of the previous line's bytes in ``prev`` (``null`` for the first), so changing, removing or
reordering any line breaks the chain after it.

Writing rules:

* a line is written with ``write(2)`` on an ``O_APPEND`` descriptor before ``append`` returns, so
  a process killed at any moment loses nothing it had acknowledged;
* with ``sync=True`` the line is fsynced before ``append`` returns (effects use that);
* a failed write (disk full, I/O error) truncates the file back to its last complete line and
  raises :class:`AppendError`: no half line is ever left for the next append to fuse onto;
* opening a log for writing repairs a torn last line (a crash mid-write): the incomplete bytes
  were never acknowledged, so dropping them loses nothing. A malformed *complete* line is
  corruption and is reported, never skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from rar.errors import AppendError, CorruptionError
from rar.hashing import canonical_record, digest_bytes
from rar.store._fs import AppendOnlyFile, fsync_dir

_TAIL_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class LogTail:
    """Where a log ends: the last complete event and the bytes that follow it."""

    seq: int  # 0 when empty
    digest: str | None  # digest of the last complete line
    size: int  # bytes up to and including the last newline
    torn_bytes: int  # bytes after the last newline (a torn write)


def read_tail(path: Path) -> LogTail:
    """Find the last complete line without reading the whole file."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return LogTail(0, None, 0, 0)
    if size == 0:
        return LogTail(0, None, 0, 0)
    with open(path, "rb") as handle:
        start = size
        buffer = b""
        # read backwards until the buffer holds the last newline and the one before it
        while start > 0 and buffer.count(b"\n", 0, len(buffer)) < 2:
            start = max(0, start - _TAIL_CHUNK)
            handle.seek(start)
            buffer = handle.read(size - start)
    last = buffer.rfind(b"\n")
    if last < 0:
        return LogTail(0, None, 0, size)  # only a torn first line
    previous = buffer.rfind(b"\n", 0, last)
    complete = start + last + 1
    return _tail_from_line(path, buffer[previous + 1 : last], complete, size - complete)


def _tail_from_line(path: Path, line: bytes, size: int, torn: int) -> LogTail:
    try:
        event = orjson.loads(line)
        seq = int(event["seq"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CorruptionError(
            f"the last complete line of the log is malformed ({exc})", path=path
        ) from exc
    return LogTail(seq, digest_bytes(line), size, torn)


class EventLog:
    """Appends events to one run's log. One writer per log (the caller holds the run lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        existed = path.exists()
        tail = read_tail(path)
        self.repaired_bytes = tail.torn_bytes
        self._file = AppendOnlyFile(path, what="log", size=tail.size + tail.torn_bytes)
        try:
            if tail.torn_bytes:
                self._file.truncate(tail.size)
            if not existed:
                fsync_dir(path.parent)
        except (AppendError, OSError) as exc:
            self._file.close()
            if isinstance(exc, AppendError):
                raise
            raise AppendError(path, exc.strerror or str(exc)) from exc
        self.seq = tail.seq
        self.head = tail.digest

    @property
    def size(self) -> int:
        return self._file.size

    def append(self, event: dict[str, Any], *, sync: bool = False) -> tuple[int, str]:
        """Assign ``seq`` and ``prev``, write the event as one line; return (seq, digest)."""
        event["seq"] = self.seq + 1
        event["prev"] = self.head
        line = canonical_record(event)
        self._file.write(line + b"\n", sync=sync)
        self.seq += 1
        self.head = digest_bytes(line)
        return self.seq, self.head

    def sync(self) -> None:
        self._file.sync()

    def close(self) -> None:
        self._file.close()


@dataclass(frozen=True, slots=True)
class RawLine:
    number: int  # 1-based line number
    data: bytes  # without the newline


def iter_lines(path: Path) -> Iterator[RawLine]:
    """Every complete line of a log; a trailing torn line is not yielded."""
    with open(path, "rb") as handle:
        data = handle.read()
    end = data.rfind(b"\n") + 1
    number = 0
    start = 0
    while start < end:
        stop = data.index(b"\n", start)
        number += 1
        yield RawLine(number, data[start:stop])
        start = stop + 1


def read_events(path: Path, run_id: str | None = None) -> list[dict[str, Any]]:
    """Parse every complete line; a malformed line raises :class:`CorruptionError`."""
    events: list[dict[str, Any]] = []
    for raw in iter_lines(path):
        try:
            event = orjson.loads(raw.data)
        except orjson.JSONDecodeError as exc:
            raise CorruptionError(
                f"line {raw.number} of the log is not valid JSON ({exc})",
                path=path,
                run_id=run_id,
                line=raw.number,
            ) from exc
        if not isinstance(event, dict) or "type" not in event or "seq" not in event:
            raise CorruptionError(
                f"line {raw.number} of the log is not an event",
                path=path,
                run_id=run_id,
                line=raw.number,
            )
        events.append(event)
    return events
