"""``rar replay``, ``rar branch``, ``rar resume`` and ``rar lineage``."""

from __future__ import annotations

from typing import Any

import click
import orjson

from rar.cli.options import COUNT, EVENT_SEQ, SEED, WholeNumber
from rar.errors import ConfigError


def _store(ctx: click.Context) -> Any:
    from rar.store.store import Store

    return Store(ctx.find_root().obj)


@click.command("replay")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--mode",
    type=click.Choice(["strict", "cached"]),
    default="strict",
    show_default=True,
    help="strict: every effect served in order per span; cached: by request digest.",
)
@click.option(
    "--allow-live", is_flag=True, help="cached mode: perform requests that were never recorded."
)
@click.option("--json", "as_json", is_flag=True, help="Print the replay report as JSON.")
@click.pass_context
def replay_command(
    ctx: click.Context, run_ref: str, mode: str, allow_live: bool, as_json: bool
) -> None:
    """Re-execute a run offline against its record; exit 0 only when it is reproducible."""
    from rar.cli.progress import progress_bar
    from rar.cli.render import print_replay
    from rar.replay import replay

    with progress_bar("Replaying effects", enabled=not as_json) as progress:
        report = replay(
            run_ref,
            store=_store(ctx),
            mode=mode,  # type: ignore[arg-type]
            allow_live=allow_live,
            progress=progress,
        )
    print_replay(report, as_json=as_json)
    ctx.exit(0 if report.reproducible else 1)


_WHOLE_SETTINGS: dict[str, WholeNumber] = {"seed": SEED, "max_steps": COUNT}
"""Settings that are whole numbers, read as strictly as the options of the same name."""


def parse_settings(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``key=value`` pairs; values are JSON when they parse as JSON, else plain text; ``seed``
    and ``max_steps`` must be whole numbers in their ranges (a :class:`ConfigError` says so)."""
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set takes key=value, got {pair!r}")
        number = _WHOLE_SETTINGS.get(key)
        if number is not None:
            try:
                settings[key] = number.convert(text, None, None)
            except click.BadParameter as exc:
                raise ConfigError(f"--set {key}: {exc.message}") from None
            continue
        try:
            settings[key] = orjson.loads(text)
        except orjson.JSONDecodeError:
            settings[key] = text
    return settings


@click.command("branch")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--at",
    "at",
    type=EVENT_SEQ,
    required=True,
    help="The divergence point: events up to this seq are replayed, then live.",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Change a setting of the branch: seed, model, a config key or an input.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def branch(
    ctx: click.Context, run_ref: str, at: int, settings: tuple[str, ...], as_json: bool
) -> None:
    """Replay RUN up to event K, then go live with controlled changes, into a new run."""
    from rar.cli.progress import progress_bar
    from rar.cli.render import print_replay
    from rar.replay import replay

    overrides = parse_settings(settings)
    with progress_bar("Replaying up to the branch point", enabled=not as_json) as progress:
        report = replay(
            run_ref, store=_store(ctx), mode="fork", at=at, overrides=overrides, progress=progress
        )
    print_replay(report, as_json=as_json)
    ctx.exit(0 if report.first_divergence is None else 1)


@click.command("resume")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--now", "early", is_flag=True, help="Resume a waiting run before its deadline (noted)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def resume_command(ctx: click.Context, run_ref: str, early: bool, as_json: bool) -> None:
    """Continue a run that waited, crashed or was stopped, in the same run.

    A run waiting for a deadline is resumed once it is due; --now resumes it at once.
    """
    from rar.cli.progress import progress_bar
    from rar.cli.render import print_replay
    from rar.replay import resume

    with progress_bar("Replaying the recorded part", enabled=not as_json) as progress:
        report = resume(run_ref, store=_store(ctx), early=early, progress=progress)
    print_replay(report, as_json=as_json)
    ctx.exit(0 if report.first_divergence is None else 1)


@click.command("lineage")
@click.argument("run_ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print the tree as JSON.")
@click.pass_context
def lineage(ctx: click.Context, run_ref: str, as_json: bool) -> None:
    """The tree of runs branched (or replayed) from RUN's root, with divergence points."""
    from rar.cli.render import emit_json

    store = _store(ctx)
    run_id = store.resolve(run_ref)
    rows = {row.run_id: row for row in store.list_runs()}
    root = run_id
    while rows.get(root) is not None and rows[root].parent in rows:
        root = str(rows[root].parent)
    children: dict[str, list[str]] = {}
    for row in sorted(rows.values(), key=lambda r: (r.created_at, r.run_id)):
        if row.parent:
            children.setdefault(row.parent, []).append(row.run_id)

    def node(rid: str) -> dict[str, Any]:
        manifest = store.manifest(rid)
        return {
            "run_id": rid,
            "status": store.display_status(rows[rid]),
            "at": manifest.parent.seq if manifest.parent else None,
            "mode": manifest.tags.get("replay_mode"),
            "children": [node(c) for c in children.get(rid, [])],
        }

    tree = node(root)
    if as_json:
        emit_json(tree)
        return

    def show(item: dict[str, Any], prefix: str, last: bool, top: bool) -> None:
        branch_mark = "" if top else ("└─ " if last else "├─ ")
        how = f" {item['mode']} at event {item['at']}" if item["at"] is not None else ""
        marker = " ◀" if item["run_id"] == run_id else ""
        click.echo(f"{prefix}{branch_mark}{item['run_id']} ({item['status']}){how}{marker}")
        kids = item["children"]
        for index, kid in enumerate(kids):
            extension = "" if top else ("   " if last else "│  ")
            show(kid, prefix + extension, index == len(kids) - 1, False)

    show(tree, "", True, True)
