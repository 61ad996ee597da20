"""``rar run``: the science runtime answers a research question with evidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rar.cli.options import COUNT, SEED, otel_option
from rar.errors import ConfigError

THINKING_LEVELS = ("minimal", "low", "medium", "high", "off")
"""``rar.science.planner_model.THINKING_LEVELS``, kept here to keep the CLI's start-up light."""


@click.command("run")
@click.argument("question", required=False)
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A task spec (YAML) instead of QUESTION.",
)
@click.option(
    "--mode",
    type=click.Choice(["owl_lite", "owl_dl", "owl_full"]),
    default=None,
    help="How much evidence each claim needs (default: owl_lite).",
)
@click.option("--seed", type=SEED, default=None, help="Seed of the run (default: 0).")
@click.option(
    "--corpus",
    default=None,
    help="A directory of text/markdown documents (default: the packaged demo corpus).",
)
@click.option(
    "--model",
    default=None,
    help="planner:rule-based (offline, default), a profile, provider:model, or auto: a "
    "profile of the mode's category (s for owl_lite; l, else xl, else m otherwise).",
)
@click.option(
    "--thinking",
    type=click.Choice(THINKING_LEVELS),
    default=None,
    help="The planner model's thinking level, sent as its reasoning effort (default: the "
    "mode's, minimal for owl_lite and high otherwise; off sends none).",
)
@click.option(
    "--auditor",
    default=None,
    help="A model (profile or provider:model) that reviews each draft in the AuditSchema, "
    "next to the rule checks (default: the rule checks alone).",
)
@click.option(
    "--max-steps",
    type=COUNT,
    default=None,
    help="Planner turns at most (default: 12).",
)
@click.option(
    "--planner-fallback",
    type=click.Choice(["rule-based", "none"]),
    default=None,
    help="When the planner model is unavailable: hand over to the rule-based planner "
    "(default) or fail the run.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"run_id", "status", "answer", "anchors", "audit", ...} as JSON.',
)
@otel_option
@click.pass_context
def run_command(
    ctx: click.Context,
    question: str | None,
    spec_path: Path | None,
    mode: str | None,
    seed: int | None,
    corpus: str | None,
    model: str | None,
    thinking: str | None,
    auditor: str | None,
    max_steps: int | None,
    planner_fallback: str | None,
    as_json: bool,
) -> None:
    """Answer QUESTION over a corpus with four agents, offline by default; every claim cited."""
    from rar.science.runtime import ask_question
    from rar.science.spec import TaskSpec, load_spec
    from rar.store.store import Store

    if spec_path is not None and question:
        raise ConfigError("give either QUESTION or --spec FILE, not both")
    if spec_path is not None:
        spec = load_spec(spec_path)
    elif question is not None:
        if not question.strip():
            raise ConfigError(
                "the question is empty; ask something, e.g. "
                "rar run 'How is activation energy determined?'"
            )
        spec = TaskSpec(task=question)
    else:
        raise ConfigError("give a QUESTION or --spec FILE; see rar run --help")
    store = Store(ctx.find_root().obj)
    settings: dict[str, Any] = {
        "mode": mode or spec.mode,
        "seed": spec.seed if seed is None else seed,
        "corpus": corpus or spec.corpus,
        "model": model or spec.model,
        "max_steps": max_steps or spec.max_steps,
        "planner_fallback": planner_fallback or spec.planner_fallback,
        "thinking": thinking or spec.thinking_level,
        "auditor": auditor or spec.auditor,
    }
    if as_json:
        result = ask_question(spec.task, store=store, **settings)
    else:
        from rich.console import Console

        with Console(stderr=True).status("Planner, researcher, executor and auditor at work…"):
            result = ask_question(spec.task, store=store, **settings)
    from rar.cli.render import emit_json, print_science

    if as_json:
        emit_json(result.as_dict())
    else:
        print_science(result)
    ctx.exit(0 if result.status in ("completed", "completed_with_warnings") else 1)
