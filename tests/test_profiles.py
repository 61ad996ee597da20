"""Model profiles: TOML files, references to keys, categories, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rar.errors import ConfigError, MissingAPIKeyError, ProfileError
from rar.llm import Message, Request, Usage
from rar.llm.profiles import Cost, Profile, Profiles

GOOD = """
default = "fast"

[profiles.fast]
provider = "openai"
model = "gpt-4o-mini"
category = "s"
temperature = 0.2
api_key = "${MY_OPENAI_KEY}"
cost = { input = 0.15, cached_input = 0.075, output = 0.60 }

[profiles.deep]
provider = "anthropic"
model = "claude-sonnet-4-5"
category = "l"
max_tokens = 4096
reasoning_effort = "high"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return path


def test_profiles_load_from_toml_with_categories_and_default(tmp_path: Path) -> None:
    profiles = Profiles.load(write(tmp_path, GOOD), defaults=False)
    fast = profiles.get("fast")
    assert (fast.provider, fast.model, fast.category, fast.temperature) == (
        "openai",
        "gpt-4o-mini",
        "s",
        0.2,
    )
    assert fast.cost == Cost(input=0.15, cached_input=0.075, output=0.60)
    assert [p.name for p in profiles.category("l")] == ["deep"]
    assert profiles.resolve("l").name == "deep"
    assert profiles.default == "fast"


def test_a_key_is_a_reference_resolved_from_the_environment(tmp_path: Path) -> None:
    fast = Profiles.load(write(tmp_path, GOOD), defaults=False).get("fast")
    assert fast.resolve_key({"MY_OPENAI_KEY": "sk-value"}) == "sk-value"
    assert fast.key_reference == "env:MY_OPENAI_KEY"
    recorded = fast.recorded()
    assert recorded["key"] == "env:MY_OPENAI_KEY" and "api_key" not in recorded
    with pytest.raises(MissingAPIKeyError, match="MY_OPENAI_KEY"):
        fast.resolve_key({})


def test_a_literal_key_in_a_profile_is_refused(tmp_path: Path) -> None:
    text = '[profiles.bad]\nprovider = "openai"\nmodel = "m"\napi_key = "sk-abc123"\n'
    with pytest.raises(ProfileError, match="never written in profiles") as info:
        Profiles.load(write(tmp_path, text), defaults=False)
    assert "sk-abc123" not in str(info.value)


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ('provider = "openai"\nmodel = "m"\ntemperature = "hot"', "temperature", "number"),
        ('provider = "openai"\nmodel = "m"\ncolour = "red"', "colour", "Extra inputs"),
        ('provider = "nobody"\nmodel = "m"', "provider", "unknown provider"),
        ('provider = "openai"\nmodel = "m"\ncategory = "very big"', "category", "short name"),
    ],
)
def test_a_wrong_type_or_unknown_field_names_file_profile_and_field(
    tmp_path: Path, body: str, field: str, fragment: str
) -> None:
    path = write(tmp_path, f"[profiles.p1]\n{body}\n")
    with pytest.raises(ProfileError) as info:
        Profiles.load(path, defaults=False)
    message = str(info.value)
    assert str(path) in message and "'p1'" in message and f"'{field}'" in message
    assert fragment in message


def test_invalid_toml_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="not valid TOML"):
        Profiles.load(write(tmp_path, "[profiles.x\n"), defaults=False)


def test_provider_colon_model_works_without_a_profile() -> None:
    profile = Profiles().resolve("gemini:gemini-2.5-flash")
    assert (profile.provider, profile.model) == ("gemini", "gemini-2.5-flash")
    with pytest.raises(ConfigError, match="unknown provider 'nope'"):
        Profiles().resolve("nope:model")
    with pytest.raises(ConfigError, match="unknown model or profile 'mystery'"):
        Profiles().resolve("mystery")


def test_the_default_key_variables_follow_the_provider_conventions() -> None:
    assert Profile(name="g", provider="gemini", model="m").key_variables == [
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
    ]
    gemini = Profile(name="g", provider="gemini", model="m")
    assert gemini.resolve_key({"GOOGLE_API_KEY": "AIza-k"}) == "AIza-k"
    assert Profile(name="a", provider="anthropic", model="m").key_reference == (
        "env:ANTHROPIC_API_KEY"
    )


def test_profile_defaults_fill_unset_request_fields_only() -> None:
    profile = Profile(name="p", provider="scripted", model="echo", temperature=0.1, max_tokens=100)
    request = Request(model="echo", messages=(Message.user("x"),), temperature=0.9)
    applied = profile.apply(request)
    assert applied.temperature == 0.9 and applied.max_tokens == 100


def test_cost_counts_cached_and_reasoning_tokens_at_their_prices() -> None:
    cost = Cost(input=1.0, cached_input=0.5, output=2.0, reasoning=3.0)
    usage = Usage(
        input_tokens=1_000_000,
        cached_input_tokens=400_000,
        output_tokens=500_000,
        reasoning_tokens=100_000,
    )
    assert cost.of(usage) == pytest.approx(0.6 + 0.2 + 0.8 + 0.3)


def test_cache_writes_cost_a_quarter_more_than_input_unless_priced() -> None:
    usage = Usage(
        input_tokens=1_000_000, cached_input_tokens=200_000, cache_write_input_tokens=300_000
    )
    fresh, read, written = 0.5, 0.2 * 0.1, 0.3 * 1.25
    assert Cost(input=1.0, cached_input=0.1).of(usage) == pytest.approx(fresh + read + written)
    priced = Cost(input=1.0, cached_input=0.1, cache_write_input=2.0)
    assert priced.of(usage) == pytest.approx(fresh + read + 0.3 * 2.0)


def test_cache_write_price_is_read_from_a_profile_file(tmp_path: Path) -> None:
    path = tmp_path / "rar.toml"
    path.write_text(
        '[profiles.claude]\nprovider = "anthropic"\nmodel = "claude-sonnet-4-5"\n'
        "cost = { input = 3.0, cached_input = 0.3, output = 15.0, cache_write_input = 6.0 }\n"
    )
    cost = Profiles.load(path, defaults=False).get("claude").cost
    assert cost.cache_write_input == 6.0 and Cost(input=3.0).cache_write_price == 3.75


def test_usage_recorded_before_cache_writes_were_counted_still_loads() -> None:
    old = {"input_tokens": 10, "cached_input_tokens": 2, "output_tokens": 3}
    usage = Usage.model_validate(old)
    assert usage.cache_write_input_tokens == 0
    assert usage.plain() == old  # and it records exactly as before
    assert (usage + Usage(cache_write_input_tokens=4)).cache_write_input_tokens == 4


def test_project_and_user_files_are_read_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    (config / "rar").mkdir(parents=True)
    (config / "rar" / "profiles.toml").write_text(
        '[profiles.p]\nprovider = "openai"\nmodel = "user-model"\n'
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "rar.toml").write_text('[profiles.p]\nprovider = "openai"\nmodel = "project"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.chdir(project)
    assert Profiles.load().get("p").model == "project"
