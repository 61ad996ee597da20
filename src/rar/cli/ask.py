"""``rar ask`` and ``rar cache explain``: one recorded model call (or a short tool loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rar.errors import ConfigError


def resolve_profile(model: str | None, profiles_file: Path | None) -> Any:
    from rar.llm.profiles import Profiles

    profiles = Profiles.load(*([profiles_file] if profiles_file else []))
    spec = model or profiles.default or "scripted:echo"
    return profiles, profiles.resolve(spec)


def build_request(client: Any, prompt: str, system: str | None, tools: list[Any]) -> Any:
    from rar.llm import Message

    messages = ([Message.system(system)] if system else []) + [Message.user(prompt)]
    return client.request(messages=messages, tools=tuple(tools))


def ask(
    store: Any,
    prompt: str,
    *,
    model: str | None,
    system: str | None,
    use_tools: bool,
    max_steps: int,
    profiles_file: Path | None,
    cache: bool,
) -> dict[str, Any]:
    """Record a run that asks ``prompt``; return the JSON summary ``rar ask --json`` prints."""
    from rar.agent import Agent
    from rar.llm.client import Client
    from rar.runtime.run import record
    from rar.tools import default_tools

    if not prompt.strip():
        raise ConfigError("the prompt is empty; give the question to ask, e.g. rar ask 'Hi'")
    profiles, profile = resolve_profile(model, profiles_file)
    registry = default_tools() if use_tools else None
    client = Client(profile, store=store, profiles=profiles, cache=cache).connect()
    run = record(
        prompt,
        store=store,
        models=[profile.recorded()],
        tools=[{"name": t.name, "version": t.version} for t in registry] if registry else [],
        secrets=[profile.key_reference] if profile.key_reference else [],
        config={"command": "ask", "tools": use_tools, "max_steps": max_steps},
        tags={"kind": "ask"},
    )
    with run:
        client.run = run
        if registry is not None:
            result = Agent(client, registry, max_steps=max_steps, system_prompt=system).run(
                prompt, run=run
            )
            text, stop = result.text, result.stop_reason.value
            if result.error:
                raise _provider_failed(result)
        else:
            response = client.complete(build_request(client, prompt, system, []))
            text, stop = response.content or "", "completed"
        run.finish(result={"text": text, "stop_reason": stop})
    stats = client.stats
    return {
        "run_id": run.id,
        "text": text,
        "model": f"{profile.provider}:{profile.model}",
        "usage": stats.usage.model_dump(),
        "cost": round(stats.cost, 8),
        "cached": bool(stats.calls) and stats.cached_calls == stats.calls,
        "calls": stats.calls,
        "stop_reason": stop,
    }


def _provider_failed(result: Any) -> Exception:
    from rar.errors import RunError

    return RunError(f"the model call failed: {result.error['message']}")


def print_answer(summary: dict[str, Any], *, as_json: bool) -> None:
    from rar.cli.render import emit_json

    if as_json:
        emit_json(summary)
        return
    click.echo(summary["text"])
    usage = summary["usage"]
    source = "from the cache" if summary["cached"] else f"{summary['calls']} call(s)"
    short = summary["run_id"].rsplit("-", 1)[-1]
    click.echo(
        click.style(
            f"\n{summary['model']} · {usage['input_tokens']} in / {usage['output_tokens']} out "
            f"tokens · {source} · run {short} (rar show {short})",
            dim=True,
        ),
        err=True,
    )


def explain(
    store: Any, prompt: str, *, model: str | None, system: str | None, profiles_file: Path | None
) -> dict[str, Any]:
    from rar.llm.cache import ResponseCache
    from rar.llm.client import Client

    profiles, profile = resolve_profile(model, profiles_file)
    client = Client(profile, profiles=profiles, cache=False)
    payload = client.targets[0].payload(build_request(client, prompt, system, []))
    return ResponseCache(store).explain(payload).as_dict()
