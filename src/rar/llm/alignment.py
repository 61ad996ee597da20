"""Configuration alignment: a model's settings come from the record, credentials from the shell.

Which endpoint a model name reaches depends on where the code runs: ``OPENAI_BASE_URL``, the
profile files of the user and of the project, a default. A replay that re-resolved
``openai:gpt-4o-mini`` from the current shell would ask another endpoint than the one recorded
and call the run non-reproducible because of the shell, not the code.

So resolving a model is an effect like any other (kind ``config``): in a recording, the
resolved binding — provider, model, base URL, template, sampling values, prices, the *name* of
the key variable — is recorded; in a replay it is served from the record and the client
connects to exactly what was recorded. Only the credential comes from the current environment,
and only when the current configuration would send it to that same endpoint: a key is never
sent to a URL that came out of a record (a record can come from anyone). A strict replay serves
every model call and needs no key at all.

Where the current environment would resolve the model differently, the difference is noted in
the replay report's ``boundary`` (``configuration``); it never changes the verdict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rar.llm.profiles import Profile
from rar.llm.provider import provider_base_url

if TYPE_CHECKING:
    from rar.llm.client import _Target
    from rar.runtime.run import Run

CONFIG_KIND = "config"
_PROFILE_FIELDS = frozenset(Profile.model_fields) - {"api_key"}


def binding(target: _Target) -> dict[str, Any]:
    """What the record holds about a model: the resolved profile without secrets."""
    data = target.profile.recorded()
    data["name"] = target.profile.name
    data["base_url"] = provider_base_url(target.provider)
    return data


def align(run: Run, target: _Target) -> None:
    """Record the target's resolved configuration, or, in a replay, take it from the record."""
    current = binding(target)
    recorded = run.effect(CONFIG_KIND, {"model": target.profile.name}, lambda: current)
    if not run.last_effect_served() or recorded == current:
        return
    from rar.replay.fields import field_differences

    name = target.profile.name
    run.note_boundary(
        "configuration",
        [
            {**difference, "field": f"{name}.{difference['field']}".rstrip(".")}
            for difference in field_differences(recorded, current)
        ],
    )
    target.rebind(_recorded_profile(recorded, target.profile, current))


def _recorded_profile(
    recorded: dict[str, Any], current_profile: Profile, current: dict[str, Any]
) -> Profile:
    values = {key: value for key, value in recorded.items() if key in _PROFILE_FIELDS}
    if recorded.get("base_url") == current.get("base_url"):
        # the same endpoint: the current profile's key (and how it finds its URL) still applies
        values["base_url"] = current_profile.base_url
        values["api_key"] = current_profile.api_key
    # else: the recorded endpoint with no key; connect() sends none to a URL it was not meant for
    return Profile.model_validate(values)
