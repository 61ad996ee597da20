"""A store you can query: runs, events, effects, usage, anchors and messages as SQL tables,
pandas (or polars) frames, and full-text search over recorded messages.

::

    from rar.store.query import events_frame, query, search

    query("SELECT kind, count(*) FROM effects GROUP BY kind").rows
    events_frame(table="usage")            # a pandas DataFrame (pip install 'rar[query]')
    search("activation energy", run="b32168f6")

The tables live in ``<store>/query.sqlite``, derived from the logs and manifests like the run
index: deleting it loses nothing, a damaged one is moved aside and built again, and a store that
must not be written (``Store(read_only=True)``, a read-only mount) gets a private copy in a
temporary directory. Before each query it is brought up to date: a run whose files did not
change costs two ``lstat`` calls; a log that grew is read from where indexing stopped, each new
line checked against the hash chain (a line that fails is never indexed; the run's ``problem``
says so). See :mod:`rar.store._query_db`.

User SQL is read-only: it runs on a connection opened ``mode=ro`` with ``query_only`` set and an
authorizer that allows reading and nothing else (no writes, no ``ATTACH``, no ``PRAGMA`` that
changes anything, no extension loading), so a query can neither change the database nor read a
host file through it. Recorded text was redacted when it was recorded; it is shown as it is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from rar.errors import UserError
from rar.store._query_db import QUERY_NAME, Progress, QueryDatabase
from rar.store._query_schema import TABLES, columns
from rar.store.store import Store

__all__ = [
    "QUERY_NAME",
    "TABLES",
    "QueryError",
    "QueryResult",
    "SearchHit",
    "events_frame",
    "open_query_database",
    "query",
    "run_sql",
    "search",
]

HIGHLIGHT: Final = ("\ue000", "\ue001")
"""Marks around a match in a snippet as SQLite returns it (private-use characters)."""
_READ_PRAGMAS: Final = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "collation_list",
        "function_list",
        "pragma_list",
        "module_list",
    }
)
"""PRAGMAs that only read, whatever their argument (a table's name)."""
_READ_SETTINGS: Final = frozenset(
    {
        "data_version",
        "schema_version",
        "user_version",
        "page_count",
        "page_size",
        "freelist_count",
        "encoding",
        "compile_options",
        "journal_mode",
        "query_only",
    }
)
"""PRAGMAs that read a setting when given no value (FTS5 reads data_version itself)."""
_ALLOWED: Final = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
_ACTIONS: Final = {
    getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ").lower()
    for name in (
        "CREATE_INDEX",
        "CREATE_TABLE",
        "CREATE_TEMP_INDEX",
        "CREATE_TEMP_TABLE",
        "CREATE_TEMP_TRIGGER",
        "CREATE_TEMP_VIEW",
        "CREATE_TRIGGER",
        "CREATE_VIEW",
        "DELETE",
        "DROP_INDEX",
        "DROP_TABLE",
        "DROP_TEMP_INDEX",
        "DROP_TEMP_TABLE",
        "DROP_TEMP_TRIGGER",
        "DROP_TEMP_VIEW",
        "DROP_TRIGGER",
        "DROP_VIEW",
        "INSERT",
        "TRANSACTION",
        "UPDATE",
        "ATTACH",
        "DETACH",
        "ALTER_TABLE",
        "REINDEX",
        "ANALYZE",
        "CREATE_VTABLE",
        "DROP_VTABLE",
        "SAVEPOINT",
    )
}


class QueryError(UserError):
    """A query or search that cannot run as asked (bad SQL, a write, bad search syntax)."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass(frozen=True, slots=True)
class SearchHit:
    run_id: str
    seq: int
    span: str | None
    source: str
    role: str | None
    name: str | None
    snippet: str
    """The text around the match, each match between the two :data:`HIGHLIGHT` marks."""

    def plain(self) -> tuple[str, list[tuple[int, int]]]:
        """The snippet without marks, and the (start, end) of each match in it."""
        text, spans, start = "", [], 0
        for index, part in enumerate(self.snippet.split(HIGHLIGHT[0])):
            if index == 0:
                text += part
                continue
            match, _, after = part.partition(HIGHLIGHT[1])
            start = len(text)
            text += match
            spans.append((start, len(text)))
            text += after
        return text, spans

    def as_dict(self) -> dict[str, Any]:
        text, spans = self.plain()
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "span": self.span,
            "source": self.source,
            "role": self.role,
            "name": self.name,
            "snippet": text,
            "matches": [list(span) for span in spans],
        }


@contextmanager
def _using(store: Store | Path | str | None) -> Iterator[Store]:
    """``store``, or a Store opened on that path (closed afterwards)."""
    if isinstance(store, Store):
        yield store
        return
    opened = Store(store)
    try:
        yield opened
    finally:
        opened.close()


@contextmanager
def open_query_database(
    store: Store | Path | str | None = None,
    *,
    rebuild: bool = False,
    progress: Progress | None = None,
) -> Iterator[QueryDatabase]:
    """The store's query database, brought up to date with its runs (``rebuild``: from
    scratch)."""
    with _using(store) as opened:
        if not opened.exists:
            raise QueryError(
                f"there is no store at {opened.root} (record a run first, or --store DIR)"
            )
        database = QueryDatabase(opened)
        try:
            if rebuild:
                database.rebuild()
            database.update(progress)
            yield database
        finally:
            database.close()


def _reader(database: QueryDatabase) -> tuple[sqlite3.Connection, list[str]]:
    """A read-only connection for user SQL, and the list its authorizer notes refusals in."""
    conn = sqlite3.connect(
        f"{database.path.resolve().as_uri()}?mode=ro",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
    )
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.execute("PRAGMA query_only=ON")
    # connect the full-text table before the authorizer is set: its constructor's own
    # statements are not the user's (the connection keeps it connected)
    conn.execute("SELECT rowid FROM messages_fts LIMIT 0").fetchall()
    refused: list[str] = []

    def authorize(action: int, first: str | None, second: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_FUNCTION and second == "load_extension":
            refused.append("load_extension()")
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (
            first in _READ_PRAGMAS or (first in _READ_SETTINGS and second is None)
        ):
            return sqlite3.SQLITE_OK
        what = _ACTIONS.get(action, f"action {action}")
        if action == sqlite3.SQLITE_PRAGMA:
            what = f"PRAGMA {first}" + ("" if second is None else f" = {second}")
        elif first:
            what += f" {first}"
        refused.append(what)
        return sqlite3.SQLITE_DENY

    conn.set_authorizer(authorize)
    return conn, refused


def run_sql(database: QueryDatabase, sql: str, params: Sequence[Any] = ()) -> QueryResult:
    """One read-only statement over an open query database (see :func:`open_query_database`)."""
    conn, refused = _reader(database)
    try:
        try:
            cursor = conn.execute(sql, params)
            rows = cursor.fetchall()
        except sqlite3.Warning as exc:  # "You can only execute one statement at a time."
            raise QueryError(f"the query is not one SQL statement ({exc})") from exc
        except sqlite3.ProgrammingError as exc:
            raise QueryError(f"the query cannot run: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            if refused:
                # name what the statement does (DROP TABLE deletes from sqlite_master first)
                what = next((r for r in refused if "sqlite_master" not in r), None)
                if what is None:
                    what = f"{(sql.split() or ['it'])[0].upper()} (a change to the schema)"
                raise QueryError(
                    f"rar query only reads: {what} is refused (the query database is "
                    "derived from the runs' logs; nothing is changed through it)"
                ) from exc
            raise QueryError(f"the query is not valid here: {exc}") from exc
        names = tuple(d[0] for d in cursor.description or ())
        return QueryResult(names, rows)
    finally:
        conn.close()


def query(
    sql: str,
    store: Store | Path | str | None = None,
    *,
    params: Sequence[Any] = (),
    rebuild: bool = False,
) -> QueryResult:
    """Run one read-only SQL statement over the store's tables (see :data:`TABLES`)."""
    with open_query_database(store, rebuild=rebuild) as database:
        return run_sql(database, sql, params)


def match_expression(text: str, *, raw: bool = False) -> str:
    """An FTS5 query for ``text``: every word must occur (each quoted, so that no word is read
    as FTS5 syntax); ``raw``: ``text`` is FTS5 syntax as it is."""
    if raw:
        return text
    words = [w for w in text.split() if w.strip('"')]
    if not words:
        raise QueryError("nothing to search for: give one or more words")
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def search(
    text: str,
    store: Store | Path | str | None = None,
    *,
    run: str | None = None,
    limit: int = 20,
    raw: bool = False,
) -> list[SearchHit]:
    """Recorded messages matching ``text``, best first (BM25). ``run``: only that run (an id or
    unique prefix); ``raw``: ``text`` is FTS5 syntax (``energy NEAR/3 activation``, ``arrh*``)."""
    expression = match_expression(text, raw=raw)
    with _using(store) as opened:
        run_id = opened.resolve(run) if run is not None else None
        where = " AND m.run_id = ?" if run_id is not None else ""
        sql = (
            "SELECT m.run_id, m.seq, m.span, m.source, m.role, m.name, "
            f"snippet(messages_fts, 0, '{HIGHLIGHT[0]}', '{HIGHLIGHT[1]}', '…', 16) "
            "FROM messages_fts JOIN messages AS m ON m.id = messages_fts.rowid "
            f"WHERE messages_fts MATCH ?{where} ORDER BY rank, m.run_id, m.seq LIMIT ?"
        )
        params: list[Any] = [expression, *([run_id] if run_id else []), limit]
        with open_query_database(opened) as database:
            try:
                result = run_sql(database, sql, params)
            except QueryError as exc:  # the statement is ours: what failed is the search text
                detail = exc.message.split(": ", 1)[-1]
                advice = "; leave out --fts to search for the words as they are" if raw else ""
                raise QueryError(
                    f"the search {text!r} is not valid FTS5 syntax ({detail}){advice}"
                ) from exc
    return [SearchHit(*row) for row in result.rows]


def tables() -> dict[str, tuple[str, dict[str, str]]]:
    """Every table users can query: (what a row is, column → meaning)."""
    return TABLES


def events_frame(
    store: Store | Path | str | None = None,
    *,
    run: str | None = None,
    table: str = "events",
    backend: str = "pandas",
) -> Any:
    """A table of the store (``events``, ``runs``, ``effects``, ``usage``, ``anchors``,
    ``messages``) as a pandas DataFrame (``backend="polars"``: a polars one), optionally of one
    run (an id or unique prefix). Needs pandas: ``pip install 'rar[query]'``."""
    if table not in TABLES:
        raise QueryError(f"no table {table!r}; the tables are {', '.join(TABLES)}")
    if backend not in ("pandas", "polars"):
        raise QueryError(f"backend must be pandas or polars, not {backend!r}")
    frames = _frame_module(backend)
    order = "run_id, seq" if "seq" in columns(table) else "created_at, run_id"
    with _using(store) as opened:
        run_id = opened.resolve(run) if run is not None else None
        where = " WHERE run_id = ?" if run_id is not None else ""
        sql = f"SELECT * FROM {table}{where} ORDER BY {order}"
        result = query(sql, opened, params=[run_id] if run_id else [])
    if backend == "polars":
        return frames.DataFrame(result.rows, schema=list(result.columns), orient="row")
    return frames.DataFrame.from_records(result.rows, columns=list(result.columns))


def _frame_module(backend: str) -> Any:
    import importlib

    try:
        return importlib.import_module(backend)
    except ImportError as exc:
        extra = "pip install 'rar[query]'" if backend == "pandas" else "pip install polars"
        raise QueryError(
            f"frames with {backend} need {backend}, which is not installed: {extra}"
        ) from exc
