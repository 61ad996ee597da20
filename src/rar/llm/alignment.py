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

A profile that leaves ``model`` empty has its model asked of the server when it connects; the
name found is part of the recorded binding. A replay takes that name from the record and never
asks the server (it need not be running): the comparison with the current environment then
leaves the model out, since the current one would only be known by asking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rar.llm.connect import connect
from rar.llm.profiles import Profile
from rar.llm.provider import provider_base_url

if TYPE_CHECKING:
    from rar.llm.client import _Target
    from rar.runtime.run import Run

CONFIG_KIND = "config"
# recordings made before max_context_length hold its other name, context_length
_PROFILE_FIELDS = (frozenset(Profile.model_fields) | {"context_length"}) - {"api_key"}


def binding(target: _Target, *, detect: bool = True) -> dict[str, Any]:
    """What the record holds about a model: the resolved profile without secrets.

    Connecting asks the server for the model when the profile leaves it empty, so the name
    found is in the binding; ``detect=False`` leaves it out and asks nothing.
    """
    if detect or not target.profile.detects_model:
        provider = target.provider  # connects first: a detected model is then in the profile
    else:
        provider = connect(target.profile, detect_model=False)
    data = target.profile.recorded()
    data["name"] = target.profile.name
    data["base_url"] = provider_base_url(provider)
    return data


def align(run: Run, target: _Target) -> None:
    """Record the target's resolved configuration, or, in a replay, take it from the record."""
    detects = target.profile.detects_model
    current: dict[str, Any] | None = None
    if detects and run.mode != "record":
        # a replay serves the binding from the record: only ask the server if it does not
        recorded = run.effect(CONFIG_KIND, {"model": target.profile.name}, lambda: binding(target))
    else:
        resolved = current = binding(target)
        recorded = run.effect(CONFIG_KIND, {"model": target.profile.name}, lambda: resolved)
    if not run.last_effect_served():
        return
    recorded = _renamed(recorded)
    if current is None:
        current = binding(target, detect=False)
        if "model" in recorded:  # the current model would be known only by asking: not compared
            current["model"] = recorded["model"]
    if recorded == current and not target.profile.detects_model:
        return
    from rar.replay.fields import field_differences

    name = target.profile.name
    differences = field_differences(recorded, current)
    if differences:
        run.note_boundary(
            "configuration",
            [
                {**difference, "field": f"{name}.{difference['field']}".rstrip(".")}
                for difference in differences
            ],
        )
    target.rebind(_recorded_profile(recorded, target.profile, current))


def _renamed(recorded: dict[str, Any]) -> dict[str, Any]:
    """A recorded binding with ``context_length`` (its name before) as ``max_context_length``."""
    if not isinstance(recorded, dict) or "context_length" not in recorded:
        return recorded
    renamed = dict(recorded)
    value = renamed.pop("context_length")
    renamed.setdefault("max_context_length", value)
    return renamed


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
