"""`rar ask` and `rar cache explain` against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from rar.cli import cli
from servers.openai_server import Answer, OpenAIServer, Raw

KEY = "sk-test-" + "k3y" * 8


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture(autouse=True)
def environment(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    server.reset()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    monkeypatch.chdir(tmp_path)


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_ask_json_has_the_documented_fields(server: OpenAIServer, tmp_path: Path) -> None:
    server.script(Answer(content="Paris.", prompt_tokens=9, completion_tokens=2))
    code, out, err = rar(tmp_path / "runs", "ask", "Capital of France?", "--model",
                         "openai:gpt-4o-mini", "--json")
    assert code == 0, err
    data = orjson.loads(out)
    assert {"run_id", "text", "model", "usage", "cached"} <= set(data)
    assert data["text"] == "Paris." and data["model"] == "openai:gpt-4o-mini"
    assert data["usage"]["input_tokens"] == 9 and data["cached"] is False
    assert server.last.body["model"] == "gpt-4o-mini"
    assert server.last.headers["authorization"] == f"Bearer {KEY}"


def test_a_second_identical_ask_is_served_from_the_cache_without_http(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.script(Answer(content="42"))
    first = rar(tmp_path / "runs", "ask", "The answer?", "--model", "openai:m", "--json")
    second = rar(tmp_path / "runs", "ask", "The answer?", "--model", "openai:m", "--json")
    assert len(server.received) == 1
    assert orjson.loads(first[1])["cached"] is False
    again = orjson.loads(second[1])
    assert again["cached"] is True and again["text"] == "42"
    assert again["run_id"] != orjson.loads(first[1])["run_id"]


def test_the_recorded_run_names_the_key_reference_never_the_key(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.script(Answer(content="ok"))
    _, out, _ = rar(tmp_path / "runs", "ask", "hi", "--model", "openai:m", "--json")
    run_id = orjson.loads(out)["run_id"]
    manifest = orjson.loads((tmp_path / "runs" / run_id / "manifest.json").read_bytes())
    assert manifest["secrets"] == ["env:OPENAI_API_KEY"]
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_a_401_names_the_variable_and_the_run_is_recorded_as_failed(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.script(Raw(401, {"error": {"message": "Incorrect API key provided"}}))
    code, _, err = rar(tmp_path / "runs", "ask", "hi", "--model", "openai:m")
    assert code == 3
    assert "OPENAI_API_KEY" in err and "Incorrect API key" in err and KEY not in err
    code, out, _ = rar(tmp_path / "runs", "list", "--json")
    assert orjson.loads(out)[0]["status"] == "failed"


def test_a_missing_key_names_the_variable_and_records_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.invalid/v1")
    code, _, err = rar(tmp_path / "runs", "ask", "hi", "--model", "openai:m")
    assert code == 2 and "OPENAI_API_KEY" in err
    assert not (tmp_path / "runs").exists() or not any(
        p.name.startswith("2") for p in (tmp_path / "runs").iterdir()
    )


def test_ask_with_tools_runs_the_loop(server: OpenAIServer, tmp_path: Path) -> None:
    from servers.openai_server import Call

    server.script(
        Answer(tool_calls=[Call("c1", "calculator", '{"expression": "6*7"}')]),
        Answer(content="It is 42."),
    )
    code, out, err = rar(tmp_path / "runs", "ask", "6 times 7?", "--model", "openai:m",
                         "--tools", "--json")
    assert code == 0, err
    assert orjson.loads(out)["text"] == "It is 42."
    tool_message = server.last.body["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "42"
    assert [t["function"]["name"] for t in server.received[0].body["tools"]] == [
        "calculator", "http_get"]


def test_the_offline_default_model_answers_without_configuration(tmp_path: Path) -> None:
    code, out, _ = rar(tmp_path / "runs", "ask", "ping", "--json")
    assert code == 0 and orjson.loads(out)["text"] == "Echo: ping"


def test_cache_explain_names_what_differs(server: OpenAIServer, tmp_path: Path) -> None:
    server.script(Answer(content="first"))
    rar(tmp_path / "runs", "ask", "Tell me about argon", "--model", "openai:m")
    code, out, _ = rar(tmp_path / "runs", "cache", "explain", "Tell me about neon", "--model",
                       "openai:m", "--json")
    data = orjson.loads(out)
    assert code == 0 and data["hit"] is False
    assert [d["field"] for d in data["differences"]] == ["messages[0]"]
    code, out, _ = rar(tmp_path / "runs", "cache", "explain", "Tell me about argon", "--model",
                       "openai:m")
    assert out.startswith("hit:")


def test_profiles_from_a_file_are_used_by_name(server: OpenAIServer, tmp_path: Path) -> None:
    profiles = tmp_path / "p.toml"
    profiles.write_text(
        f'[profiles.local]\nprovider = "openai"\nmodel = "tiny"\nbase_url = "{server.base_url}"\n'
        'api_key = "${OPENAI_API_KEY}"\ntemperature = 0.1\n'
    )
    server.script(Answer(content="from the profile"))
    code, _out, err = rar(tmp_path / "runs", "ask", "hi", "--model", "local", "--profiles",
                         str(profiles), "--json")
    assert code == 0, err
    assert server.last.body["model"] == "tiny" and server.last.body["temperature"] == 0.1


def test_an_ask_run_replays_offline_without_the_key(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(Answer(content="recorded once"))
    _, out, _ = rar(tmp_path / "runs", "ask", "replay me", "--model", "openai:m", "--json")
    run_id = orjson.loads(out)["run_id"]
    server.reset()
    monkeypatch.delenv("OPENAI_API_KEY")
    code, out, err = rar(tmp_path / "runs", "replay", run_id, "--json")
    assert code == 0, (out, err)
    assert orjson.loads(out)["replay_status"] == "reproducible"
    assert server.received == []


def test_an_ask_replays_reproducible_from_a_shell_without_provider_variables(
    server: OpenAIServer, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    server.script(Answer(content="Paris."))
    code, out, err = rar(tmp_path / "runs", "ask", "Capital?", "--model", "openai:m", "--json")
    assert code == 0, err
    run_id = orjson.loads(out)["run_id"]
    clean = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    replayed = subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(tmp_path / "runs"), "replay", run_id,
         "--json"],
        env=clean, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    report = orjson.loads(replayed.stdout)
    assert report["replay_status"] == "reproducible" and report["live"] == 0
    assert any(d["field"] == "openai:m.base_url" for d in report["boundary"]["configuration"])
    assert len(server.received) == 1
