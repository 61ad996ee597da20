"""``rar flow``: agentic flows (``rar flow demo``: lm-lib's announcement example)."""

from __future__ import annotations

from typing import Any

import click

from rar.cli.options import SEED, otel_option


@click.group("flow")
def flow_group() -> None:
    """Agentic flows: graphs of agents with parallel splits and merges."""


@flow_group.command("demo")
@click.option(
    "--model",
    default=None,
    help="Run the flow on this model (profile or provider:model) instead of the offline "
    "scripted one.",
)
@click.option("--seed", type=SEED, default=7, show_default=True, help="Seed of the run.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
    default=5,
    show_default=True,
    help="Model calls at a time.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print {run_id, graph, statistics, contexts}."
)
@otel_option
@click.pass_context
def flow_demo(
    ctx: click.Context, model: str | None, seed: int, concurrency: int, as_json: bool
) -> None:
    """Summarize code, analyze its 5 features in parallel, merge, write an announcement.

    Offline by default (a scripted model, no API key); every model call is recorded, so
    `rar replay RUN` re-walks the flow from the record.
    """
    from rar.cli import _store
    from rar.flow.demo import DEMO_MODEL, GOAL, run_flow_demo
    from rar.replay.engine import execute

    used = {"provider": "scripted", "model": DEMO_MODEL}
    if model is not None:
        from rar.llm.client import Client

        client = Client(model).connect()  # a missing key or bad model is refused before recording
        used = {"provider": client.profile.provider, "model": client.profile.model}
    store = _store(ctx)
    run = execute(
        run_flow_demo,
        inputs={"model": model, "concurrency": concurrency},
        goal=GOAL,
        store=store,
        seed=seed,
        models=[used],
        config={"model": model or f"scripted:{DEMO_MODEL}", "concurrency": concurrency},
        tags={"kind": "flow"},
    )
    _print(store, run.id, as_json=as_json)


def _print(store: Any, run_id: str, *, as_json: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    from rar.cli.render import _console, emit_json

    manifest = store.manifest(run_id)
    events = store.events(run_id)
    finished = events[-1] if events and events[-1]["type"] == "run.finished" else {}
    result = store.resolve_payload(finished.get("result")) or {}
    end: dict[str, Any] = next((e for e in reversed(events) if e["type"] == "flow.end"), {})
    statistics = store.resolve_payload(end.get("report")) if end.get("report") else {}
    if as_json:
        emit_json(
            {
                "run_id": run_id,
                "graph": result.get("graph", ""),
                "statistics": statistics,
                "contexts": result.get("contexts", []),
            }
        )
        return
    console = _console()
    answer = result.get("answer")
    if answer:
        console.print(escape(answer))
    else:
        console.print("[red]The flow produced no answer[/]: every context failed (see the graph).")
    console.print(f"\n[bold]Graph[/]  {escape(result.get('graph', ''))}")
    for other in end.get("graphs", [])[1:]:
        console.print(f"        {escape(other)}")
    table = Table(title="Request statistics", title_justify="left", show_header=True)
    for column in (
        "requests",
        "cached",
        "tokens in",
        "tokens out",
        "request time",
        "effective",
        "tok/s",
        "out tok/s",
        "cost",
    ):
        table.add_column(column, justify="right")
    s = statistics or {}
    table.add_row(
        str(s.get("requests", 0)),
        str(s.get("cached", 0)),
        str(s.get("input_tokens", 0)),
        str(s.get("output_tokens", 0)),
        f"{s.get('request_duration_s', 0):.3f} s",
        f"{s.get('effective_duration_s', 0):.3f} s",
        f"{s.get('tps', 0):.1f}",
        f"{s.get('output_tps', 0):.1f}",
        f"{s.get('cost', 0):.6f}",
    )
    console.print(table)
    short = run_id.rsplit("-", 1)[-1]
    console.print(f"Recorded run [bold]{run_id}[/] ({manifest.status.value})")
    console.print(f"  rar replay {short}     re-walk the flow from the record")
    console.print(f"  rar show {short}       the timeline, split by split")
