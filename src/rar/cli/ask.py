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


def ask_entry(
    run: Any,
    prompt: str,
    profile: dict[str, Any],
    system: str | None = None,
    tools: bool = False,
    max_steps: int = 6,
    cache: bool = True,
) -> dict[str, str]:
    """The entrypoint of a ``rar ask`` run (so that ``rar replay`` can re-create it)."""
    from rar.llm.client import Client
    from rar.llm.profiles import Profile, Profiles
    from rar.loop import Agent
    from rar.tools import default_tools

    client = Client(Profile.model_validate(profile), run=run, profiles=Profiles(), cache=cache)
    if tools:
        result = Agent(client, default_tools(), max_steps=max_steps, system_prompt=system).run(
            prompt, run=run
        )
        if result.error:
            raise _provider_failed(result)
        return {"text": result.text, "stop_reason": result.stop_reason.value}
    response = client.complete(build_request(client, prompt, system, []))
    return {"text": response.content or "", "stop_reason": "completed"}


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
    from rar.llm.client import Client
    from rar.replay.engine import execute
    from rar.tools import default_tools

    if not prompt.strip():
        raise ConfigError("the prompt is empty; give the question to ask, e.g. rar ask 'Hi'")
    profiles, profile = resolve_profile(model, profiles_file)
    Client(profile, profiles=profiles, cache=False).connect()  # a missing key fails here
    tools = [{"name": t.name, "version": t.version} for t in default_tools()] if use_tools else []
    run = execute(
        ask_entry,
        inputs={
            "prompt": prompt,
            "profile": profile.model_dump(mode="json", exclude_defaults=True),
            "system": system,
            "tools": use_tools,
            "max_steps": max_steps,
            "cache": cache,
        },
        goal=prompt,
        store=store,
        models=[profile.recorded()],
        tools=tools,
        secrets=[profile.key_reference] if profile.key_reference else [],
        config={"command": "ask"},
        tags={"kind": "ask"},
    )
    manifest = run.manifest
    stats = manifest.stats.get("llm", {})
    result = run.store.resolve_payload(run.store.events(run.id)[-1].get("result")) or {}
    calls = int(stats.get("calls", 0))
    return {
        "run_id": run.id,
        "text": result.get("text", ""),
        "model": f"{profile.provider}:{profile.model}",
        "usage": {
            name: int(stats.get(name, 0))
            for name in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
        },
        "cost": round(float(stats.get("cost", 0.0)), 8),
        "cached": bool(calls) and int(stats.get("cached_calls", 0)) == calls,
        "calls": calls,
        "stop_reason": result.get("stop_reason", ""),
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
