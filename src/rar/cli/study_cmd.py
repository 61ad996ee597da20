"""``rar study``: run a grid of runs on Dask, list studies, and report how reproducible they were.

``rar study SPEC.yaml`` is short for ``rar study run SPEC.yaml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rar.cli.options import COUNT


class _StudyGroup(click.Group):
    """A group whose first argument may be a spec file: ``rar study SPEC`` runs it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["run", *args]
        return super().parse_args(ctx, args)


def _store(ctx: click.Context) -> Any:
    from rar.store.store import Store

    return Store(ctx.find_root().obj)


@click.group("study", cls=_StudyGroup)
def study_group() -> None:
    """Run a grid of questions × seeds × modes × models on Dask, and report how reproducible
    it was.

    The grid may also span corpora, task specs and flows (see examples/reproducibility.yaml).

    \b
    rar study examples/reproducibility.yaml        # a LocalCluster, one worker per core
    rar study SPEC --scheduler tcp://host:8786     # an existing Dask cluster
    rar study report STUDY                         # Markdown, JSON, PNG and SVG figures
    """


@study_group.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path))
@click.option(
    "--scheduler",
    default=None,
    help="Address of a running Dask scheduler, tcp://host:port (default: a LocalCluster).",
)
@click.option(
    "--workers",
    type=COUNT,
    default=None,
    help="Worker processes of the LocalCluster (default: one per core, one thread each).",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the --scheduler to answer.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the study's result as JSON.")
@click.pass_context
def run_command(
    ctx: click.Context,
    spec_path: Path,
    scheduler: str | None,
    workers: int | None,
    connect_timeout: float,
    as_json: bool,
) -> None:
    """Run every cell of the study SPEC (YAML); cells already finished in the store are reused.

    Each cell is one run in the store; the study is itself a run naming every cell's run, its
    status and its error. A failing cell is recorded and the study goes on: the exit code is 0
    when every cell completed, 1 when some failed.
    """
    from rar.cli.progress import progress_bar
    from rar.study import load_study, study

    spec = load_study(spec_path)  # a bad spec fails before the store is touched
    store = _store(ctx)
    with progress_bar(f"study {spec.name}", enabled=not as_json) as progress:
        result = study(spec_path, store=store, scheduler=scheduler, workers=workers,
                       progress=progress, connect_timeout=connect_timeout)  # fmt: skip
    counts = result.counts
    if as_json:
        from rar.cli.render import emit_json

        emit_json(result.as_dict())
    else:
        click.echo(
            f"study {result.name}: run {result.run_id}, {counts['cells']} cells, "
            f"{counts['completed']} completed ({counts['reused']} reused), "
            f"{counts['failed']} failed"
        )
        for cell in result.cells:
            if cell.get("error"):
                error = cell["error"]
                click.echo(f"  failed {cell['digest'][7:19]}: {error['type']}: {error['message']}")
        click.echo(f"report: rar study report {result.run_id}")
    ctx.exit(0 if counts["failed"] == 0 else 1)


@study_group.command("report")
@click.argument("study_ref", metavar="STUDY")
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory to write the report into (default: <store>/studies/<study id>/).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def report_command(ctx: click.Context, study_ref: str, out: Path | None, as_json: bool) -> None:
    """Report the study STUDY (its run id or a unique prefix): agreement across seeds, computed
    values, evidence overlap, audits, strict replay of every run, cost, tokens and latency.

    Writes report.md, report.json and figures (PNG and SVG). Exit 0 when every run replays
    reproducible, 1 otherwise.
    """
    from rar.cli.progress import progress_bar
    from rar.study.report import write_report

    store = _store(ctx)
    with progress_bar("replaying the study's runs", enabled=not as_json) as progress:
        report, files = write_report(store, study_ref, out, progress=progress)
    if as_json:
        from rar.cli.render import emit_json

        emit_json(report)
    else:
        replay, counts = report["replay"], report["counts"]
        click.echo(
            f"study {report['study']['run_id']}: {counts['completed']} of {counts['cells']} "
            f"cells completed; {replay['reproducible']} of {replay['runs']} runs replay "
            "reproducible"
        )
        for group_number, group in enumerate(report["groups"], start=1):
            click.echo(
                f"  G{group_number} agreement {_share(group['agreement_exact'])} exact, "
                f"{_share(group['agreement_normalised'])} normalised; evidence overlap "
                f"{_share(group['evidence_jaccard'])}: {group['label']}"
            )
        for name, path in files.items():
            click.echo(f"{name}: {path}")
    ctx.exit(0 if report["replay"]["all_reproducible"] else 1)


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


@study_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the studies as a JSON array.")
@click.pass_context
def list_command(ctx: click.Context, as_json: bool) -> None:
    """List the studies in the store, newest first."""
    from rar.study.listing import list_studies

    studies = list_studies(_store(ctx))
    if as_json:
        from rar.cli.render import emit_json

        emit_json(studies)
        return
    if not studies:
        click.echo("no studies in this store; run one with: rar study SPEC.yaml")
    for item in studies:
        click.echo(f"{item['run_id']}  {item['status']:<24} {item['name']}  {item['goal']}")
