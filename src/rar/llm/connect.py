"""From a profile to a provider object (providers are imported only when used)."""

from __future__ import annotations

from typing import Any

from rar.errors import ConfigError
from rar.llm.profiles import Profile
from rar.llm.provider import Provider
from rar.llm.providers.scripted import ScriptedModel
from rar.llm.types import Request


def echo(request: Request) -> str:
    """The offline ``scripted:echo`` model: repeats the last user message."""
    last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    return f"Echo: {last}"


BUILTIN_SCRIPTED = {"echo": echo}


def connect(profile: Profile, **options: Any) -> Provider:
    """The provider a profile describes, with its key resolved from the environment."""
    kind = profile.provider
    if kind == "scripted":
        function = BUILTIN_SCRIPTED.get(profile.model)
        if function is None:
            raise ConfigError(
                f"no built-in scripted model {profile.model!r} (there is: "
                f"{', '.join(sorted(BUILTIN_SCRIPTED))}); build your own with "
                "rar.llm.ScriptedModel([...]) and pass it to the client"
            )
        return ScriptedModel(function, model=profile.model)
    key = profile.resolve_key()
    common: dict[str, Any] = {"base_url": profile.base_url, "api_key": key, **options}
    if kind == "openai":
        from rar.llm.providers.openai import OpenAIChat

        return OpenAIChat(profile.model, **common)
    if kind == "openai-text":
        from rar.llm.providers.openai import OpenAIText

        return OpenAIText(profile.model, template=profile.template or "chatml", **common)
    if kind == "gemini":
        from rar.llm.providers.gemini import Gemini

        return Gemini(profile.model, **common)  # type: ignore[no-any-return]
    if kind == "anthropic":
        from rar.llm.providers.anthropic import Anthropic

        return Anthropic(profile.model, **common)  # type: ignore[no-any-return]
    raise ConfigError(f"unknown provider {kind!r}")
