"""`rar show RUN --trace`: every event as a trace entry with the RAR paper's fields, derived
from the record; `deterministic` tells live model calls from what would come out the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.export.trace import TraceEntry, trace_entries
from rar.hashing import digest_value
from rar.redaction import Redactor
from rar.replay import replay
from rar.runtime.start import record
from rar.science import ask_question
from rar.science import protocol as p
from rar.store.store import Store

QUESTION = "Why do narrow temperature ranges make Arrhenius estimates uncertain?"
FIELDS = [
    "run_id", "step_id", "timestamp", "event_type", "span", "agent_id", "agent_role",
    "performative", "sender", "receivers", "message_id", "conversation_id", "protocol",
    "tool_name", "model", "thinking_level", "cache_key", "response_hash", "input_hash",
    "output_hash", "latency_ms", "deterministic",
]  # fmt: skip


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def by_type(entries: list[Any], event_type: str) -> list[Any]:
    return [e for e in entries if _get(e, "event_type") == event_type]


def _get(entry: Any, name: str) -> Any:
    return entry[name] if isinstance(entry, dict) else getattr(entry, name)


@pytest.fixture
def offline_run(store: Store) -> str:
    return ask_question(QUESTION, mode="owl_dl", store=store).run_id


def test_trace_json_is_one_line_per_event_with_every_field(
    store: Store, store_path: Path, offline_run: str
) -> None:
    code, out, err = rar(store_path, "show", offline_run[-8:], "--trace", "--json")
    assert code == 0, err
    lines = [orjson.loads(line) for line in out.splitlines()]
    events = store.events(offline_run)
    assert [line["step_id"] for line in lines] == [e["seq"] for e in events]
    assert [line["timestamp"] for line in lines] == [e["ts"] for e in events]
    assert all(list(line) == FIELDS for line in lines)
    assert {line["run_id"] for line in lines} == {offline_run}


def test_messages_carry_performative_parties_protocol_and_their_id(
    store: Store, offline_run: str
) -> None:
    entries = trace_entries(store, offline_run)
    messages = by_type(entries, "message_sent")
    events = {e["seq"]: e for e in store.events(offline_run)}
    cfp = next(m for m in messages if m.performative == "CFP")
    envelope = store.resolve_payload(events[cfp.step_id]["content"])
    assert cfp.message_id == envelope["message_id"]
    assert cfp.sender == cfp.agent_id == "planner" and cfp.agent_role == "planner"
    assert cfp.receivers and "researcher" in cfp.receivers
    assert cfp.protocol == "fipa-contract-net"
    assert cfp.output_hash == events[cfp.step_id]["content"]["digest"]


def test_the_offline_planner_and_tools_are_deterministic(store: Store, offline_run: str) -> None:
    entries = trace_entries(store, offline_run)
    calls = by_type(entries, "llm_call")
    assert calls and all(c.model == "planner:rule-based" for c in calls)
    assert all(c.deterministic and c.thinking_level is None for c in calls)  # it ignores levels
    assert all(c.cache_key == c.input_hash and c.response_hash for c in calls)
    searches = by_type(entries, "tool_call")
    assert searches and all(s.tool_name == "search" and s.deterministic for s in searches)
    assert all(s.agent_id == "researcher" and s.latency_ms is not None for s in searches)
    assert all(e.deterministic for e in entries)


def test_the_table_shows_the_trace(store_path: Path, offline_run: str) -> None:
    code, out, _ = rar(store_path, "show", offline_run, "--trace")
    assert code == 0
    assert "llm_call" in out and "planner:rule-based · thinking –" in out
    assert "CFP planner → " in out and "fipa-contract-net" in out and "tool_call" in out


# --- a live model -------------------------------------------------------------------------------


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from servers.openai_server import OpenAIServer

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    with OpenAIServer() as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "t" * 24)
        yield running


def _script(server: Any) -> None:
    from servers.openai_server import Answer, Call

    finalize = {"answer_markdown": "A narrow range makes the slope uncertain.", "confidence": 0.6}
    server.script(
        Answer(tool_calls=[Call("c1", p.DELEGATE_RESEARCH, '{"query": "narrow range", "k": 3}')]),
        Answer(tool_calls=[Call("c2", p.FINALIZE, orjson.dumps(finalize).decode())]),
    )


def test_live_model_calls_are_not_deterministic_but_cache_hits_and_replays_are(
    server: Any, store: Store
) -> None:
    _script(server)
    live = ask_question(QUESTION, model="openai:gpt-test", thinking="high", store=store).run_id
    cached = ask_question(QUESTION, model="openai:gpt-test", thinking="high", store=store).run_id
    replayed = replay(live, store=store).replay_run
    calls = {run: by_type(trace_entries(store, run), "llm_call") for run in (live, cached)}
    first, again = calls[live], calls[cached]
    assert [c.model for c in first] == ["openai:gpt-test"] * 2
    assert [c.thinking_level for c in first] == ["high", "high"]
    assert [c.deterministic for c in first] == [False, False]  # asked live at record time
    assert [c.deterministic for c in again] == [True, True]  # served by the response cache
    assert [c.response_hash for c in again] == [c.response_hash for c in first]
    assert [c.cache_key for c in again] == [c.cache_key for c in first]
    assert [c.output_hash for c in again] != [c.output_hash for c in first]  # "cached": true
    served = trace_entries(store, replayed)
    assert all(c.deterministic for c in by_type(served, "llm_call"))  # served from the record
    (config,) = by_type(trace_entries(store, live), "config_effect")
    assert config.model == "openai:gpt-test" and not config.deterministic


def test_unknown_tools_and_the_clock_are_not_deterministic(store: Store) -> None:
    run = record("trace", store=store, seed=1, redactor=Redactor(env={}))
    with run, run.span("work", agent="executor_002"):
        run.effect("tool", {"name": "http_get", "args": {}}, lambda: {"ok": True})
        run.now()
        run.random()
    entries = trace_entries(store, run.id)
    tool = by_type(entries, "tool_call")[0]
    assert (tool.tool_name, tool.deterministic) == ("http_get", False)
    assert tool.agent_id == "executor_002" and tool.agent_role == "executor"
    assert not by_type(entries, "clock_effect")[0].deterministic
    assert by_type(entries, "random_effect")[0].deterministic


def test_a_failed_effect_has_the_digest_of_its_error_as_output(store: Store) -> None:
    run = record("trace", store=store, seed=1, redactor=Redactor(env={}))

    def boom() -> Any:
        raise RuntimeError("down")

    with run, pytest.raises(RuntimeError):
        run.effect("tool", {"name": "search"}, boom)
    (entry,) = by_type(trace_entries(store, run.id), "tool_call")
    (event,) = [e for e in store.events(run.id) if e["type"] == "effect"]
    assert isinstance(entry, TraceEntry)
    assert entry.output_hash == digest_value(event["error"])
