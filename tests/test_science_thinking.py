"""Modes choose the planner's thinking level and, with ``--model auto``, its model; both are
overridable, recorded in the run, and the level reaches the provider as ``reasoning_effort``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.errors import ConfigError
from rar.replay import replay
from rar.science import ask_question
from rar.science import protocol as p
from rar.science.planner_model import THINKING_LEVELS
from rar.store.store import Store

QUESTION = "Why do narrow temperature ranges make Arrhenius estimates uncertain?"


def _script(server: Any) -> None:
    from servers.openai_server import Answer, Call

    finalize = {"answer_markdown": "A narrow range makes the slope uncertain.", "confidence": 0.6}
    server.script(
        Answer(tool_calls=[Call("c1", p.DELEGATE_RESEARCH, '{"query": "narrow range", "k": 3}')]),
        Answer(tool_calls=[Call("c2", p.FINALIZE, orjson.dumps(finalize).decode())]),
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No profile of the user or of the project but the ones a test writes."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def server(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from servers.openai_server import OpenAIServer

    with OpenAIServer() as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "t" * 24)
        yield running


def _profiles(home: Path, server: Any, *tables: tuple[str, str, str]) -> None:
    path = home / "config" / "rar" / "profiles.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            f'[profiles.{name}]\nprovider = "openai"\nmodel = "{model}"\n'
            f'category = "{category}"\nbase_url = "{server.base_url}"\n\n'
            for name, model, category in tables
        )
    )


def _efforts(server: Any) -> list[Any]:
    return [received.body.get("reasoning_effort") for received in server.received]


def _config(store_path: Path, run_id: str) -> dict[str, Any]:
    return dict(Store(store_path).manifest(run_id).config)


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


# --- thinking -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "level"), [("owl_lite", "minimal"), ("owl_dl", "high")])
def test_the_mode_sets_the_thinking_level_sent_as_reasoning_effort(
    server: Any, store_path: Path, mode: str, level: str
) -> None:
    _script(server)
    result = ask_question(QUESTION, mode=mode, model="openai:o4-mini", store=store_path)
    assert _efforts(server) == [level, level]
    manifest = Store(store_path).manifest(result.run_id)
    assert manifest.config["thinking"] == level
    assert manifest.inputs["thinking"].value == level
    assert manifest.models == [
        {"provider": "openai", "model": "o4-mini", "reasoning_effort": level}
    ]


def test_a_model_that_takes_no_reasoning_setting_gets_none_unless_asked(
    server: Any, store_path: Path
) -> None:
    """gpt-4o-class models refuse reasoning_effort: the mode's level is not sent (and the record
    says why); an explicit --thinking is."""
    _script(server)
    result = ask_question(QUESTION, mode="owl_dl", model="openai:gpt-test", store=store_path)
    assert _efforts(server) == [None, None]
    config = Store(store_path).manifest(result.run_id).config
    assert config["thinking"] == "off" and "takes no reasoning setting" in config[
        "thinking_not_sent"
    ]
    _script(server)
    ask_question(QUESTION, mode="owl_dl", model="openai:gpt-test", thinking="low",
                 store=store_path)  # fmt: skip
    assert _efforts(server)[-2:] == ["low", "low"]


def test_thinking_overrides_the_mode_on_the_command_line(server: Any, store_path: Path) -> None:
    _script(server)
    code, out, err = rar(
        store_path, "run", QUESTION, "--mode", "owl_dl", "--model", "openai:gpt-test",
        "--thinking", "low", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert _efforts(server) == ["low", "low"]
    assert _config(store_path, orjson.loads(out)["run_id"])["thinking"] == "low"


def test_thinking_off_sends_no_reasoning_setting(server: Any, store_path: Path) -> None:
    _script(server)
    result = ask_question(QUESTION, model="openai:gpt-test", thinking="off", store=store_path)
    assert all("reasoning_effort" not in received.body for received in server.received)
    assert _config(store_path, result.run_id)["thinking"] == "off"


def test_a_run_with_a_thinking_level_replays_reproducible(server: Any, store_path: Path) -> None:
    _script(server)
    result = ask_question(QUESTION, model="openai:gpt-test", thinking="medium", store=store_path)
    sent = len(server.received)
    report = replay(result.run_id, store=store_path)
    assert report.replay_status == "reproducible" and report.live == 0
    assert len(server.received) == sent


def test_the_rule_based_planner_records_the_level_and_sends_none(store: Store) -> None:
    result = ask_question(QUESTION, mode="owl_full", store=store)
    assert store.manifest(result.run_id).config["thinking"] == "high"
    requests = [
        store.resolve_payload(e["request"])
        for e in store.events(result.run_id)
        if e.get("kind") == "llm"
    ]
    assert requests and all("reasoning_effort" not in r["request"] for r in requests)


def test_an_unknown_thinking_level_is_refused_before_recording(store: Store) -> None:
    with pytest.raises(ConfigError, match=r"unknown thinking level 'max'.*minimal, low"):
        ask_question(QUESTION, thinking="max", store=store)
    assert store.run_ids() == []


def test_the_command_line_offers_every_thinking_level() -> None:
    from rar.cli.run_cmd import THINKING_LEVELS as OFFERED

    assert OFFERED == THINKING_LEVELS


def test_a_spec_gives_the_thinking_level_under_the_papers_key_names(
    server: Any, store_path: Path, home: Path
) -> None:
    _script(server)
    spec = home / "task.yaml"
    spec.write_text(
        f"task_description: {QUESTION}\nmode: owl_dl\nmodel: openai:gpt-test\n"
        "thinking_level: medium\ncorpus_path: demo\n"
    )
    code, out, err = rar(store_path, "run", "--spec", str(spec), "--json")
    assert code == 0, err
    assert _efforts(server) == ["medium", "medium"]
    assert _config(store_path, orjson.loads(out)["run_id"])["mode"] == "owl_dl"


# --- auto ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "picked"),
    [("owl_lite", "fast"), ("owl_dl", "big"), ("owl_full", "big")],
)
def test_auto_picks_the_profile_of_the_modes_category(
    server: Any, store_path: Path, home: Path, mode: str, picked: str
) -> None:
    _profiles(home, server, ("medium", "gpt-m", "m"), ("fast", "gpt-s", "s"), ("big", "gpt-l", "l"))
    _script(server)
    result = ask_question(QUESTION, mode=mode, model="auto", store=store_path)
    model = {"fast": "gpt-s", "big": "gpt-l"}[picked]
    assert [received.body["model"] for received in server.received] == [model, model]
    config = _config(store_path, result.run_id)
    assert config["model"] == picked and config["model_requested"] == "auto"
    manifest = Store(store_path).manifest(result.run_id)
    assert manifest.inputs["model"].value == picked
    assert manifest.models[0]["profile"] == picked


def test_auto_falls_back_from_l_to_xl_then_m(server: Any, store_path: Path, home: Path) -> None:
    _profiles(home, server, ("medium", "gpt-m", "m"), ("huge", "gpt-xl", "xl"))
    _script(server)
    result = ask_question(QUESTION, mode="owl_dl", model="auto", store=store_path)
    assert server.received[0].body["model"] == "gpt-xl"
    assert _config(store_path, result.run_id)["model_category"] == "xl"


def test_auto_without_a_profile_of_the_category_says_which_and_how_to_add_one(
    server: Any, store_path: Path, home: Path
) -> None:
    _profiles(home, server, ("big", "gpt-l", "l"))
    code, _out, err = rar(store_path, "run", QUESTION, "--model", "auto")
    assert code == 2
    assert "category 's'" in err and "[profiles." in err and "profiles.toml" in err
    assert server.received == []
    _script(server)
    code, _out, err = rar(store_path, "run", QUESTION, "--model", "auto", "--mode", "owl_full")
    assert code == 0, err  # owl_full wants l: there is one
    assert [received.body["model"] for received in server.received] == ["gpt-l", "gpt-l"]
