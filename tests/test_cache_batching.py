"""Cache rows are queued and written in batches: found meanwhile, never lost at a normal end.

A model call through the client adds one row to the response cache. Rows wait in a queue of the
store's index and are written together (one transaction): with the index's next write (a run
that finishes indexes its blobs and its row), every ``CACHE_BATCH`` rows, when the index is
closed, and at interpreter exit. The WAL is checkpointed after a batch.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from rar.llm import Message, Request, Response, ScriptedModel
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store._cache_queue import CACHE_BATCH
from rar.store.store import Store

SRC = Path(__file__).resolve().parents[1] / "src"


class Counting:
    """A scripted provider that counts the calls that reached it."""

    name = "scripted"
    base_url = None

    def __init__(self, model: str = "scripted") -> None:
        self.model = model
        self.calls = 0
        self._inner = ScriptedModel(
            lambda request: f"answer to {request.messages[-1].content}", model=model
        )

    def complete(self, request: Request) -> Response:
        self.calls += 1
        return self._inner.complete(request)


def _rows_on_disk(root: Path) -> int:
    """Cache rows committed to the store's index, as another process sees them."""
    with contextlib.closing(sqlite3.connect(root / "index.sqlite")) as conn:
        return int(conn.execute("SELECT count(*) FROM llm_cache").fetchone()[0])


def _rows_in_main_file(root: Path) -> int:
    """Cache rows in ``index.sqlite`` itself, the WAL ignored (``immutable=1``): what a
    checkpoint has copied back."""
    uri = f"{(root / 'index.sqlite').resolve().as_uri()}?immutable=1"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        return int(conn.execute("SELECT count(*) FROM llm_cache").fetchone()[0])


def _run_python(script: str) -> None:
    """Run ``script`` in a fresh interpreter that ends normally."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _row(n: int) -> tuple[str, str, str, str, str, str, int, str]:
    key = f"sha256:{n:064x}"
    return (key, "scripted", "m", f'{{"digest":"{key}","size":1}}', '{"value":1}', "r", n, "t")


def test_a_row_queued_in_this_process_is_a_hit_before_it_is_written(store: Store) -> None:
    provider = Counting()
    with record("twice", store=store, redactor=Redactor(env={})) as run:
        client = Client(provider, run=run, profiles=Profiles())
        first = client.complete(messages=[Message.user("q")])
        assert _rows_on_disk(store.root) == 0  # queued, not yet written
        other = Client(provider, run=run, profiles=Profiles())  # another client, same store
        second = other.complete(messages=[Message.user("q")])
    assert provider.calls == 1
    assert second.content == first.content == "answer to q"
    assert other.stats.cached_calls == 1


def test_a_finished_run_has_written_its_cache_rows(store: Store) -> None:
    provider = Counting()
    with record("three questions", store=store, redactor=Redactor(env={})) as run:
        client = Client(provider, run=run, profiles=Profiles())
        for question in ("a", "b", "c"):
            client.complete(messages=[Message.user(question)])
    assert _rows_on_disk(store.root) == 3  # the store is still open
    again = Store(store.root)  # another process's view
    try:
        with record("again", store=again, redactor=Redactor(env={})) as run:
            client = Client(provider, run=run, profiles=Profiles())
            for question in ("a", "b", "c"):
                client.complete(messages=[Message.user(question)])
    finally:
        again.close()
    assert provider.calls == 3


def test_queued_rows_are_written_when_the_index_closes(store: Store) -> None:
    store.index.cache_add([_row(1), _row(2)])
    assert _rows_on_disk(store.root) == 0
    assert store.index.cache_get(_row(1)[0]) == ('{"value":1}', "r", 1)
    store.close()
    assert _rows_on_disk(store.root) == 2
    assert _rows_in_main_file(store.root) == 2  # closing checkpoints the WAL into the file
    wal = store.root / "index.sqlite-wal"
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_batch_is_written_at_once_and_the_wal_checkpointed(store: Store) -> None:
    store.index.cache_add([_row(n) for n in range(CACHE_BATCH - 1)])
    assert _rows_on_disk(store.root) == 0
    store.index.cache_add([_row(CACHE_BATCH)])
    assert _rows_on_disk(store.root) == CACHE_BATCH
    assert _rows_in_main_file(store.root) == CACHE_BATCH  # checkpointed, not only in the WAL


def test_any_index_write_takes_the_queued_rows_with_it(store: Store) -> None:
    store.index.cache_add([_row(7)])
    store.index.set_meta("something", "else")
    assert _rows_on_disk(store.root) == 1


def test_a_process_that_exits_normally_leaves_its_queued_rows(store: Store) -> None:
    root = store.root
    store.close()
    script = textwrap.dedent(
        f"""
        from rar.store.store import Store
        store = Store({str(root)!r})
        key = "sha256:" + "ab" * 32
        store.index.cache_add([(key, "scripted", "m", "{{}}", '{{"value":1}}', "r", 1, "t")])
        # no close, no finish: the interpreter's exit writes the row
        """
    )
    _run_python(script)
    assert _rows_on_disk(root) == 1


def test_a_client_in_a_process_that_exits_without_finishing_leaves_its_row(
    store_path: Path,
) -> None:
    script = textwrap.dedent(
        f"""
        from rar.llm import Message, ScriptedModel
        from rar.llm.client import Client
        from rar.llm.profiles import Profiles
        from rar.redaction import Redactor
        from rar.runtime.start import record
        from rar.store.store import Store
        store = Store({str(store_path)!r}, create=True)
        run = record("left open", store=store, redactor=Redactor(env={{}}))
        client = Client(ScriptedModel(lambda r: "kept"), run=run, profiles=Profiles())
        client.complete(messages=[Message.user("q")])
        # neither the run nor the store is closed: the row is written at exit
        """
    )
    _run_python(script)
    assert _rows_on_disk(store_path) == 1
    provider = Counting()
    reader = Store(store_path)
    try:
        with record("again", store=reader, redactor=Redactor(env={})) as run:
            answer = Client(provider, run=run, profiles=Profiles()).complete(
                messages=[Message.user("q")]
            )
    finally:
        reader.close()
    assert answer.content == "kept" and provider.calls == 0
