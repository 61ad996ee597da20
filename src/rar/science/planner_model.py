"""Which model plans a science run, and how hard it thinks: chosen by the mode, overridable.

========== ============================== ================
mode       ``--model auto`` picks          thinking level
========== ============================== ================
owl_lite   a profile of category ``s``     ``minimal``
owl_dl     category ``l``, else ``xl``,    ``high``
           else ``m``
owl_full   as owl_dl                       ``high``
========== ============================== ================

The mode's thinking level is sent only to a model that takes one (:func:`takes_reasoning`:
OpenAI's o-series and gpt-5, Gemini 2.5 and later, Claude 3.7 and 4, or a profile that sets a
``reasoning_effort``); other models get ``off`` and the record says so. A level asked for
explicitly (``--thinking``) is always sent. The thinking level is sent to the planner model as
the request's ``reasoning_effort`` (each
provider maps it: OpenAI's ``reasoning_effort``, Gemini's ``thinkingConfig``, Anthropic's
``thinking`` budget), replacing any ``reasoning_effort`` of the profile. ``off`` sends none, for
models that take no reasoning setting (OpenAI's gpt-4o family, for one, refuses it). The offline
rule-based planner records the level and ignores it.

``auto`` is resolved once, before the run is recorded, against the user's profiles (see
:mod:`rar.llm.profiles`): the first profile of the wanted category, in the order the files
define them. The run records the profile's name, so a replay connects to the same binding.
"""

from __future__ import annotations

from typing import Literal, cast, get_args

from rar.errors import ConfigError
from rar.llm.profiles import Profile, Profiles, default_profile_files

ThinkingLevel = Literal["minimal", "low", "medium", "high", "off"]
THINKING_LEVELS: tuple[str, ...] = get_args(ThinkingLevel)
AUTO = "auto"
MODE_THINKING: dict[str, ThinkingLevel] = {
    "owl_lite": "minimal",
    "owl_dl": "high",
    "owl_full": "high",
}
MODE_CATEGORIES: dict[str, tuple[str, ...]] = {
    "owl_lite": ("s",),
    "owl_dl": ("l", "xl", "m"),
    "owl_full": ("l", "xl", "m"),
}
_CATEGORY_WORDS = {"s": "small and fast", "m": "medium", "l": "large", "xl": "extra large"}
_EXAMPLE = {
    "s": ("fast", "gemini", "gemini-2.5-flash", "GEMINI_API_KEY"),
    "l": ("large", "gemini", "gemini-2.5-pro", "GEMINI_API_KEY"),
}


def default_thinking(mode: str) -> ThinkingLevel:
    """The thinking level a mode gives its planner when none is asked for."""
    return MODE_THINKING.get(mode, "minimal")


def check_thinking(thinking: str) -> ThinkingLevel:
    """``thinking`` if it is a thinking level, else a :class:`ConfigError` naming the levels."""
    if thinking not in THINKING_LEVELS:
        raise ConfigError(
            f"unknown thinking level {thinking!r}; choose one of {', '.join(THINKING_LEVELS)}"
        )
    return cast(ThinkingLevel, thinking)


# model families that take a reasoning setting; others (OpenAI's gpt-4o, gpt-4.1) refuse it
_REASONING_FAMILIES: dict[str, tuple[str, ...]] = {
    "openai": ("o1", "o3", "o4", "gpt-5"),
    "openai-text": ("o1", "o3", "o4", "gpt-5"),
    "gemini": ("gemini-2.5", "gemini-3"),
    "anthropic": ("claude-3-7", "claude-opus-4", "claude-sonnet-4", "claude-haiku-4",
                  "claude-4"),
    "scripted": ("",),
}


def takes_reasoning(profile: Profile) -> bool:
    """Whether the mode's thinking level may be sent to this model unasked: its profile sets a
    reasoning effort itself, or its family is one that reasons. An explicit ``--thinking`` is
    always sent."""
    if profile.reasoning_effort is not None:
        return True
    families = _REASONING_FAMILIES.get(profile.provider, ())
    return any(profile.model.startswith(prefix) for prefix in families)


def reasoning_effort(thinking: str | None) -> str | None:
    """The ``reasoning_effort`` a thinking level sends (None for ``off`` or no level)."""
    return None if thinking in (None, "off") else thinking


def auto_profile(mode: str, profiles: Profiles) -> Profile:
    """The profile ``--model auto`` picks for ``mode``: the first of the mode's categories that
    one of ``profiles`` has. A :class:`ConfigError` says which category is missing and how to
    add a profile of it."""
    wanted = MODE_CATEGORIES.get(mode, ("s",))
    for category in wanted:
        found = profiles.category(category)
        if found:
            return found[0]
    first = wanted[0]
    rest = "".join(f", else {c!r}" for c in wanted[1:])
    which = "any of these categories" if rest else "that category"
    name, provider, model, key = _EXAMPLE.get(first, _EXAMPLE["l"])
    where = default_profile_files()[0]
    raise ConfigError(
        f"--model auto in {mode} picks a profile of category {first!r} "
        f"({_CATEGORY_WORDS.get(first, first)}){rest}, and none of your profiles has "
        f"{which}. Add one to {where} (or to rar.toml here), e.g. [profiles.{name}] with "
        f'provider = "{provider}", model = "{model}", category = "{first}", '
        f'api_key = "${{{key}}}" on lines of their own; or give --model provider:model'
    )
