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
* a writer opening a log repairs its end, and nothing else does (readers and ``rar verify`` only
  report it). A last line that is a complete event continuing the chain and lacks only its newline
  may have been acknowledged: it is completed with the newline. Anything else after the last
  newline is a torn write, never acknowledged: it is *moved* (copied to
  ``<run>/lost+found/events.jsonl.<n>.torn``, made durable, then cut from the log), never
  deleted. A malformed *complete* line is corruption and is reported, never skipped.

Readers see a complete last line that lacks its newline as a line (``RawLine.terminated`` is
false); the torn bytes of an unfinished write are not a line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from rar.errors import AppendError, CorruptionError
from rar.hashing import canonical_record, digest_bytes, from_canonical
from rar.store._fs import AppendOnlyFile, WhileSyncing, fsync_dir

_TAIL_CHUNK = 1 << 16
CARRY_KEY: Final = "carry"
"""The key under which a line carries small blobs (see :mod:`rar.store._carried`)."""
LOST_FOUND: Final = "lost+found"
"""The directory of a run where a writer puts the bytes it cuts from the run's log."""


@dataclass(frozen=True, slots=True)
class LogTail:
    """Where a log ends: the last complete event and the bytes that follow it."""

    seq: int  # 0 when empty
    digest: str | None  # digest of the last complete line
    size: int  # bytes up to the end of the last complete line (its newline, when it has one)
    torn_bytes: int  # bytes after that: a torn write
    newline_missing: bool = False  # the last line is a complete event without its newline


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
    if last < 0:  # one line, without its newline: complete, or a torn first line
        if continues_chain(buffer, None):
            return LogTail(1, digest_bytes(buffer), size, 0, newline_missing=True)
        return LogTail(0, None, 0, size)
    previous = buffer.rfind(b"\n", 0, last)
    complete = start + last + 1
    line = buffer[previous + 1 : last]
    tail = _tail_from_line(path, line, complete, size - complete)
    after = buffer[last + 1 :]
    if after and continues_chain(after, line):
        return LogTail(tail.seq + 1, digest_bytes(after), size, 0, newline_missing=True)
    return tail


def _tail_from_line(path: Path, line: bytes, size: int, torn: int) -> LogTail:
    try:
        event = orjson.loads(line)
        seq = int(event["seq"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CorruptionError(
            f"the last complete line of the log is malformed ({exc})", path=path
        ) from exc
    return LogTail(seq, digest_bytes(line), size, torn)


def continues_chain(candidate: bytes, previous: bytes | None) -> bool:
    """Whether ``candidate`` (bytes without a newline) is a whole event following ``previous``.

    A canonical JSON object cut anywhere but after its closing brace does not parse, so a line
    that parses, has the next ``seq`` and names the previous line in ``prev`` lacks only its
    newline.
    """
    try:
        event = orjson.loads(candidate)
        before = 0 if previous is None else int(orjson.loads(previous)["seq"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return False
    return (
        isinstance(event, dict)
        and isinstance(event.get("type"), str)
        and event.get("seq") == before + 1
        and event.get("prev") == (None if previous is None else digest_bytes(previous))
    )


class EventLog:
    """Appends events to one run's log. One writer per log (the caller holds the run lock).

    Opening an existing log repairs its end (see the module docstring); ``repair`` then says what
    was done, for the note the run writer records, and ``repaired_bytes`` counts the bytes moved
    to ``lost_found`` (0 when a line was only completed).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        existed = path.exists()
        tail = read_tail(path)
        self.repaired_bytes = 0
        self.repair: str | None = None
        self.lost_found: Path | None = None
        self._file = AppendOnlyFile(path, what="log", size=tail.size + tail.torn_bytes)
        try:
            if tail.newline_missing:
                self._file.write(b"\n", sync=True)
                self.repair = f"completed the last line (seq {tail.seq}), which lacked its newline"
            elif tail.torn_bytes:
                self.lost_found = _move_aside(path, tail.size, tail.torn_bytes)
                self._file.truncate(tail.size)
                self.repaired_bytes = tail.torn_bytes
                self.repair = (
                    f"moved a torn last line ({tail.torn_bytes} bytes at offset {tail.size}, "
                    f"never acknowledged) to {LOST_FOUND}/{self.lost_found.name}"
                )
            if not existed:
                fsync_dir(path.parent)
        except (AppendError, OSError) as exc:
            self._file.close()
            if isinstance(exc, AppendError):
                raise
            raise AppendError(path, exc.strerror or str(exc)) from exc
        self.seq = tail.seq
        self.head = tail.digest
        self.last_line = b""  # the bytes of the line appended last (without its newline)

    @property
    def size(self) -> int:
        return self._file.size

    def append(
        self,
        event: dict[str, Any],
        *,
        sync: bool = False,
        while_syncing: WhileSyncing | None = None,
    ) -> tuple[int, str]:
        """Assign ``seq`` and ``prev``, write the event as one line; return (seq, digest).
        ``while_syncing``: see :meth:`AppendOnlyFile.write <rar.store._fs.AppendOnlyFile.write>`."""
        event["seq"] = self.seq + 1
        event["prev"] = self.head
        line = canonical_record(event)
        digest = digest_bytes(line)  # before the write: the code after an fsync runs cold
        self._file.write(line + b"\n", sync=sync, while_syncing=while_syncing)
        self.seq += 1
        self.head = digest
        self.last_line = line
        return self.seq, self.head

    def sync(self) -> None:
        self._file.sync()

    def close(self) -> None:
        self._file.close()


def _move_aside(path: Path, offset: int, length: int) -> Path:
    """Copy a log's torn tail into ``lost+found`` durably, before the caller cuts it.

    A crash after the copy and before the cut leaves the tail in both places; the next writer
    copies it again under the next free number. Bytes are never lost, only ever duplicated.
    """
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read(length)
    folder = path.parent / LOST_FOUND
    try:
        folder.mkdir(exist_ok=True)
        number = 1
        while True:
            target = folder / f"{path.name}.{number}.torn"
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                break
            except FileExistsError:
                number += 1
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(folder)
        fsync_dir(path.parent)
    except OSError as exc:
        raise AppendError(
            path, f"cannot move its torn last line aside: {exc.strerror or exc}", rolled_back=False
        ) from exc
    return target


@dataclass(frozen=True, slots=True)
class RawLine:
    number: int  # 1-based line number
    data: bytes  # without the newline
    terminated: bool = True  # False: a complete last event whose newline is missing


def iter_lines(path: Path) -> Iterator[RawLine]:
    """Every line of a log; a trailing torn line is not yielded (see :func:`lines_of`)."""
    with open(path, "rb") as handle:
        data = handle.read()
    yield from lines_of(data)


def lines_of(data: bytes) -> Iterator[RawLine]:
    """Every line of a log's bytes.

    Bytes after the last newline are yielded as a last line (``terminated=False``) only when they
    are a complete event continuing the chain; otherwise they are a torn write and not yielded.
    """
    end = data.rfind(b"\n") + 1
    number = 0
    start = 0
    last: bytes | None = None
    while start < end:
        stop = data.index(b"\n", start)
        number += 1
        last = data[start:stop]
        yield RawLine(number, last)
        start = stop + 1
    rest = data[end:]
    if rest and continues_chain(rest, last):
        yield RawLine(number + 1, rest, terminated=False)


def read_events(
    path: Path, run_id: str | None = None, carried: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Parse every complete line; a malformed line raises :class:`CorruptionError`.

    The blobs a line carries (``"carry"``, see :mod:`rar.store._carried`) are not part of the
    event returned; with ``carried`` they are added to it (digest → the blob as a string, not
    yet checked against its digest)."""
    events: list[dict[str, Any]] = []
    for raw in iter_lines(path):
        try:
            event = from_canonical(raw.data)
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
        carry = event.pop(CARRY_KEY, None)
        if carry is not None and carried is not None and type(carry) is dict:
            carried.update(carry)
        events.append(event)
    return events
