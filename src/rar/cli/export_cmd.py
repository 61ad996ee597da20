"""``rar export RUN --format FORMAT [-o FILE]``: a recorded run in another format.

Each format is one function in :data:`EXPORTERS` from ``(store, run_id)`` to the document's text;
adding a format (e.g. ``html``) is adding a function and its name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rar.errors import RarError


def _trajectory(store: Any, run_id: str) -> str:
    from rar.export.trajectory import TrajectoryError, check_steps, dumps, export_trajectory

    doc = export_trajectory(store, run_id)
    problems = check_steps(doc)
    if problems:  # pragma: no cover - the exporter always builds one answer, last
        raise TrajectoryError("; ".join(problems))
    return dumps(doc)


def _html(store: Any, run_id: str) -> str:
    from rar.export.html import export_data, render_html

    data = export_data(store, run_id)
    verify = data["run"]["verify"]
    if verify.get("ok") is False:
        problems = verify.get("problems") or []
        click.echo(
            f"warning: run {run_id} does not verify ({len(problems)} problem"
            f"{'' if len(problems) == 1 else 's'}); the page lists them. "
            f"`rar verify {run_id}` says more.",
            err=True,
        )
    if data["errors"]:
        click.echo(
            f"warning: {len(data['errors'])} payload(s) could not be read and are marked "
            "as such in the page",
            err=True,
        )
    return render_html(data)


EXPORTERS: dict[str, Callable[[Any, str], str]] = {
    "trajectory": _trajectory,
    "html": _html,
}


def _store(ctx: click.Context) -> Any:
    from rar.store.store import Store

    root = ctx.find_root().obj
    return Store(root if isinstance(root, (str, Path)) else None)


@click.command("export")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(sorted(EXPORTERS)),
    default="trajectory",
    show_default=True,
    help=(
        "What to export: trajectory (JSON, see docs/trajectory.md) or html (one "
        "self-contained page with the run and its replay player, viewable offline)."
    ),
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to FILE instead of standard output.",
)
@click.pass_context
def export_command(ctx: click.Context, run_ref: str, fmt: str, output: Path | None) -> None:
    """Export a run (RUN may be a unique id prefix) as a trajectory or an HTML page."""
    try:
        store = _store(ctx)
        run_id = store.resolve(run_ref)
        text = EXPORTERS[fmt](store, run_id)
    except RarError as exc:  # also when used outside the rar group
        click.echo(f"error: {exc.message}", err=True)
        ctx.exit(exc.exit_code)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        click.echo(f"error: cannot write {output}: {exc.strerror or exc}", err=True)
        ctx.exit(2)
    click.echo(f"wrote {output}", err=True)
