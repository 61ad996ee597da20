"""Human and JSON output of the CLI commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
import orjson

if TYPE_CHECKING:
    from rar.store.index import RunRow
    from rar.store.store import Store
    from rar.store.verify import VerifyReport

# rich is imported when something is printed with it, not at start-up: `rar list` does without


def escape(markup: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(markup)


def Text(*args: Any, **kwargs: Any) -> Any:  # stands for rich.text.Text
    from rich.text import Text as RichText

    return RichText(*args, **kwargs)


def emit_json(value: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _console() -> Any:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = max(console.width, 120)
    return console


def _short(value: Any, width: int = 70) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _time(ts: str | None) -> str:
    return ts[11:23] if ts else ""


# --- list --------------------------------------------------------------------------------------


def row_json(store: Store, row: RunRow) -> dict[str, Any]:
    return {
        "run_id": row.run_id,
        "status": store.display_status(row),
        "goal": row.goal,
        "created_at": row.created_at,
        "finished_at": row.finished_at,
        "events": row.events,
        "parent": row.parent,
    }


def print_list(store: Store, rows: list[RunRow], *, limit: int | None, as_json: bool) -> None:
    shown = rows if limit is None else rows[:limit]
    if as_json:
        emit_json([row_json(store, row) for row in shown])
        return
    if not rows:
        click.echo(f"No runs in {store.root}. Record one with: rar demo")
        return
    # a plain table: `rar list` runs often and on large stores, so it does without rich
    colors = {"completed": "green", "failed": "red", "interrupted": "yellow", "running": "cyan"}
    header = ["run", "status", "created (UTC)", "events", "goal"]
    cells = [
        [
            row.run_id,
            store.display_status(row),
            row.created_at[:19].replace("T", " "),
            str(row.events),
            _short(row.goal or "", 60),
        ]
        for row in shown
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(header)]
    lines = [
        "  ".join(click.style(h.ljust(w), bold=True) for h, w in zip(header, widths, strict=True))
    ]
    for cell in cells:
        status = click.style(cell[1].ljust(widths[1]), fg=colors.get(cell[1]))
        lines.append(
            "  ".join(
                [
                    cell[0].ljust(widths[0]),
                    status,
                    cell[2].ljust(widths[2]),
                    cell[3].rjust(widths[3]),
                    cell[4],
                ]
            )
        )
    if len(shown) < len(rows):
        lines.append(f"… {len(rows) - len(shown)} older runs not shown (--all or --limit N)")
    click.echo("\n".join(lines))


# --- show --------------------------------------------------------------------------------------


_MISSING = object()
PayloadLoader = Callable[[Any], Any]


def inline_only(ref: Any) -> Any:
    """The value of a payload reference when it is held inline, else a marker."""
    if isinstance(ref, dict) and "value" in ref:
        return ref["value"]
    return _MISSING


def store_loader(store: Store, limit: int = 1 << 18) -> PayloadLoader:
    """Load payloads inline or from blobs (up to ``limit`` bytes) for display."""

    def load(ref: Any) -> Any:
        if not isinstance(ref, dict):
            return _MISSING
        if "value" in ref:
            return ref["value"]
        if int(ref.get("size", 0)) > limit:
            return _MISSING
        try:
            return store.get_json(ref["digest"])
        except Exception:  # display only: a broken blob shows as a reference
            return _MISSING

    return load


def _payload_text(ref: Any, load: PayloadLoader) -> str:
    value = load(ref)
    if value is not _MISSING:
        return _short(value, 60)
    if isinstance(ref, dict) and "digest" in ref:
        return f"<{ref['digest'][:15]}…, {ref.get('size')} bytes>"
    return ""


def _effect_summary(event: dict[str, Any], load: PayloadLoader) -> str:
    value = load(event.get("request"))
    kind = event.get("kind")
    head = f"{kind}"
    inner = value.get("request") if isinstance(value, dict) else None
    if kind == "llm" and isinstance(value, dict) and isinstance(inner, dict):
        head += f" {value.get('provider')}:{inner.get('model')}"
    elif isinstance(value, dict) and kind == "llm" and "model" in value:
        head += f" {value['model']}"
    elif isinstance(value, dict) and kind == "tool" and "name" in value:
        head += f" {value['name']}({_short(value.get('args', {}), 40)})"
    elif isinstance(value, dict) and "op" in value:
        head += f" {value['op']}"
    else:
        head += f" {_payload_text(event.get('request'), load)}"
    if "error" in event:
        return f"{head} ✗ {event['error']['type']}: {_short(event['error']['message'], 50)}"
    result = load(event.get("result"))
    tail = _payload_text(event.get("result"), load)
    if isinstance(result, dict):
        message = result.get("response") or result.get("message")
        if isinstance(message, dict):
            calls = message.get("tool_calls") or []
            tail = f"{len(calls)} tool call(s)" if calls else _short(message.get("content", ""), 50)
            if result.get("cached"):
                tail += " (cached)"
        elif kind == "tool" and "ok" in result:
            text = _short(result.get("content", ""), 50)
            tail = text if result["ok"] else f"✗ {text}"
    return f"{head} → {tail}"


def event_summary(event: dict[str, Any], load: PayloadLoader = inline_only) -> str:
    kind = event.get("type")
    if kind == "effect":
        return _effect_summary(event, load)
    if kind == "run.started":
        return _short(event.get("manifest", {}).get("goal") or "", 70)
    if kind == "run.finished":
        diff = event.get("state_diff") or {}
        changes = ", ".join(f"{len(v)} {k}" for k, v in diff.items() if v)
        return f"{event.get('status')}" + (f"; workspace: {changes}" if changes else "")
    if kind == "span.start":
        split = (event.get("attributes") or {}).get("split")
        name = str(event.get("name"))
        if isinstance(split, list) and len(split) == 2:
            return f"{name} (split {split[0]}/{split[1]})"
        return name
    if kind in ("flow.step", "flow.merge"):
        symbols = [str(s) for s in event.get("symbols") or []]
        text = ", ".join(symbols)
        if kind == "flow.step" and event.get("status") == "error":
            text += f" — {(event.get('error') or {}).get('message', 'failed')}"
        return _short(text, 90)
    if kind == "flow.end":
        graphs = event.get("graphs") or []
        failed = f", {event.get('errored')} failed" if event.get("errored") else ""
        first = graphs[0] if graphs else ""
        return _short(f"{event.get('contexts')} context(s){failed}: {first}", 90)
    if kind == "span.end":
        return f"{event.get('status')} in {event.get('duration_us', 0) / 1000:.1f} ms"
    if kind == "snapshot":
        return f"{event.get('phase')}: {event.get('files')} files, {event.get('bytes')} bytes"
    if kind == "artifact":
        return f"{event.get('name')} ({event.get('size')} bytes)"
    if kind in ("error", "note"):
        return _short(event.get("error", {}).get("message") or event.get("text", ""), 70)
    if kind == "message":
        return f"{event.get('performative')} {event.get('sender')} → {event.get('receivers')}"
    if kind == "replay":
        report = load(event.get("report"))
        if isinstance(report, dict):
            return (
                f"{report.get('replay_status')} replay of {report.get('source_run')}: "
                f"{report.get('served')} served, {report.get('live')} live"
            )
    return ""


def print_show(store: Store, run_id: str, *, as_json: bool) -> None:
    manifest = store.manifest(run_id)
    events = store.events(run_id)
    if as_json:
        emit_json({"manifest": manifest.model_dump(mode="json"), "events": events})
        return
    console = _console()
    status = manifest.status.value
    if status == "running" and not store.is_writing(run_id):
        status = "interrupted (writer gone; `rar verify` checks what was recorded)"
    console.print(f"[bold]run[/] {run_id}")
    console.print(f"  goal      {escape(manifest.goal or '-')}")
    console.print(f"  status    {status}")
    console.print(f"  created   {manifest.created_at}   finished {manifest.finished_at or '-'}")
    models = ", ".join(f"{m.get('provider')}:{m.get('model')}" for m in manifest.models) or "-"
    tools = ", ".join(f"{t.get('name')}@{t.get('version')}" for t in manifest.tools) or "-"
    console.print(f"  models    {escape(models)}")
    console.print(f"  tools     {escape(tools)}")
    console.print(
        f"  seed      {manifest.config.get('seed')}   events {len(events)}"
        f"   head {(manifest.head or '-')[:23]}"
    )
    if manifest.parent:
        console.print(f"  parent    {manifest.parent.run_id} at event {manifest.parent.seq}")
    console.print()
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    load = store_loader(store)
    for name in ("seq", "time", "event", "detail"):
        table.add_column(name, no_wrap=name != "detail", overflow="fold")
    for event in events:
        span = str(event.get("span", "run"))
        depth = span.count("/")
        label = "  " * depth + str(event.get("type"))
        if event.get("type") in ("effect",):
            label += f" [{span.rsplit('/', 1)[-1]}:{event.get('ordinal')}]"
        table.add_row(
            str(event.get("seq")),
            _time(event.get("ts")),
            Text(label),
            Text(event_summary(event, load)),
        )
    console.print(table)


# --- verify ------------------------------------------------------------------------------------


def print_verify(report: VerifyReport, *, as_json: bool) -> None:
    if as_json:
        emit_json(report.as_dict())
        return
    console = _console()
    for line in report.repaired:
        console.print(f"[yellow]repaired[/] {escape(line)}")
    for line in report.notes:
        console.print(f"[dim]note[/] {escape(line)}")
    for warning in report.warnings:
        where = warning.run_id or warning.path or "store"
        console.print(
            f"[yellow]warning[/] {escape(where)}: {warning.what} {escape(warning.detail)}"
        )
    counts = f"{report.runs} runs, {report.events} events, {report.blobs} blobs" + (
        f" in {report.packs} packs" if report.packs else ""
    )
    if report.ok:
        console.print(f"[green]ok[/] {counts}: every chain, blob and manifest is intact")
        return
    console.print(f"[red]{len(report.problems)} problem(s)[/] in {counts}:")
    for problem in report.problems:
        where = problem.run_id or problem.path or "store"
        seq = f" seq {problem.seq}" if problem.seq is not None else ""
        console.print(f"  {escape(where)}{seq}: [bold]{problem.what}[/] {escape(problem.detail)}")
        if problem.expected is not None or problem.actual is not None:
            console.print(
                Text(f"      expected {problem.expected}\n      actual   {problem.actual}")
            )


# --- demo --------------------------------------------------------------------------------------


def print_demo(store: Store, run_id: str, *, as_json: bool) -> None:
    manifest = store.manifest(run_id)
    events = store.events(run_id)
    finished = events[-1] if events and events[-1]["type"] == "run.finished" else {}
    answer = (store.resolve_payload(finished.get("result")) or {}).get("answer", "")
    if as_json:
        emit_json(
            {
                "run_id": run_id,
                "status": manifest.status.value,
                "answer": answer,
                "events": len(events),
                "store": str(store.root),
            }
        )
        return
    console = _console()
    effects = manifest.stats.get("effects", {})
    console.print(f"[bold]Question[/] {escape(manifest.goal or '')}")
    console.print(f"[bold]Answer[/]   {escape(answer)}\n")
    console.print(
        f"Recorded run [bold]{run_id}[/] ({manifest.status.value}): {len(events)} events, "
        + ", ".join(f"{n} {k} call(s)" for k, n in effects.items())
    )
    console.print(f"Store: {escape(str(store.root.resolve()))}\n")
    console.print("Inspect it:")
    short = run_id.rsplit("-", 1)[-1]
    console.print(f"  rar show {short}       the timeline of model and tool calls")
    console.print(f"  rar verify {short}     re-hash the chain, blobs and manifest")
    console.print("  rar list              every run in the store")


# --- replay ------------------------------------------------------------------------------------


def print_replay(report: Any, *, as_json: bool) -> None:
    if as_json:
        emit_json(report.as_dict())
        return
    colour = {"reproducible": "green", "partially-reproducible": "yellow"}.get(
        report.replay_status, "red"
    )
    click.echo(
        f"{click.style(report.replay_status, fg=colour, bold=True)}: run {report.source_run} "
        f"replayed ({report.mode}) as {report.replay_run}"
    )
    click.echo(
        f"  effects served {report.served} · live {report.live} · mismatched {report.mismatched}"
    )
    divergence = report.first_divergence
    if divergence:
        where = (
            f" at {divergence.get('span')} #{divergence.get('ordinal')}"
            if divergence.get("span")
            else ""
        )
        click.echo(f"  first divergence{where}: {divergence.get('reason')}")
        for difference in divergence.get("differences") or []:
            click.echo(
                f"    {difference['field']}: recorded {_short(difference['expected'], 60)}"
                f" · now {_short(difference['actual'], 60)}"
            )
    for name, differences in report.boundary.items():
        fields = ", ".join(d["field"] for d in differences[:6])
        click.echo(f"  boundary: {name} differs ({fields})")


# --- science -------------------------------------------------------------------------------------


def print_science(result: Any) -> None:
    from rich.markdown import Markdown
    from rich.table import Table

    console = _console()
    console.print(Markdown(result.answer))
    console.print()
    table = Table(title="Evidence", box=None, header_style="bold", title_justify="left")
    for name in ("#", "document", "location", "relevance", "content hash"):
        table.add_column(name, no_wrap=name != "document")
    for number, anchor in enumerate(result.anchors, start=1):
        table.add_row(
            str(number),
            Text(str(anchor.get("doc_title"))),
            str(anchor.get("location")),
            f"{float(anchor.get('relevance_score', 0)):.2f}",
            str(anchor.get("content_hash", ""))[:19] + "…",
        )
    if result.anchors:
        console.print(table)
    else:
        console.print(Text("Evidence: no passage is cited."))
    for rejected in getattr(result, "rejected", []) or []:  # removed by the final audit
        reasons = "; ".join(str(r) for r in rejected.get("reasons", []))
        console.print(Text(f"  removed: {rejected.get('claim')} ({reasons})"), style="yellow")
    checks = result.audit.get("checks", [])
    passed = sum(1 for check in checks if check.get("passed"))
    verdict = "passed" if result.audit.get("passed") else "did not pass"
    console.print(f"\nAudit {verdict}: {passed}/{len(checks)} checks")
    for check in checks:
        if not check.get("passed"):
            console.print(Text(f"  ✗ {check.get('name')}: {check.get('detail')}"))
    for warning in result.warnings:
        console.print(Text(f"  warning: {warning}"), style="yellow")
    for skipped in result.corpus_skipped:
        console.print(
            Text(f"  note: skipped {skipped.get('path')}: {skipped.get('reason')}"), style="dim"
        )
    short = result.run_id.rsplit("-", 1)[-1]
    console.print(f"\nRun {result.run_id} ({result.status})")
    console.print(f"  rar show {short}     the timeline: messages, Contract Net rounds, effects")
    console.print(f"  rar replay {short}   re-execute it offline against its record")
    console.print(f"  rar verify {short}   re-hash the record")
    console.print(
        f"  rar view             browse it in a web page (or: rar export {short} --format html)"
    )
