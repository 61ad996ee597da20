"""``rar show RUN --trace``: the run's trace entries (see :mod:`rar.export.trace`), as a table
or, with ``--json``, as JSON lines (one object per entry, every field always present)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from rar.export.trace import TraceEntry
    from rar.store.store import Store

HASH_WIDTH = 12


def _short(digest: str | None) -> str:
    if not digest:
        return ""
    return digest.partition(":")[2][:HASH_WIDTH] or digest[:HASH_WIDTH]


def _detail(entry: TraceEntry) -> str:
    if entry.performative is not None:
        text = f"{entry.performative} {entry.sender} → {', '.join(entry.receivers or ())}"
        if entry.protocol:
            text += f" · {entry.protocol}"
        if entry.message_id:
            text += f" · id {entry.message_id[:8]}"
        return text
    if entry.event_type == "llm_call":
        parts = [str(entry.model)]
        parts.append(f"thinking {entry.thinking_level or '–'}")
        parts.append(f"cache {_short(entry.cache_key)}")
        return " · ".join(parts)
    if entry.tool_name:
        return entry.tool_name
    return entry.model or ""


def print_trace(store: Store, run_id: str, *, as_json: bool) -> None:
    from rar.export.trace import trace_entries

    entries = trace_entries(store, run_id)
    if as_json:
        out = sys.stdout.buffer
        for entry in entries:
            out.write(orjson.dumps(entry.as_dict()) + b"\n")
        sys.stdout.flush()
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = max(console.width, 160)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name in ("step", "time", "event", "agent", "detail", "input", "output", "ms", "det"):
        table.add_column(
            name,
            no_wrap=name != "detail",
            overflow="fold",
            justify="right" if name in ("step", "ms") else "left",
        )
    for entry in entries:
        row: list[Any] = [
            str(entry.step_id),
            entry.timestamp[11:23],
            entry.event_type,
            Text(entry.agent_id or ""),
            Text(_detail(entry)),
            _short(entry.input_hash),
            _short(entry.output_hash),
            "" if entry.latency_ms is None else f"{entry.latency_ms:.1f}",
            Text("yes", style="green") if entry.deterministic else Text("no", style="yellow"),
        ]
        table.add_row(*row)
    console.print(f"[bold]trace[/] {run_id}  {len(entries)} entries")
    console.print(table)
    console.print(
        "[dim]det: the step gives the same output when done again "
        "(no: a live model call, the clock, a tool that reaches out); see docs/cli.md[/]"
    )
