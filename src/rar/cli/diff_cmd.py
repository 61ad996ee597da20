"""``rar diff A B``: where two runs first diverge, and why (see :mod:`rar.replay.diff`).

Exit 0 when the runs are equivalent, 1 when they differ, 2 for bad input (an unknown or ambiguous
run id, or both arguments naming the same run), 3 when ``--save`` cannot write the store.
``--json`` prints :meth:`RunDiff.as_dict`; ``--save`` also writes it, and a Markdown report, to
``<store>/diffs/<A>..<B>.json`` and ``.md`` (see :mod:`rar.replay.diff_report`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rar.replay.diff import FieldDiff, RunDiff

MAX_ROWS = 50


@click.command("diff")
@click.argument("run_a", metavar="A")
@click.argument("run_b", metavar="B")
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.option(
    "--save",
    is_flag=True,
    help="Also write the diff to <store>/diffs/<A>..<B>.json and .md and print their paths "
    "(on stderr with --json).",
)
@click.pass_context
def diff_command(ctx: click.Context, run_a: str, run_b: str, as_json: bool, save: bool) -> None:
    """Compare run A with run B step by step: the first divergence and why, the answers,
    evidence, usage and manifests. Exit 0 when equivalent, 1 when different.
    """
    from rar.cli.render import emit_json
    from rar.errors import ConfigError
    from rar.replay.diff import diff_runs
    from rar.store.store import Store

    store = Store(ctx.find_root().obj)
    a_id, b_id = store.resolve(run_a), store.resolve(run_b)
    if a_id == b_id:
        raise ConfigError(f"both arguments name run {a_id}; give two different runs")
    if save:
        from rar.replay.diff_report import check_writable

        check_writable(store)  # refused before anything is printed or written
    result = diff_runs(store, a_id, b_id)
    if as_json:
        emit_json(result.as_dict())
    else:
        print_diff(result)
    if save:
        from rar.replay.diff_report import save_diff

        saved = save_diff(store, result)
        if not as_json:
            click.echo()
        for path in (saved.json, saved.markdown):
            click.echo(f"saved {path}", err=as_json)
    ctx.exit(0 if result.equivalent else 1)


def _console() -> Any:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console.width = max(console.width, 120)
    return console


def _text(value: Any) -> str:
    import orjson

    if value is None:
        return "-"
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return f"{value:,}"


def _fields_table(fields: tuple[FieldDiff, ...], omitted: int, indent: int = 4) -> Any:
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name in ("field", "A", "B"):
        table.add_column(name, overflow="fold")
    for item in fields:
        a = "(absent)" if item.change == "added" else _text(item.a)
        b = "(absent)" if item.change == "removed" else _text(item.b)
        table.add_row(Text(item.path), Text(a, style="red"), Text(b, style="green"))
    if omitted:
        table.add_row(Text(f"… {omitted} more"), "", "")
    return Padding(table, (0, 0, 0, indent), expand=False)


def print_diff(diff: RunDiff) -> None:
    """The human report: header, verdict, first divergence, steps, answer, evidence, usage."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    console = _console()
    for label, side in (("A", diff.a), ("B", diff.b)):
        console.print(
            f"[bold]{label}[/] {side.run_id}  {side.status}, {side.events} events,"
            f" {side.steps} steps"
        )
    if diff.a.goal == diff.b.goal:
        console.print(Text(f"goal  {diff.a.goal or '-'}"))
    else:
        console.print(Text(f"goal A  {diff.a.goal or '-'}\ngoal B  {diff.b.goal or '-'}"))
    counts = ", ".join(f"{n} {status}" for status, n in diff.counts.items() if n)
    answer = "same answer" if diff.answer.equal else "answers differ"
    if diff.equivalent:
        console.print(f"\n[bold green]equivalent[/]: {counts or 'no steps'}; {answer}")
    else:
        console.print(f"\n[bold red]different[/]: {counts or 'no steps'}; {answer}")

    first = diff.first_divergence
    if first is not None:
        step = first.aligned.step
        sides = (("A", first.aligned.a), ("B", first.aligned.b))
        where = [f"{name} seq {s.seq} #{s.ordinal}" for name, s in sides if s is not None]
        console.print(
            f"\n[bold]first divergence[/] at step {first.index + 1} of {len(diff.steps)}:"
            f" [bold]{first.aligned.status}[/]"
        )
        console.print(f"  where  {escape(step.span)} · {step.kind} · {', '.join(where)}")
        console.print(f"  why    {escape(first.reason)}")
        if first.detail is not None:
            console.print(Text(f"  step   {_text(first.detail)}"))
        if first.fields:
            console.print(f"  {first.compared} fields that differ:")
            console.print(_fields_table(first.fields, first.fields_omitted))

    changed = [(i, s) for i, s in enumerate(diff.steps) if s.status != "same"]
    if changed:
        same = len(diff.steps) - len(changed)
        console.print(f"\n[bold]steps[/] that differ ({same} same not shown)")
        table = Table(box=None, pad_edge=False, header_style="bold")
        for name in ("#", "status", "span", "kind", "A seq:ord", "B seq:ord"):
            table.add_column(name, no_wrap=name != "span", overflow="fold")
        for index, aligned in changed[:MAX_ROWS]:
            a, b = aligned.a, aligned.b
            table.add_row(
                str(index + 1),
                aligned.status,
                Text(aligned.step.span),
                aligned.step.kind,
                f"{a.seq}:{a.ordinal}" if a else "-",
                f"{b.seq}:{b.ordinal}" if b else "-",
            )
        console.print(table)
        if len(changed) > MAX_ROWS:
            console.print(f"… {len(changed) - MAX_ROWS} more (--json lists every step)")

    console.print("\n[bold]answer[/]")
    if diff.answer.equal:
        console.print(Text(f"  same: {_text(diff.answer.a)}"))
    else:
        if diff.answer.status_a != diff.answer.status_b:
            console.print(f"  status {diff.answer.status_a} → {diff.answer.status_b}")
        styles = {"+": "green", "-": "red", "@": "cyan"}
        for line in diff.answer.diff:
            console.print(Text(f"  {line}", style=styles.get(line[:1], "")))

    evidence = diff.evidence
    if evidence:
        console.print("\n[bold]evidence[/]")
        for sign, anchors, style in (
            ("+", evidence.added, "green"),
            ("-", evidence.removed, "red"),
        ):
            for anchor in anchors:
                line = f"  {sign} {anchor['doc_id']} @ {_text(anchor['location'])}"
                console.print(Text(f"{line}  {_text(anchor['snippet'])}", style=style))
        for item in evidence.changed:
            console.print(
                Text(
                    f"  ~ {item['doc_id']} @ {_text(item['location'])}: content_hash"
                    f" {_text(item['a'])[:19]} → {_text(item['b'])[:19]}",
                    style="yellow",
                )
            )

    if diff.metrics:
        console.print("\n[bold]usage, cost, latency, cache[/] (never counted as divergence)")
        table = Table(box=None, pad_edge=False, header_style="bold")
        for name in ("metric", "A", "B", "Δ (B-A)"):
            table.add_column(name, justify="left" if name == "metric" else "right")
        for metric in diff.metrics:
            delta = _number(metric.delta) if metric.delta else ""
            if metric.delta and metric.delta > 0:
                delta = "+" + delta
            table.add_row(metric.name, _number(metric.a), _number(metric.b), delta)
        console.print(table)

    console.print("\n[bold]manifest differences[/]")
    if diff.manifest:
        console.print(_fields_table(diff.manifest, diff.manifest_omitted, indent=2))
    else:
        console.print("  none")
