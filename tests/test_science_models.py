"""Science runs driven by a real model over HTTP (loopback servers speaking the providers' wire
formats): replay in any shell, the cache on a repeated run, the rule-based fallback, Gemini."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from rar.replay import replay
from rar.science import ask_question
from rar.science import protocol as p
from rar.store.store import Store

needs_sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap is not installed (apt-get install bubblewrap)",
)
QUESTION = "What value does the sandbox compute for six times seven?"
PROVIDER_VARIABLES = [name for name in os.environ if name.startswith(("OPENAI_", "GEMINI_"))]


def _args(**values: Any) -> str:
    return orjson.dumps(values).decode()


def _openai_script() -> list[Any]:
    from servers.openai_server import Answer, Call

    return [
        Answer(tool_calls=[Call("c1", p.DELEGATE_RESEARCH, _args(query="Arrhenius", k=4))]),
        Answer(tool_calls=[Call("c2", p.DELEGATE_EXECUTE, _args(code="x = 6 * 7\nprint(x)"))]),
        Answer(tool_calls=[Call("c3", p.DELEGATE_AUDIT, _args(draft="x is 42.", claims=[]))]),
        Answer(
            tool_calls=[
                Call("c4", p.FINALIZE, _args(answer_markdown="Six times seven is 42.",
                                            confidence=0.6)),
            ]
        ),
    ]  # fmt: skip


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    from servers.openai_server import OpenAIServer

    with OpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-" + "k" * 24)
        yield server


def _clean_shell(home: Path) -> dict[str, str]:
    """An environment with no provider variable at all, as a new terminal would have."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}


@needs_sandbox
def test_an_llm_driven_run_replays_reproducible_from_a_shell_without_provider_variables(
    openai_env: Any, store_path: Path, tmp_path: Path
) -> None:
    openai_env.script(*_openai_script())
    result = ask_question(QUESTION, model="openai:gpt-test", store=store_path)
    assert result.status in ("completed", "completed_with_warnings")
    sent = len(openai_env.received)
    assert sent == 4
    command = ["replay", result.run_id, "--json"]
    replayed = subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(store_path), *command],
        env=_clean_shell(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replayed.returncode == 0, replayed.stderr + replayed.stdout
    report = json.loads(replayed.stdout)
    assert report["replay_status"] == "reproducible"
    assert report["live"] == 0 and report["mismatched"] == 0
    # the shell would send openai:gpt-test elsewhere: said in the boundary, not in the verdict
    differences = report["boundary"]["configuration"]
    assert {
        "field": "openai:gpt-test.base_url",
        "expected": openai_env.base_url,
        "actual": "https://api.openai.com/v1",
    }.items() <= next(d for d in differences if d["field"].endswith("base_url")).items()
    assert len(openai_env.received) == sent  # nothing reached the model


@needs_sandbox
def test_a_second_identical_run_makes_no_model_request(openai_env: Any, store_path: Path) -> None:
    openai_env.script(*_openai_script())
    first = ask_question(QUESTION, model="openai:gpt-test", store=store_path)
    assert len(openai_env.received) == 4
    executed = [
        orjson.loads(m["content"])
        for m in openai_env.received[2].body["messages"]
        if m["role"] == "tool" and m.get("tool_call_id") == "c2"
    ]
    assert executed and executed[0]["status"] == "ok"
    assert "duration_ms" not in executed[0]  # nothing volatile reaches the model
    second = ask_question(QUESTION, model="openai:gpt-test", store=store_path)
    assert len(openai_env.received) == 4  # every call of the second run came from the cache
    assert second.answer == first.answer
    llm = Store(store_path).manifest(second.run_id).stats["llm"]
    assert llm["calls"] == 4 and llm["cached_calls"] == 4


def test_a_strict_replay_connects_to_the_recorded_endpoint_and_sends_no_key(
    openai_env: Any, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers.openai_server import Answer, Call, OpenAIServer

    openai_env.script(
        Answer(tool_calls=[Call("c1", p.FINALIZE, _args(answer_markdown="Done.", confidence=0.5))])
    )
    recorded = ask_question(QUESTION, model="openai:gpt-test", store=store_path)
    with OpenAIServer() as other:  # the current shell points somewhere else
        monkeypatch.setenv("OPENAI_BASE_URL", other.base_url)
        report = replay(recorded.run_id, store=store_path)
        assert report.replay_status == "reproducible"
        assert report.boundary["configuration"][0]["expected"] == openai_env.base_url
        # a branch that goes live asks the recorded endpoint, without the current shell's key
        openai_env.script(
            Answer(tool_calls=[Call("c9", p.FINALIZE, _args(answer_markdown="Again.",
                                                            confidence=0.5))])
        )  # fmt: skip
        events = Store(store_path).events(recorded.run_id)
        aligned = next(e["seq"] for e in events if e.get("kind") == "config")
        sent = len(openai_env.received)
        branch = replay(  # another mode: another prompt, so the call is not in the cache
            recorded.run_id, store=store_path, mode="fork", at=aligned, overrides={"mode": "owl_dl"}
        )
        assert branch.live >= 1
        assert other.received == []
    assert len(openai_env.received) == sent + 1
    assert "authorization" not in {k.lower() for k in openai_env.received[-1].headers}


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: connecting is refused


@needs_sandbox
def test_an_unavailable_planner_model_hands_over_to_the_rule_based_planner(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_refused_port()}/v1")
    question = "What activation energy do the Kissinger DSC data in the corpus give?"
    result = ask_question(question, model="openai:gpt-test", store=store_path)
    assert result.status in ("completed", "completed_with_warnings")
    assert result.audit.get("passed") is True
    assert "kJ/mol" in result.answer
    assert result.planner_fallback is not None
    assert result.planner_fallback["failed"] == "openai:gpt-test"
    assert result.planner_fallback["instead"] == "planner:rule-based"
    assert "openai:gpt-test was unavailable" in result.answer  # named in the answer
    assert any("was unavailable" in warning for warning in result.warnings)
    events = Store(store_path).events(result.run_id)
    fallbacks = [e for e in events if e["type"] == "fallback"]
    assert len(fallbacks) == 1 and fallbacks[0]["error"]["type"] == "ProviderUnavailableError"
    # the fallback is part of the record: the run replays, offline
    assert replay(result.run_id, store=store_path).replay_status == "reproducible"


def test_without_a_fallback_an_unavailable_planner_fails_the_run(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from rar.cli import cli

    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_refused_port()}/v1")
    outcome = CliRunner().invoke(
        cli,
        ["--store", str(store_path), "run", "What is Ea?", "--model", "openai:gpt-test",
         "--planner-fallback", "none"],
    )  # fmt: skip
    assert outcome.exit_code == 3, outcome.output  # docs/cli.md: a provider failed
    assert "error: openai" in outcome.output and "internal error" not in outcome.output
    rows = Store(store_path).list_runs()
    assert [row.status for row in rows] == ["failed"]


@needs_sandbox
def test_gemini_is_told_a_successful_cell_succeeded(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers.gemini_server import GeminiServer, call, response

    with GeminiServer() as server:
        monkeypatch.setenv("GEMINI_BASE_URL", server.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", "AIza" + "g" * 35)
        server.script(
            response(call(p.DELEGATE_EXECUTE, code="x = 6 * 7")),
            response(call(p.FINALIZE, answer_markdown="42.", confidence=0.5)),
        )
        result = ask_question(QUESTION, model="gemini:gemini-test", store=store_path)
        contents = server.received[1].body["contents"]
    assert result.answer.startswith("42.")
    replies = [
        part["functionResponse"]
        for content in contents
        for part in content.get("parts", [])
        if "functionResponse" in part
    ]
    assert len(replies) == 1
    answer = replies[0]["response"]
    assert "error" not in answer or answer["error"] is None, answer
    assert answer["status"] == "ok" and answer["variables"]["x"] == 42
