"""``rar query``: read-only SQL over the store's tables; ``rar search``: full-text search over
the messages recorded in it (see docs/scale.md, "Querying a store")."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

import click

from rar.cli.options import COUNT

_STORE_OPTION = click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the run store (default: the one given to rar).",
)
_READ_ONLY_OPTION = click.option(
    "--read-only",
    is_flag=True,
    help="Write nothing in the store (the query database is a private temporary copy).",
)


def _store(ctx: click.Context, store_path: Path | None, *, read_only: bool) -> Any:
    from rar.store.store import Store

    return Store(store_path or ctx.find_root().obj, read_only=read_only)


def _progress(done: int, total: int) -> None:
    """Indexing many runs (the first query on a big store) shows how far it got."""
    if total >= 50 and sys.stderr.isatty():
        end = "\n" if done == total else ""
        click.echo(f"\rindexing runs for queries: {done}/{total}", err=True, nl=False)
        click.echo(end, err=True, nl=False)


@click.command("query")
@click.argument("sql", required=False)
@click.option(
    "--format",
    "output",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="table for people; json (an array of objects) or csv (a header row) for scripts.",
)
@click.option("--tables", "list_tables", is_flag=True, help="List the tables and their columns.")
@click.option("--rebuild", is_flag=True, help="Build the query database again from the runs.")
@_READ_ONLY_OPTION
@_STORE_OPTION
@click.pass_context
def query_command(
    ctx: click.Context,
    sql: str | None,
    output: str,
    list_tables: bool,
    rebuild: bool,
    read_only: bool,
    store_path: Path | None,
) -> None:
    """SQL over the store: runs, events, effects, anchors and usage as tables.

    Runs one read-only SQLite statement over the tables runs, events, effects, usage, anchors
    and messages (rar query --tables lists their columns); SQL "-" reads it from standard
    input. The query database is brought up to date with the runs first.

    \b
    rar query "SELECT kind, count(*) FROM effects GROUP BY kind"
    rar query "SELECT model, sum(total_tokens) FROM usage GROUP BY model" --format csv
    rar query --tables
    """
    from rar.store.query import TABLES, QueryError, QueryResult, open_query_database, run_sql

    if list_tables:
        rows = [
            (table, column, meaning)
            for table, (_, columns) in TABLES.items()
            for column, meaning in columns.items()
        ]
        _print(QueryResult(("table", "column", "meaning"), rows), output)
        return
    if sql is None:
        raise QueryError('give a SQL statement, e.g. rar query "SELECT * FROM runs", or --tables')
    if sql == "-":
        sql = sys.stdin.read()
    store = _store(ctx, store_path, read_only=read_only)
    with open_query_database(store, rebuild=rebuild, progress=_progress) as database:
        result = run_sql(database, sql)
    _print(result, output)


def _plain(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def _print(result: Any, output: str) -> None:
    from rar.cli.render import emit_json

    if output == "json":
        emit_json([{k: _plain(v) for k, v in row.items()} for row in result.as_dicts()])
        return
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows([[_plain(v) for v in row] for row in result.rows])
        return
    from rich.table import Table
    from rich.text import Text

    from rar.cli.render import _console

    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in result.columns:
        table.add_column(name, overflow="fold")
    for row in result.rows:
        table.add_row(
            *(Text("null", style="dim") if v is None else Text(str(_plain(v))) for v in row)
        )
    console = _console()
    console.print(table)
    console.print(Text(f"{len(result.rows)} row(s)", style="dim"))


@click.command("search")
@click.argument("words", nargs=-1, required=True)
@click.option("--run", "run_ref", metavar="RUN", help="Search this run only (an id or prefix).")
@click.option("--limit", type=COUNT, default=20, show_default=True, help="Show at most N hits.")
@click.option(
    "--fts", "raw", is_flag=True, help='WORDS are FTS5 syntax (NEAR, OR, NOT, prefix*, "a phrase").'
)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as a JSON array.")
@_READ_ONLY_OPTION
@_STORE_OPTION
@click.pass_context
def search_command(
    ctx: click.Context,
    words: tuple[str, ...],
    run_ref: str | None,
    limit: int,
    raw: bool,
    as_json: bool,
    read_only: bool,
    store_path: Path | None,
) -> None:
    """Full-text search over the messages recorded in the store.

    Finds the recorded messages (model conversations and answers, tool results, messages
    between agents) holding every one of WORDS, best match first."""
    from rar.store.query import search

    store = _store(ctx, store_path, read_only=read_only)
    hits = search(" ".join(words), store, run=run_ref, limit=limit, raw=raw)
    if as_json:
        from rar.cli.render import emit_json

        emit_json([hit.as_dict() for hit in hits])
        return
    from rich.text import Text

    from rar.cli.render import _console

    console = _console()
    if not hits:
        console.print("no recorded message matches")
        return
    for hit in hits:
        who = hit.role or "-"
        if hit.name:
            who += f" {hit.name}"
        console.print(
            Text(f"{hit.run_id}  seq {hit.seq}  {hit.span}  {hit.source} {who}", style="bold")
        )
        text, spans = hit.plain()
        snippet = Text("  " + text.replace("\n", " "))
        for start, end in spans:
            snippet.stylize("bold yellow", start + 2, end + 2)
        console.print(snippet)
