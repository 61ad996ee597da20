"""From a profile to a provider object (providers are imported only when used)."""

from __future__ import annotations

from typing import Any

from rar.errors import ConfigError, MissingAPIKeyError
from rar.llm.profiles import DETECTS_MODEL, Profile
from rar.llm.provider import Provider
from rar.llm.providers.scripted import ScriptedModel
from rar.llm.types import Request


def echo(request: Request) -> str:
    """The offline ``scripted:echo`` model: repeats the last user message."""
    last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    return f"Echo: {last}"


BUILTIN_SCRIPTED = {"echo": echo}


def connect(
    profile: Profile, *, check_key: bool = False, detect_model: bool = True, **options: Any
) -> Provider:
    """The provider a profile describes, with its key resolved from the environment.

    A missing key surfaces at the first call; ``check_key=True`` refuses it now instead.
    Replays connect without a key: served calls never reach the provider.

    An ``openai`` or ``openai-text`` profile with an empty ``model`` asks its server now
    (``GET {base_url}/models``) and uses the first model listed (the provider's ``model``);
    ``detect_model=False`` connects without asking (the model stays unset).
    """
    kind = profile.provider
    if not profile.model and kind not in DETECTS_MODEL:
        raise ConfigError(
            f"profile {profile.name!r} names no model; only {' and '.join(DETECTS_MODEL)} "
            "profiles may leave it empty (it is then asked of the server)"
        )
    if kind == "scripted":
        function = BUILTIN_SCRIPTED.get(profile.model)
        if function is None:
            raise ConfigError(
                f"no built-in scripted model {profile.model!r} (there is: "
                f"{', '.join(sorted(BUILTIN_SCRIPTED))}); build your own with "
                "rar.llm.ScriptedModel([...]) and pass it to the client"
            )
        return ScriptedModel(function, model=profile.model)
    # A provider's conventional key (OPENAI_API_KEY, ...) goes only to that provider's own
    # endpoint: a profile that points somewhere else must name its key explicitly.
    elsewhere = bool(profile.base_url) and not profile.api_key
    try:
        key = None if elsewhere else profile.resolve_key()
    except MissingAPIKeyError:
        if check_key:
            raise
        key = None
    common: dict[str, Any] = {
        "base_url": profile.base_url,
        "api_key": key,
        "key_reference": None if elsewhere else profile.key_reference,
        **options,
    }
    if kind in ("openai", "openai-text"):
        from rar.llm.providers.openai import OpenAIChat, OpenAIText

        if elsewhere:
            common.update(api_key_env="", require_key=False)
        elif profile.key_variables:
            common["api_key_env"] = profile.key_variables[0]
        provider: OpenAIChat | OpenAIText
        if kind == "openai":
            provider = OpenAIChat(profile.model or None, **common)
        else:
            template = profile.template or "chatml"
            provider = OpenAIText(profile.model or None, template=template, **common)
        if not profile.model and detect_model:
            provider.model = provider.detect_model()  # asked once, here, at connect time
        _checked(provider, profile, key, elsewhere, check_key)
        return provider
    if kind == "gemini":
        from rar.llm.providers.gemini import Gemini

        return _checked(Gemini(profile.model, **common), profile, key, elsewhere, check_key)
    if kind == "anthropic":
        from rar.llm.providers.anthropic import Anthropic

        return _checked(Anthropic(profile.model, **common), profile, key, elsewhere, check_key)
    raise ConfigError(f"unknown provider {kind!r}")


def _checked(
    provider: Provider, profile: Profile, key: str | None, elsewhere: bool, check_key: bool
) -> Provider:
    """Refuse now, not at the first call, a provider that will need a key it does not have."""
    from rar.llm.provider import provider_base_url
    from rar.llm.providers.openai import is_local_url

    if check_key and key is None and not elsewhere and profile.key_variables:
        url = provider_base_url(provider) or ""
        if not is_local_url(url):
            raise MissingAPIKeyError(profile.provider, profile.key_variables)
    return provider
