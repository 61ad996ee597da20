"""The ``rar`` command line.

Human output by default, ``--json`` for scripts (shapes documented in docs/cli.md). Exit codes:
0 success; 1 a check found problems (``verify``); 2 bad input (unknown run id, bad option);
3 the environment failed (the store cannot do what was asked, a provider failed after its
retries); 4 an internal error.
Heavy modules are imported inside the commands that need them, to keep start-up short.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from rar._version import __version__
from rar.cli.options import COUNT, SEED, otel_option
from rar.errors import RarError


class _Group(click.Group):
    """Turns RAR errors into one clear line on stderr and a meaningful exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        # Every message printed here may quote a provider's answer, a tool's output or an
        # exception: it passes the same redactor as what runs record (rar.redaction).
        try:
            return super().invoke(ctx)
        except RarError as exc:
            click.echo(f"error: {_redacted(exc.message)}", err=True)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(0)
        except click.ClickException as exc:  # click prints it: a bad value may be a key
            exc.message = _redacted(exc.message)
            raise
        except (click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if os.environ.get("RAR_DEBUG"):
                raise
            click.echo(
                f"internal error: {_redacted(f'{type(exc).__name__}: {exc}')}\n"
                "This is a bug in RAR; run again with RAR_DEBUG=1 for the traceback and report it.",
                err=True,
            )
            ctx.exit(4)


def _redacted(text: str) -> str:
    from rar.redaction import redact_output

    return redact_output(text)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rar")
@click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="RAR_HOME",
    default="runs",
    show_default="./runs, or $RAR_HOME",
    help="Directory of the run store.",
)
@click.pass_context
def cli(ctx: click.Context, store_path: Path) -> None:
    """RAR records agent runs as verifiable, replayable lab-notebook entries."""
    ctx.obj = store_path


def _store(ctx: click.Context) -> Any:
    from rar.store.store import Store

    return Store(ctx.find_root().obj)


@cli.command()
@click.option("--seed", type=SEED, default=7, show_default=True, help="Seed of the run.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def demo(ctx: click.Context, seed: int, as_json: bool) -> None:
    """Record a small scripted agent run (offline, no API key needed)."""
    from rar.cli.render import print_demo
    from rar.demo import run_demo

    store = _store(ctx)
    run = run_demo(store, seed=seed)
    print_demo(store, run.id, as_json=as_json)


@cli.command("list")
@click.option(
    "--limit",
    type=COUNT,
    default=None,
    help="Show at most N runs (default: 50, all with --json).",
)
@click.option("--all", "show_all", is_flag=True, help="Show every run.")
@click.option("--json", "as_json", is_flag=True, help="Print runs as a JSON array.")
@click.pass_context
def list_(ctx: click.Context, limit: int | None, show_all: bool, as_json: bool) -> None:
    """List runs, newest first."""
    from rar.cli.render import print_list

    store = _store(ctx)
    rows = store.list_runs() if store.exists else []
    if show_all:
        limit = None
    elif limit is None and not as_json:
        limit = 50
    print_list(store, rows, limit=limit, as_json=as_json)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--trace",
    is_flag=True,
    help="Show the trace entries instead: agent, message, tool, model, thinking level, hashes, "
    "latency and whether each step is deterministic.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"manifest": ..., "events": [...]} as JSON (with --trace: one JSON object per '
    "line and trace entry).",
)
@click.pass_context
def show(ctx: click.Context, run_ref: str, trace: bool, as_json: bool) -> None:
    """Show a run's manifest summary and event timeline (RUN may be a unique id prefix)."""
    store = _store(ctx)
    run_id = store.resolve(run_ref)
    if trace:
        from rar.cli.show_trace import print_trace

        print_trace(store, run_id, as_json=as_json)
        return
    from rar.cli.render import print_show

    print_show(store, run_id, as_json=as_json)


@cli.command()
@click.argument("run_refs", metavar="[RUN]...", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def verify(ctx: click.Context, run_refs: tuple[str, ...], as_json: bool) -> None:
    """Re-hash chains, blobs, manifests and snapshots; exit 0 only if all are intact.

    Without RUN, checks every run and every blob pack in the store. Read-only: changes no file.
    """
    from rar.cli.render import print_verify
    from rar.store.catalog import ReadOnlyStore
    from rar.store.verify import verify_store

    store = ReadOnlyStore(ctx.find_root().obj)  # blobs found in the packs: the index is not used
    if not store.exists:
        from rar.errors import StoreError

        raise StoreError(
            f"there is no run store at {store.root}; --store DIR or RAR_HOME names another",
            exit_code=2,
        )
    ids = [store.resolve(ref) for ref in run_refs] if run_refs else None
    from rar.cli.progress import progress_bar

    with progress_bar("Verifying runs", enabled=not as_json) as progress:
        report = verify_store(store, ids, progress=progress)
    from rar.evidence.runs import anchor_problems

    for run_id in ids if ids is not None else store.run_ids():
        try:
            report.problems.extend(anchor_problems(store, run_id))
        except RarError:
            continue  # a run too damaged to read is already in the report
    print_verify(report, as_json=as_json)
    ctx.exit(0 if report.ok else 1)


@cli.command("ask")
@click.argument("prompt")
@click.option(
    "--model",
    "-m",
    default=None,
    help="A profile name or provider:model (default: the profiles' default, "
    "else the offline scripted:echo).",
)
@click.option("--system", default=None, help="A system prompt.")
@click.option(
    "--tools",
    "use_tools",
    is_flag=True,
    help="Let the model call the built-in tools (calculator, http_get) in a loop.",
)
@click.option(
    "--max-steps",
    type=COUNT,
    default=6,
    show_default=True,
    help="Model turns at most, with --tools.",
)
@click.option(
    "--profiles",
    "profiles_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A profiles TOML file to read besides the default ones.",
)
@click.option("--no-cache", is_flag=True, help="Always call the provider.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"run_id", "text", "model", "usage", "cached", ...} as JSON.',
)
@otel_option
@click.pass_context
def ask_(
    ctx: click.Context,
    prompt: str,
    model: str | None,
    system: str | None,
    use_tools: bool,
    max_steps: int,
    profiles_file: Path | None,
    no_cache: bool,
    as_json: bool,
) -> None:
    """Ask a model one question, recorded as a run; a repeated question is served from the cache."""
    from rar.cli.ask import ask, print_answer

    summary = ask(
        _store(ctx),
        prompt,
        model=model,
        system=system,
        use_tools=use_tools,
        max_steps=max_steps,
        profiles_file=profiles_file,
        cache=not no_cache,
    )
    print_answer(summary, as_json=as_json)


@cli.group()
def cache() -> None:
    """The model response cache kept in the store."""


@cache.command("explain")
@click.argument("prompt")
@click.option("--model", "-m", default=None, help="As for rar ask.")
@click.option("--system", default=None, help="As for rar ask.")
@click.option(
    "--profiles", "profiles_file", type=click.Path(dir_okay=False, path_type=Path), default=None
)
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@click.pass_context
def cache_explain(
    ctx: click.Context,
    prompt: str,
    model: str | None,
    system: str | None,
    profiles_file: Path | None,
    as_json: bool,
) -> None:
    """Say whether `rar ask PROMPT` would be a cache hit, and if not, what differs."""
    from rar.cli.ask import explain
    from rar.cli.render import emit_json

    result = explain(_store(ctx), prompt, model=model, system=system, profiles_file=profiles_file)
    if as_json:
        emit_json(result)
        return
    if result["hit"]:
        click.echo(f"hit: {result['key']}")
        return
    if result["nearest"] is None:
        click.echo("miss: nothing cached yet for this provider and model")
        return
    click.echo(f"miss: nearest cached request {result['nearest']} (run {result['nearest_run']})")
    for difference in result["differences"]:
        click.echo(
            f"  {difference['field']}: cached {difference['cached']!r}"
            f" · asked {difference['requested']!r}"
        )


# Commands defined in their own modules, imported only when named on the command line (or when
# ``rar --help`` needs one that is not listed here). name → (module, attribute, summary): the
# summary is the first paragraph of the command's help, which ``rar --help`` shows without
# importing the module; tests/test_cli_startup.py checks that it matches the real command.
_LAZY: dict[str, tuple[str, str, str]] = {
    "run": (
        "rar.cli.run_cmd",
        "run_command",
        "Answer QUESTION over a corpus with four agents, offline by default; every claim cited.",
    ),
    "replay": (
        "rar.cli.replay_cmd",
        "replay_command",
        "Re-execute a run offline against its record; exit 0 only when it is reproducible.",
    ),
    "branch": (
        "rar.cli.replay_cmd",
        "branch",
        "Replay RUN up to event K, then go live with controlled changes, into a new run.",
    ),
    "resume": (
        "rar.cli.replay_cmd",
        "resume_command",
        "Continue a run that waited, crashed or was stopped, in the same run.",
    ),
    "lineage": (
        "rar.cli.replay_cmd",
        "lineage",
        "The tree of runs branched (or replayed) from RUN's root, with divergence points.",
    ),
    "sandbox": (
        "rar.cli.sandbox_cmd",
        "sandbox_group",
        "Run Python code in the isolated code sandbox (bubblewrap).",
    ),
    "export": (
        "rar.cli.export_cmd",
        "export_command",
        "Export a run (RUN may be a unique id prefix) as a trajectory, an HTML page, an RO-Crate "
        "or a PROV document.",
    ),
    "view": (
        "rar.cli.view_cmd",
        "view_command",
        "Browse runs in a local web viewer (read-only unless --allow-runs; never changes a run).",
    ),
    "flow": (
        "rar.cli.flow_cmd",
        "flow_group",
        "Agentic flows: graphs of agents with parallel splits and merges.",
    ),
    "proxy": (
        "rar.cli.proxy_cmd",
        "proxy_command",
        "Serve an OpenAI-compatible API that records (or replays) every model call as a run.",
    ),
    "study": (
        "rar.cli.study_cmd",
        "study_group",
        "Run a grid of questions × seeds × modes × models on Dask, and report how reproducible "
        "it was.",
    ),
    "store": (
        "rar.cli.store_cmd",
        "store_group",
        "Where a store keeps its parts: upload its packs to its blob URL.",
    ),
    "query": (
        "rar.cli.query_cmd",
        "query_command",
        "SQL over the store: runs, events, effects, anchors and usage as tables.",
    ),
    "search": (
        "rar.cli.query_cmd",
        "search_command",
        "Full-text search over the messages recorded in the store.",
    ),
    "diff": (
        "rar.cli.diff_cmd",
        "diff_command",
        "Compare run A with run B step by step: the first divergence and why, the answers, "
        "evidence, usage and manifests. Exit 0 when equivalent, 1 when different.",
    ),
}


def _load(name: str) -> click.Command | None:
    """Import a lazily registered command and add it to the group."""
    entry = _LAZY.get(name)
    if entry is None:
        return None
    import importlib

    module, attribute, _ = entry
    command: click.Command = getattr(importlib.import_module(module), attribute)
    cli.add_command(command, name)
    return command


def _lazy_list_commands(ctx: click.Context) -> list[str]:
    return sorted(set(cli.commands) | set(_LAZY))


def _lazy_get_command(ctx: click.Context, name: str) -> click.Command | None:
    command = cli.commands.get(name)
    return command if command is not None else _load(name)


def _lazy_format_commands(ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """``rar --help``'s command list, from the summaries: no command module is imported."""
    rows = []
    for name in _lazy_list_commands(ctx):
        command = cli.commands.get(name)
        if command is None:
            command = click.Command(name, help=_LAZY[name][2])
        if command.hidden:
            continue
        rows.append((name, command))
    if rows:
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


cli.list_commands = _lazy_list_commands  # type: ignore[method-assign]
cli.get_command = _lazy_get_command  # type: ignore[method-assign,assignment]
cli.format_commands = _lazy_format_commands  # type: ignore[method-assign]


def load_all_commands() -> None:
    """Import every lazily registered command (for tests and documentation tools)."""
    for name in _LAZY:
        _load(name)


def main() -> None:
    cli(prog_name="rar")
