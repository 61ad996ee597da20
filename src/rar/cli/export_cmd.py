"""``rar export RUN --format FORMAT [-o FILE|DIR]``: a recorded run in another format.

Each format is one function in :data:`EXPORTERS` from ``(store, run_id, options)`` to the
document's text, or in :data:`DIRECTORY_EXPORTERS` from ``(store, run_id, directory, options)``
for a format that is a directory (``rocrate``); adding a format is adding a function and its
name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rar.errors import RarError


def _trajectory(store: Any, run_id: str, options: dict[str, Any]) -> str:
    from rar.export.trajectory import TrajectoryError, check_steps, dumps, export_trajectory

    doc = export_trajectory(store, run_id)
    problems = check_steps(doc)
    if problems:  # pragma: no cover - the exporter always builds one answer, last
        raise TrajectoryError("; ".join(problems))
    return dumps(doc)


def _html(store: Any, run_id: str, options: dict[str, Any]) -> str:
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


def _warn_unverified(store: Any, run_id: str) -> None:
    from rar.store.verify import verify_store

    check = verify_store(store, [run_id])
    if not check.ok:
        click.echo(
            f"warning: run {run_id} does not verify ({len(check.problems)} problem"
            f"{'' if len(check.problems) == 1 else 's'}); the export shows the record as it "
            f"is. `rar verify {run_id}` says more.",
            err=True,
        )


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _prov(store: Any, run_id: str, options: dict[str, Any]) -> str:
    from rar.export._record import read_run
    from rar.export.prov import build_document, serialize

    record = read_run(store, run_id)
    document = build_document(store, record)  # fails first when the library is missing
    _warn_unverified(store, run_id)
    _warn(record.warnings)
    return serialize(document, options.get("prov_format") or "json")


def _rocrate(store: Any, run_id: str, directory: Path, options: dict[str, Any]) -> str:
    from rar.export.rocrate import export_rocrate

    report = export_rocrate(store, run_id, directory, force=bool(options.get("force")))
    _warn_unverified(store, run_id)
    _warn(report.warnings)
    return f"wrote {directory} ({len(report.files)} files and ro-crate-metadata.json)"


def _otlp(store: Any, run_id: str, options: dict[str, Any]) -> str:
    import os

    from rar.export.otlp import dumps, export_otlp, parse_headers, send

    warnings: list[str] = []
    doc = export_otlp(store, run_id, attributes=options.get("attributes"), warnings=warnings)
    _warn(warnings)
    endpoint = options.get("endpoint")
    if endpoint:
        headers = parse_headers(
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS")
            or ""
        )
        protocol = options.get("protocol") or "json"
        status = send(doc, endpoint, protocol=protocol, headers=headers)
        spans = sum(len(s["spans"]) for r in doc["resourceSpans"] for s in r["scopeSpans"])
        click.echo(f"sent {spans} spans of run {run_id} to {endpoint} as OTLP/{protocol} "
                   f"(HTTP {status})", err=True)
    return dumps(doc)


EXPORTERS: dict[str, Callable[[Any, str, dict[str, Any]], str]] = {
    "trajectory": _trajectory,
    "html": _html,
    "prov": _prov,
    "otlp": _otlp,
}
DIRECTORY_EXPORTERS: dict[str, Callable[[Any, str, Path, dict[str, Any]], str]] = {
    "rocrate": _rocrate,
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
    type=click.Choice(sorted([*EXPORTERS, *DIRECTORY_EXPORTERS])),
    default="trajectory",
    show_default=True,
    help=(
        "What to export: trajectory (JSON, see docs/trajectory.md), html (one "
        "self-contained page with the run and its replay player, viewable offline), "
        "rocrate (a Workflow Run Crate directory, -o DIR), prov (W3C PROV) or otlp "
        "(OpenTelemetry traces as OTLP/JSON); see docs/interop.md. rocrate and prov need: "
        "pip install 'rar[export]'."
    ),
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Write to FILE instead of standard output (rocrate: the directory DIR to create).",
)
@click.option(
    "--prov-format",
    type=click.Choice(["json", "provn"]),
    default=None,
    help="With --format prov: PROV-JSON (the default) or PROV-N.",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --format rocrate: replace an RO-Crate already exported to DIR (never a "
    "directory holding other files).",
)
@click.option(
    "--endpoint",
    metavar="URL",
    default=None,
    help="With --format otlp: also POST the traces to this OTLP/HTTP endpoint "
    "(URL/v1/traces, e.g. http://localhost:4318); headers from OTEL_EXPORTER_OTLP_HEADERS.",
)
@click.option(
    "--protocol",
    type=click.Choice(["json", "protobuf"]),
    default=None,
    help="With --endpoint: send OTLP/JSON (the default) or protobuf (needs "
    "pip install 'rar[otel]'; Phoenix takes only protobuf).",
)
@click.option(
    "--attribute",
    "attributes",
    metavar="KEY=VALUE",
    multiple=True,
    help="With --format otlp: an attribute for every span, e.g. tenant.id=a (repeatable).",
)
@click.pass_context
def export_command(
    ctx: click.Context,
    run_ref: str,
    fmt: str,
    output: Path | None,
    prov_format: str | None,
    force: bool,
    endpoint: str | None,
    protocol: str | None,
    attributes: tuple[str, ...],
) -> None:
    """Export a run (RUN may be a unique id prefix) as a trajectory, an HTML page, an RO-Crate
    or a PROV document."""
    if prov_format is not None and fmt != "prov":
        raise click.UsageError("--prov-format applies to --format prov only")
    if force and fmt not in DIRECTORY_EXPORTERS:
        raise click.UsageError("--force applies to --format rocrate only")
    if fmt in DIRECTORY_EXPORTERS and output is None:
        raise click.UsageError(f"--format {fmt} writes a directory: give -o DIR")
    if fmt not in DIRECTORY_EXPORTERS and output is not None and output.is_dir():
        raise click.BadParameter(f"{output} is a directory", param_hint="'-o' / '--output'")
    if (endpoint or attributes) and fmt != "otlp":
        raise click.UsageError("--endpoint and --attribute apply to --format otlp only")
    if protocol is not None and not endpoint:
        raise click.UsageError("--protocol applies to --endpoint only")
    span_attributes: dict[str, str] = {}
    for item in attributes:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="'--attribute'")
        span_attributes[key.strip()] = value
    options = {
        "prov_format": prov_format,
        "force": force,
        "endpoint": endpoint,
        "protocol": protocol,
        "attributes": span_attributes,
    }
    try:
        store = _store(ctx)
        run_id = store.resolve(run_ref)
        if fmt in DIRECTORY_EXPORTERS:
            assert output is not None
            click.echo(DIRECTORY_EXPORTERS[fmt](store, run_id, output, options), err=True)
            return
        text = EXPORTERS[fmt](store, run_id, options)
    except RarError as exc:  # also when used outside the rar group
        click.echo(f"error: {exc.message}", err=True)
        ctx.exit(exc.exit_code)
    if output is None:
        if fmt == "otlp" and endpoint:
            return  # sent: standard output stays clean
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        click.echo(f"error: cannot write {output}: {exc.strerror or exc}", err=True)
        ctx.exit(2)
    click.echo(f"wrote {output}", err=True)
