"""Model profiles: named model configurations, loadable from TOML or built in code.

A profile names a provider and model with its settings (base URL, key reference, sampling,
context length and how prompts are counted against it, prices per million tokens, reasoning
effort and summary) and a category: one of the predefined ``s``, ``m``, ``l``, ``xl``, ``hot``,
``cold``, or any short name of your own (``CUSTOM``, ``prod``), matched without regard to case.
Wherever a model is asked for, RAR accepts a profile name, a category or ``provider:model``
(``openai:gpt-4o-mini``, ``anthropic:claude-sonnet-4-5``, ``gemini:gemini-2.5-flash``,
``scripted:echo``).

An ``openai`` or ``openai-text`` profile may leave ``model`` empty: the model is then asked of
its server (``GET {base_url}/models``, the first one listed) when the client connects, and the
name found is what the run records (a replay uses the recorded name and asks no server).

Profiles are read, later files overriding earlier ones, from:

1. ``$XDG_CONFIG_HOME/rar/profiles.toml`` (default ``~/.config/rar/profiles.toml``): the user's;
2. ``rar.toml`` in the working directory: the project's;
3. any file passed explicitly (``--profiles FILE``, ``Profiles.load(path)``).

::

    [profiles.fast]
    provider = "openai"
    model = "gpt-4o-mini"
    category = "s"
    temperature = 0.2
    api_key = "${OPENAI_API_KEY}"      # a reference; the value is read from the environment
    cost = { input = 0.15, cached_input = 0.075, output = 0.60 }

Keys are only ever references (``${VAR}`` or ``env:VAR``): the manifest records ``env:VAR``,
never a value. A literal key in a profile is refused.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rar.errors import ConfigError, MissingAPIKeyError, ProfileError
from rar.llm.types import Request, Usage

PROVIDERS = ("openai", "openai-text", "gemini", "anthropic", "scripted")
#: The predefined categories (any other short name is a category too).
CATEGORIES = ("s", "m", "l", "xl", "hot", "cold")
#: A category: one of :data:`CATEGORIES` or a short name of your own.
Category = str
_CATEGORY = re.compile(r"[A-Za-z0-9_-]{1,32}")
#: Providers whose profiles may leave ``model`` empty (asked of the server at connect time).
DETECTS_MODEL = ("openai", "openai-text")
_ENV_REF = re.compile(
    r"^(?:\$\{(?P<a>[A-Za-z_][A-Za-z0-9_]*)\}|env:(?P<b>[A-Za-z_][A-Za-z0-9_]*))$"
)
DEFAULT_KEY_ENV = {
    "openai": ["OPENAI_API_KEY"],
    "openai-text": ["OPENAI_API_KEY"],
    "gemini": ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    "anthropic": ["ANTHROPIC_API_KEY"],
    "scripted": [],
}


#: Anthropic's price of a 5-minute prompt-cache write, as a multiple of the input price.
CACHE_WRITE_MULTIPLIER = 1.25


class Cost(BaseModel):
    """Prices in currency units per million tokens.

    ``cached_input`` prices prompt-cache reads (the ``input`` price when 0); ``cache_write_input``
    prices prompt-cache writes (when unset, 1.25 × ``input``: Anthropic's 5-minute cache write;
    its 1-hour writes cost 2 × ``input``, so set it when you use those); ``reasoning`` prices
    reasoning tokens apart from ``output`` when given.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    input: float = 0.0
    cached_input: float = 0.0
    output: float = 0.0
    reasoning: float = 0.0
    cache_write_input: float | None = None

    @property
    def cache_write_price(self) -> float:
        """The price of a prompt-cache write (``cache_write_input``, else 1.25 × ``input``)."""
        if self.cache_write_input is not None:
            return self.cache_write_input
        return CACHE_WRITE_MULTIPLIER * self.input

    def of(self, usage: Usage) -> float:
        # input_tokens holds the whole prompt: cache reads and writes are billed at their own
        # prices, and only the rest as fresh input
        cache_read, cache_write = usage.cached_input_tokens, usage.cache_write_input_tokens
        fresh_input = max(0, usage.input_tokens - cache_read - cache_write)
        # reasoning tokens are billed within output unless a separate price is given
        output = usage.output_tokens - (usage.reasoning_tokens if self.reasoning else 0)
        return (
            fresh_input * self.input
            + cache_read * (self.cached_input or self.input)
            + cache_write * self.cache_write_price
            + max(0, output) * self.output
            + usage.reasoning_tokens * self.reasoning
        ) / 1_000_000


def _invalid(profile: Any, field: str, message: str) -> ProfileError:
    """A :class:`ProfileError` raised from a validator (pydantic passes it through as it is);
    :meth:`Profiles.read` adds the file to it."""
    name = profile if isinstance(profile, str) else None
    error = ProfileError(message, profile=name, field=field)
    error.reason = message  # type: ignore[attr-defined]
    return error


class Profile(BaseModel):
    """A named model configuration (see the module's documentation and docs/models.md).

    ``context_length`` is accepted as another name of ``max_context_length`` (reading it works
    too); given both, they must agree.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    provider: str
    model: str = Field(default="", description="empty: asked of the server (openai, openai-text)")
    category: Category | None = Field(default=None, description="s, m, l, xl, hot, cold, or own")
    base_url: str | None = None
    api_key: str | None = Field(default=None, description="${VAR} or env:VAR, never a value")
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    max_context_length: int | None = Field(
        default=None, gt=0, description="prompt + max_tokens may not exceed it"
    )
    token_encoding: str | None = Field(
        default=None, description="cl100k_base, o200k_base or none (4 characters a token)"
    )
    context_overflow: Literal["error", "trim"] = Field(
        default="error", description="past max_context_length: refuse, or drop the oldest turns"
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    reasoning_summary: Literal["auto", "concise", "detailed"] | None = None
    template: str | None = Field(default=None, description="prompt template (openai-text)")
    cost: Cost = Cost()

    @model_validator(mode="before")
    @classmethod
    def _context_length_alias(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "context_length" not in data:
            return data
        data = dict(data)
        alias = data.pop("context_length")
        given = data.get("max_context_length")
        if alias is not None and given is not None and alias != given:
            raise _invalid(
                data.get("name"),
                "max_context_length",
                f"context_length ({alias}) and max_context_length ({given}) disagree; they are "
                "two names of one setting: give one",
            )
        if given is None:
            data["max_context_length"] = alias
        return data

    @model_validator(mode="after")
    def _a_model_or_a_server_to_ask(self) -> Profile:
        if not self.model and self.provider not in DETECTS_MODEL:
            raise _invalid(
                self.name,
                "model",
                f"no model named; only {' and '.join(DETECTS_MODEL)} profiles may leave it "
                "empty, to ask their server which model it serves",
            )
        return self

    @field_validator("category")
    @classmethod
    def _short_category(cls, value: str | None) -> str | None:
        if value is not None and not _CATEGORY.fullmatch(value):
            raise ValueError(
                "a category is a short name: 1 to 32 letters, digits, '_' or '-' "
                f"(predefined: {', '.join(CATEGORIES)}; or your own, such as CUSTOM)"
            )
        return value

    @field_validator("token_encoding")
    @classmethod
    def _known_encoding(cls, value: str | None) -> str | None:
        from rar.llm.tokens import check_encoding

        if value is not None:
            try:
                check_encoding(value)
            except ConfigError as exc:
                raise ValueError(exc.message) from None
        return value

    @field_validator("template")
    @classmethod
    def _known_template(cls, value: str | None) -> str | None:
        if not value:
            return None  # lm-lib writes an empty template for chat completion
        from rar.llm.providers.templates import template_name

        try:
            template_name(value)
        except ConfigError as exc:
            raise ValueError(exc.message) from None
        return value

    @property
    def context_length(self) -> int | None:
        """The other name of :attr:`max_context_length`."""
        return self.max_context_length

    @property
    def short_name(self) -> str | None:
        """The category in capitals (``M``, ``CUSTOM``), as flows draw it; None without one."""
        return self.category.upper() if self.category else None

    @property
    def detects_model(self) -> bool:
        """Whether the model is asked of the server at connect time (``model`` left empty)."""
        return not self.model and self.provider in DETECTS_MODEL

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDERS:
            raise ValueError(f"unknown provider {value!r}; known: {', '.join(PROVIDERS)}")
        return value

    @field_validator("api_key")
    @classmethod
    def _reference_only(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_REF.match(value):
            raise ValueError(
                "must reference an environment variable as ${NAME} or env:NAME; "
                "keys are never written in profiles"
            )
        return value

    @property
    def key_variables(self) -> list[str]:
        if self.api_key:
            match = _ENV_REF.match(self.api_key)
            assert match is not None
            return [match.group("a") or match.group("b")]
        return list(DEFAULT_KEY_ENV.get(self.provider, []))

    @property
    def key_reference(self) -> str | None:
        names = self.key_variables
        return f"env:{names[0]}" if names else None

    def resolve_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key's value from the environment (None when the provider needs none)."""
        environ = os.environ if environ is None else environ
        names = self.key_variables
        for name in names:
            if environ.get(name):
                return environ[name]
        if self.api_key:  # an explicit reference that is not set is always an error
            raise MissingAPIKeyError(self.provider, names)
        return None

    def recorded(self) -> dict[str, Any]:
        """What a run's manifest holds about this profile: everything but secrets."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        data.pop("api_key", None)
        if self.key_reference:
            data["key"] = self.key_reference
        return data

    def apply(self, request: Request) -> Request:
        """Fill the request's unset sampling fields from the profile."""
        updates: dict[str, Any] = {}
        fields = ("temperature", "top_p", "max_tokens", "reasoning_effort", "reasoning_summary")
        for field in fields:
            if getattr(request, field) is None and getattr(self, field) is not None:
                updates[field] = getattr(self, field)
        return request.model_copy(update=updates) if updates else request


class Profiles:
    """A set of profiles by name, with lookup by category."""

    def __init__(self, profiles: Iterable[Profile] = ()) -> None:
        self._by_name: dict[str, Profile] = {}
        self.default: str | None = None
        for profile in profiles:
            self.add(profile)

    def add(self, profile: Profile) -> None:
        self._by_name[profile.name] = profile

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Any:
        return iter(self._by_name.values())

    def get(self, name: str) -> Profile:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name)) or "none defined"
            raise ConfigError(
                f"unknown model or profile {name!r}: give provider:model (e.g. "
                f"openai:gpt-4o-mini, scripted:echo) or a profile name ({known})"
            ) from None

    def category(self, category: str) -> list[Profile]:
        """The profiles of ``category`` (predefined or your own), in the order they were read;
        case does not matter (``m`` and ``M``, ``custom`` and ``CUSTOM`` are one category)."""
        wanted = category.strip().lower()
        return [p for p in self._by_name.values() if p.category and p.category.lower() == wanted]

    def resolve(self, spec: str) -> Profile:
        """A profile from a profile name, a category or ``provider:model``."""
        spec = spec.strip()
        if spec in self._by_name:
            return self._by_name[spec]
        provider, sep, model = spec.partition(":")
        if sep and provider in PROVIDERS and model:
            return Profile(name=spec, provider=provider, model=model)
        if sep and provider not in PROVIDERS:
            raise ConfigError(
                f"unknown provider {provider!r} in {spec!r}; known: {', '.join(PROVIDERS)}"
            )
        in_category = self.category(spec)
        if in_category:
            return in_category[0]
        return self.get(spec)

    @classmethod
    def load(cls, *paths: Path, defaults: bool = True) -> Profiles:
        """Profiles from the user's and the project's files (when ``defaults``) and ``paths``."""
        profiles = cls()
        files = [*default_profile_files(), *paths] if defaults else list(paths)
        for path in files:
            if path.is_file():
                profiles.read(path)
            elif path in paths:
                raise ProfileError("no such file", path=path)
        return profiles

    def read(self, path: Path) -> None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ProfileError(f"not valid TOML: {exc}", path=path) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ProfileError(f"cannot read: {exc}", path=path) from exc
        unknown = set(data) - {"profiles", "default"}
        if unknown:
            raise ProfileError(
                f"unknown top-level key(s) {sorted(unknown)}; expected [profiles.NAME] tables",
                path=path,
            )
        tables = data.get("profiles", {})
        if not isinstance(tables, dict):
            raise ProfileError("[profiles] must be a table of tables", path=path)
        for name, table in tables.items():
            if not isinstance(table, dict):
                raise ProfileError("must be a table", path=path, profile=name)
            try:
                self.add(Profile.model_validate({"name": name, **table}))
            except ProfileError as exc:  # from a validator: add the file
                reason = getattr(exc, "reason", exc.message)
                raise ProfileError(
                    reason, path=path, profile=name, field=exc.details.get("field")
                ) from None
            except ValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(part) for part in first["loc"]) or None
                raise ProfileError(first["msg"], path=path, profile=name, field=field) from None
        if "default" in data:
            self.default = str(data["default"])


def default_profile_files() -> list[Path]:
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [config / "rar" / "profiles.toml", Path("rar.toml")]
