"""``rar sandbox run FILE``: run a Python file in the code sandbox and print the result record.

Exit 0 when the cell's status is ``ok``, 1 otherwise (error, timeout, killed, limit), 2 for bad
input (a missing or unreadable file), 3 when the sandbox cannot run (bubblewrap missing).
``--json`` prints :meth:`rar.sandbox.CellResult.as_dict`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rar.cli.options import MAX_TIMEOUT_SECONDS, TIMEOUT

if TYPE_CHECKING:
    from rar.sandbox import CellResult


@click.group("sandbox")
def sandbox_group() -> None:
    """Run Python code in the isolated code sandbox (bubblewrap)."""


@sandbox_group.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result record as JSON.")
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory bound read-write at /work (created if missing; default: a temporary one, "
    "removed afterwards). When RAR runs as root it is handed to uid 65534.",
)
@click.option(
    "--timeout",
    type=TIMEOUT,
    default=None,
    help=f"Wall-clock limit in seconds, above 0 and at most {MAX_TIMEOUT_SECONDS:g} "
    "(default: 120).",
)
@click.option(
    "--unsafe-local",
    is_flag=True,
    help="Run WITHOUT isolation (a plain subprocess with limits); only for trusted code.",
)
@click.pass_context
def run_command(
    ctx: click.Context,
    file: Path,
    as_json: bool,
    workspace: Path | None,
    timeout: float | None,
    unsafe_local: bool,
) -> None:
    """Run FILE as one cell in a fresh sandbox and print status, output, variables and
    artifacts. Exit 0 when it ran without error, 1 otherwise."""
    from rar.errors import RarError
    from rar.sandbox import Sandbox

    try:
        code = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        click.echo(f"error: cannot read {file}: {exc}", err=True)
        ctx.exit(2)
    temporary = workspace is None
    root = Path(tempfile.mkdtemp(prefix="rar-sandbox-")) if workspace is None else workspace
    try:
        with Sandbox(root, unsafe_local=unsafe_local) as box:
            result = box.run_cell(code, timeout=timeout)
    except RarError as exc:
        click.echo(f"error: {exc.message}", err=True)
        ctx.exit(exc.exit_code)
    finally:
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
    result = _redacted(result)  # printed like it would be recorded: no credential on a terminal
    if as_json:
        from rar.cli.render import emit_json

        emit_json(result.as_dict())
    else:
        print_result(result, workspace=None if temporary else root)
    ctx.exit(0 if result.ok else 1)


def _redacted(result: CellResult) -> CellResult:
    import dataclasses

    from rar.redaction import default_redactor

    redactor = default_redactor()
    return dataclasses.replace(
        result,
        stdout=redactor.redact_text(result.stdout),
        stderr=redactor.redact_text(result.stderr),
        error=redactor.redact(result.error),
        variables=redactor.redact(result.variables),
    )


def print_result(result: CellResult, *, workspace: Path | None) -> None:
    """The human form of a result record."""
    head = f"status: {result.status}  ({result.duration_ms:.1f} ms)"
    if result.unsafe:
        head += "  [UNSAFE: ran without isolation]"
    if result.worker_restarted:
        head += "  [fresh worker]"
    click.echo(head)
    for name, text, cut in (
        ("stdout", result.stdout, result.stdout_truncated),
        ("stderr", result.stderr, result.stderr_truncated),
    ):
        if text or cut:
            click.echo(f"{name}:" + ("  (truncated)" if cut else ""))
            click.echo(_indent(text.rstrip("\n")))
    if result.error is not None:
        click.echo(f"error: {result.error['type']}: {result.error['message']}")
        if result.error.get("traceback"):
            click.echo(_indent(result.error["traceback"].rstrip("\n")))
    if result.variables:
        click.echo("variables:")
        for name, value in result.variables.items():
            click.echo(f"  {name} = {_short(value)}")
    where = f" (in {workspace})" if workspace else " (temporary workspace, removed)"
    if result.artifacts:
        click.echo("artifacts" + where + ":")
        for art in result.artifacts:
            click.echo(f"  {art.path}  {art.size} B  {art.media_type}  {art.digest}")
    if result.refused:
        click.echo("refused (not read, not followed):")
        for item in result.refused:
            click.echo(f"  {item.path}  {item.kind}: {item.reason}")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _short(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:197] + "..."
