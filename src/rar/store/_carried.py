"""Small blobs carried in the log line of the event that first needs them.

A durable effect used to cost two fsyncs: its new blobs in the pack, then its event in the log
(a blob must be durable before any event names it, and two files need two fsyncs; issuing them
together does not help on ext4, whose journal commits them one after the other). Now a writer
puts the new small text blobs of an event (messages, chain nodes, payloads, workspace files and
snapshot trees of up to ``CARRY_LIMIT`` bytes) *into that event's line*, under ``"carry"``::

    {"carry":{"sha256:9f…":"{\\"content\\":\\"hi\\",\\"role\\":\\"user\\"}"},"kind":"llm",…}

Each value is the blob's bytes (valid UTF-8: canonical JSON is, binary files are not carried) as
a JSON string, which gives back exactly those bytes. One file, one
fsync: the line and the blobs it names are durable together, and a later line that names a
carried blob lies in the same file after it, so it cannot be durable without it.

A carried blob's location is a pseudo-pack named ``log/<run_id>`` (codec ``CODEC_CARRIED``):
``offset`` is where the string literal starts in ``<run_id>/events.jsonl``, ``stored_size`` its
length, ``raw_size`` the blob's. Reading one decodes the literal and re-hashes the bytes, as for
a pack record. The index holds these locations like any other; scanning a log finds them again
(:func:`scan_log`), so the index stays derived.

A writer carries a blob only in its own run's log; larger or binary blobs stay in the shared
packs. Runs share blobs like any others: a later run names a blob carried by an earlier run's line
instead of storing it again when its writer knows the store holds it (a blob this process's
writers stored, or one of ``INDEX_QUESTION_MIN`` bytes or more the index holds; see
:mod:`rar.store.writer`). A smaller blob found nowhere else is stored again in the run's own line.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

import orjson

from rar.errors import CorruptionError
from rar.store.blobs import CODEC_CARRIED, BlobLocation, PackRecord, PackScan
from rar.store.layout import EVENTS_NAME
from rar.store.log import CARRY_KEY

LOG_PACK_PREFIX: Final = "log/"
CARRY_LIMIT: Final = 32 << 10
"""Blobs up to this many bytes may be carried; larger ones go to a pack (compressed)."""
LINE_CARRY_LIMIT: Final = 256 << 10
"""At most this many carried bytes in one line; the rest of an event's new blobs go to a pack."""
_CARRY_MARK: Final = b'"carry":{'


def log_pack(run_id: str) -> str:
    return LOG_PACK_PREFIX + run_id


def is_log_pack(name: str) -> bool:
    return name.startswith(LOG_PACK_PREFIX)


def log_path(root: Path, name: str) -> Path:
    return root / name[len(LOG_PACK_PREFIX) :] / EVENTS_NAME


def iter_log_packs(root: Path) -> list[str]:
    """The pseudo-pack of every run directory with a regular log file (links are not read)."""
    names: list[str] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return names
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            st = os.lstat(os.path.join(entry.path, EVENTS_NAME))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            names.append(log_pack(entry.name))
    return names


def locate(line: bytes, digest: str, literal: bytes) -> int:
    """Where ``literal`` (the carried string of ``digest``) starts in ``line``; -1 if absent."""
    key = b'"' + digest.encode() + b'":'
    at = line.find(key + literal)
    return at if at < 0 else at + len(key)


def carried_literal(line: bytes, digest: str, text: str) -> tuple[int, int] | None:
    """(offset, length) of the string literal carrying ``digest`` in ``line``, or None.

    The literal is what canonical JSON writes for ``text`` (orjson's escaping, which RFC 8785
    shares; the reference implementation's is tried too, for a line written by it)."""
    literal = orjson.dumps(text)
    pos = locate(line, digest, literal)
    if pos < 0:
        import rfc8785

        literal = rfc8785.dumps(text)
        pos = locate(line, digest, literal)
        if pos < 0:
            return None
    return pos, len(literal)


def decode(
    literal: bytes,
    digest: str,
    raw_size: int,
    path: Path | Callable[[], Path],
    *,
    verify: bool = True,
) -> bytes:
    """The blob a carried string literal holds, checked against its digest and size (``path``,
    or a function giving it, names the log in an error)."""
    try:
        text = orjson.loads(literal)
    except orjson.JSONDecodeError as exc:
        raise _damaged(f"carried blob {digest} is not a JSON string ({exc})", path) from None
    if type(text) is not str:
        raise _damaged(f"carried blob {digest} is not a JSON string", path)
    raw = text.encode("utf-8")
    if len(raw) != raw_size:
        raise _damaged(
            f"carried blob {digest} has {len(raw)} bytes, its location says {raw_size}", path
        )
    if verify and "sha256:" + hashlib.sha256(raw).hexdigest() != digest:
        raise _damaged(f"carried blob {digest} does not match its digest", path)
    return raw


def _damaged(message: str, path: Path | Callable[[], Path]) -> CorruptionError:
    return CorruptionError(message, path=path if isinstance(path, Path) else path())


def read(
    fd: int,
    digest: str,
    location: BlobLocation,
    path: Path | Callable[[], Path],
    *,
    verify: bool = True,
) -> bytes:
    literal = os.pread(fd, location.stored_size, location.offset)
    if len(literal) != location.stored_size:
        raise _damaged(f"carried blob {digest} is cut short", path)
    return decode(literal, digest, location.raw_size, path, verify=verify)


def scan_log(
    name: str, path: Path, start: int = 0, *, rehash: bool = False
) -> tuple[PackScan, list[tuple[PackRecord, str]]]:
    """The carried blobs of a log's complete lines from ``start`` (a line boundary).

    Lines that do not parse are skipped here: the log's own verification reports them, and a
    blob they carry is then not found (reported as missing where it is referred to).
    """
    with open(path, "rb") as handle:
        if start:
            handle.seek(start)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    # a last line without its newline counts when it parses (a torn write cannot: canonical
    # JSON cut short is never valid), as for every reader of the log; the scan still ends at
    # the last newline, so the line is looked at again once it has one
    last = len(data) if data[end:] and _parses(data[end:]) else end
    records: list[PackRecord] = []
    failures: list[tuple[PackRecord, str]] = []
    at = data.find(_CARRY_MARK, 0, last)
    while 0 <= at < last:
        line_start = data.rfind(b"\n", 0, at) + 1
        line_end = data.find(b"\n", at)
        if line_end < 0:
            line_end = last
        line = data[line_start:line_end]
        at = data.find(_CARRY_MARK, line_end, last)
        try:
            carry = orjson.loads(line).get(CARRY_KEY)
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if type(carry) is not dict:
            continue
        for digest, text in carry.items():
            if type(text) is not str:
                continue
            found = carried_literal(line, digest, text)
            if found is None:
                continue
            raw = text.encode("utf-8")
            location = BlobLocation(
                name, start + line_start + found[0], CODEC_CARRIED, len(raw), found[1]
            )
            record = PackRecord(digest, location)
            if rehash and "sha256:" + hashlib.sha256(raw).hexdigest() != digest:
                failures.append(
                    (
                        record,
                        f"carried blob at offset {location.offset} does not "
                        f"match its digest {digest}",
                    )
                )
            records.append(record)
    size = start + len(data)
    return PackScan(records, start + end, size, None), failures


def _parses(tail: bytes) -> bool:
    try:
        return type(orjson.loads(tail)) is dict
    except orjson.JSONDecodeError:
        return False
