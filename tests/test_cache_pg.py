"""The response cache with the store's index on PostgreSQL: queued rows, one-query hits.

The same rules as ``index.sqlite`` (tests/test_cache_batching.py, tests/test_cache_hits.py): a
row queued in this process is a hit before it is written, a finishing run and a closing index
write the queue, a hit reads its row and its answer's location in one query, and a damaged row
is never served. Every test gets a fresh database on a private server (tests/pg_helpers.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from rar.llm import Message, ScriptedModel
from rar.llm.cache import ResponseCache
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store._cache_queue import CACHE_BATCH
from rar.store.index_pg import PgIndex
from rar.store.store import Store

pytest_plugins = ["pg_helpers"]  # the pg_server and pg_url fixtures

ANSWER = "an answer long enough to be a blob of its own. " * 30


def _count(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM rar_llm_cache").fetchone()
    assert row is not None
    return int(row[0])


def _row(n: int) -> tuple[str, str, str, str, str, str, int, str]:
    key = f"sha256:{n:064x}"
    return (key, "scripted", "m", f'{{"digest":"{key}","size":1}}', '{"value":1}', "r", n, "t")


@pytest.fixture
def pg_store(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("RAR_INDEX_URL", pg_url)
    store = Store(tmp_path / "runs", create=True)
    assert isinstance(store.index, PgIndex)
    yield store
    store.close()


def test_queued_rows_are_hits_at_once_and_written_when_the_run_finishes(
    pg_store: Store, pg_url: str
) -> None:
    calls: list[str] = []
    provider = ScriptedModel(lambda request: calls.append("") or ANSWER)
    with record("twice", store=pg_store, redactor=Redactor(env={})) as run:
        client = Client(provider, run=run, profiles=Profiles())
        client.complete(messages=[Message.user("q")])
        assert _count(pg_url) == 0  # queued
        assert client.complete(messages=[Message.user("q")]).content == ANSWER
    assert len(calls) == 1
    assert _count(pg_url) == 1  # the finished run wrote it


def test_a_batch_and_a_closing_index_write_the_queue(pg_store: Store, pg_url: str) -> None:
    pg_store.index.cache_add([_row(n) for n in range(CACHE_BATCH)])
    assert _count(pg_url) == CACHE_BATCH
    pg_store.index.cache_add([_row(CACHE_BATCH + 1)])
    assert _count(pg_url) == CACHE_BATCH
    assert pg_store.index.cache_get(_row(CACHE_BATCH + 1)[0]) == ('{"value":1}', "r", 65)
    pg_store.index.close()
    assert _count(pg_url) == CACHE_BATCH + 1


def test_a_hit_reads_the_row_and_its_answers_location_in_one_query(
    pg_store: Store, pg_url: str
) -> None:
    provider = ScriptedModel(lambda request: ANSWER)
    with record("ask", store=pg_store, redactor=Redactor(env={})) as run:
        client = Client(provider, run=run, profiles=Profiles())
        client.complete(messages=[Message.user("q")])
    reader = Store(pg_store.root)
    try:
        cache = ResponseCache(reader, redactor=Redactor(env={}))
        key = cache.key(client.targets[0].payload(client.request(messages=[Message.user("q")])))
        hit = reader.index.cache_lookup(key)
        assert hit is not None and hit[3] is not None  # the answer's location, joined
        result = cache.get(key)
        assert result is not None and result["response"]["content"] == ANSWER
    finally:
        reader.close()


def test_a_damaged_cache_row_is_never_served_from_the_server(pg_store: Store, pg_url: str) -> None:
    calls: list[str] = []
    provider = ScriptedModel(lambda request: calls.append("") or ANSWER)
    with record("ask", store=pg_store, redactor=Redactor(env={})) as run:
        Client(provider, run=run, profiles=Profiles()).complete(messages=[Message.user("q")])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE rar_llm_cache SET seq = seq + 1")
    reader = Store(pg_store.root)
    try:
        with record("again", store=reader, redactor=Redactor(env={})) as run:
            Client(provider, run=run, profiles=Profiles()).complete(messages=[Message.user("q")])
        notes = reader.notes
    finally:
        reader.close()
    assert len(calls) == 2
    assert any("does not match its check" in note for note in notes)


def test_writing_rows_now_takes_the_queued_ones_along(pg_store: Store, pg_url: str) -> None:
    pg_store.index.cache_add([_row(1), _row(2)])
    pg_store.index.cache_put([_row(2), _row(3)])
    assert _count(pg_url) == 3
    pg_store.index.cache_flush()
    assert _count(pg_url) == 3
