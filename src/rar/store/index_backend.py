"""What a store's index offers, whichever database holds it, and the checks against the packs
that every index applies to what it says.

Two indexes implement :class:`IndexBackend`: :class:`rar.store.index.Index` (``index.sqlite`` in
the store) and :class:`rar.store.index_pg.PgIndex` (tables on a PostgreSQL server). Both are
derived data: a failing index never fails its caller, it answers "not indexed" and the caller
reads the runs' files and packs instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rar.store._locations import HeaderCheck, PackScanner, location_of
from rar.store._sqlite import IndexLies, row_crc
from rar.store.blobs import BlobLocation, PackReader, PackRecord

if TYPE_CHECKING:
    from rar.store.index import RunRow

CacheRow = tuple[str, str, str, str, str, str, int, str]
"""key, provider, model, request JSON, result JSON, run_id, seq, created_at."""
CacheHit = tuple[str, str, int, BlobLocation | None]
"""result JSON, run_id, seq, and where the result's blob is when the index knows it."""


class IndexBackend(Protocol):
    """The derived index of a store: runs, blob locations, the model response cache, metadata.

    Reads return empty answers (None, ``{}``, ``[]``) when the index cannot be used, and writes
    are skipped; ``notes`` says why and ``faulted`` turns true. ``discard`` is called when what
    the index said proved false: it starts again from the files.
    """

    @property
    def location(self) -> str:
        """``store`` for the store's own index (in its directory or on its server), else the
        kind of stand-in (``temporary``, ``memory``, ``read-only``)."""
        ...

    @property
    def notes(self) -> list[str]: ...

    @property
    def faulted(self) -> bool: ...

    def lookup_blob(self, digest: str) -> BlobLocation | None: ...

    def existing_blobs(self, digests: list[str]) -> set[str]: ...

    def all_blob_locations(self) -> dict[str, BlobLocation]: ...

    def add_blobs(self, pack: str, records: Iterable[PackRecord], indexed_to: int) -> None: ...

    def catch_up(self, reader: PackReader) -> int: ...

    def cache_get(self, key: str) -> tuple[str, str, int] | None: ...

    def cache_lookup(self, key: str) -> CacheHit | None:
        """The cached response for ``key`` with its result blob's location, in one look-up
        (rows queued by ``cache_add`` first)."""
        ...

    def cache_put(self, rows: Iterable[CacheRow]) -> None:
        """Write ``rows`` now (with the queued ones)."""
        ...

    def cache_add(self, rows: Iterable[CacheRow]) -> None:
        """Queue ``rows``: written with the index's next write, every ``CACHE_BATCH`` rows, at
        close and at exit; found by ``cache_get``/``cache_lookup`` meanwhile."""
        ...

    def cache_flush(self) -> None:
        """Write the queued rows now."""
        ...

    def cache_candidates(self, provider: str, model: str, limit: int) -> list[tuple[str, str]]: ...

    def cache_recent(self, limit: int) -> list[tuple[str, str, str, str]]: ...

    def meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def run_rows(self) -> dict[str, RunRow]: ...

    def upsert_runs(self, rows: Iterable[RunRow]) -> None: ...

    def delete_runs(self, run_ids: Iterable[str]) -> None: ...

    def discard(self, reason: str) -> None: ...

    def close(self) -> None: ...


# --- what every index checks against the packs ---------------------------------------------------


def sound_existing(
    reader: PackReader | None, found: dict[str, BlobLocation | None]
) -> tuple[set[str], bool]:
    """Which of the indexed blobs ``found`` (digest → location, None for a malformed row) a
    writer may skip writing, and whether a location lied (the index must then be discarded).

    Each location is checked against its record header in the pack; one that could not be
    checked (an I/O error) is written again: a copy costs little.
    """
    if reader is None or not found:
        return set(found), False
    with HeaderCheck(reader) as holds:
        checked = {d: holds(d, at) if at is not None else False for d, at in found.items()}
    return {d for d, sound in checked.items() if sound}, False in checked.values()


def checked_locations(
    index: IndexBackend, reader: PackReader | None, claimed: dict[str, BlobLocation | None] | None
) -> dict[str, BlobLocation]:
    """Every blob location ``claimed`` by ``index`` (None: it could not be read), each checked
    against its record header in the pack.

    Locations the packs contradict make the index start again (discarded, then caught up with
    the packs) and the answer come from scanning the packs; a location whose record is itself
    damaged in the pack is kept, so reading it reports the damage. Without a readable index the
    packs are scanned.
    """
    if reader is None:
        return {d: at for d, at in (claimed or {}).items() if at is not None}
    if claimed is None:
        return PackScanner(reader).locations()
    with HeaderCheck(reader) as holds:
        suspect = {d: at for d, at in claimed.items() if at is None or holds(d, at) is False}
    if not suspect:
        return {d: at for d, at in claimed.items() if at is not None}
    scanner = PackScanner(reader)
    kept = {  # the record there is damaged, or the pack cannot be read: reading reports it
        d: at
        for d, at in suspect.items()
        if at is not None and scanner.verdict(d, at) in ("damaged", "unknown")
    }
    if len(kept) == len(suspect):
        return {d: at for d, at in claimed.items() if at is not None}
    index.discard(f"{len(suspect) - len(kept)} blob location(s) contradict the packs")
    index.catch_up(reader)
    return {**scanner.locations(), **kept}


def checked_cache_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Cache rows read with their ``crc`` last, without it; IndexLies for a row that does not
    match its check (a damaged cached answer is never served)."""
    checked: list[tuple[Any, ...]] = []
    for row in rows:
        if row[-1] != row_crc(row[:-1]):
            raise IndexLies(f"the cache row {row[0]!r} does not match its check")
        checked.append(tuple(row[:-1]))
    return checked


def checked_hit(key: str, row: Sequence[Any] | None) -> CacheHit | None:
    """The cached response a look-up read: the row's columns (``CacheRow``), its ``crc``, then
    the joined blob location's (digest, pack, offset, codec, raw and stored size; all None when
    the blob is not indexed). IndexLies when the row does not match its check; the location
    only when it is that of the row's result blob (the reference's JSON starts with its digest).
    """
    if row is None:
        return None
    data = tuple(row[:8])
    if row[8] != row_crc(data):
        raise IndexLies(f"the cache row {key!r} does not match its check")
    result, digest = data[4], row[9]
    location = None
    if digest is not None and result.startswith(f'{{"digest":"{digest}"'):
        location = location_of(tuple(row[10:15]))
    return (result, data[5], data[6], location)


def scan_new_records(
    reader: PackReader,
    known: dict[str, int],
    add: Callable[[str, list[PackRecord], int], None],
) -> int:
    """Index (``add(pack, records, end)``) the records appended to packs since the offsets in
    ``known`` (pack → indexed up to); returns how many were added."""
    added = 0
    # a reader of packs kept at a blob URL knows their sizes without a local copy
    remote_size: Callable[[str], int] | None = getattr(reader, "pack_size", None)
    for name in reader.iter_pack_names():
        start = known.get(name, 0)
        try:
            size = remote_size(name) if remote_size else reader.pack_path(name).stat().st_size
        except FileNotFoundError:
            continue
        if size <= start:
            continue
        scan = reader.scan(name, start)
        if scan.records or scan.end > start:
            add(name, scan.records, scan.end)
            added += len(scan.records)
    return added
