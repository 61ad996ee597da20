"""``rar export RUN --format trajectory``: the trajectory document, its schema and the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from rar.cli.export_cmd import export_command
from rar.demo import run_demo
from rar.export import TrajectoryError, check_steps, export_trajectory, load_schema, validate
from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.replay.engine import execute
from rar.runtime.run import Run
from rar.store.store import Store
from rar.tools import calculator

TOOL_SCRIPT: list[str | Message] = [
    Message.assistant("Add first.", [tool_call("calculator", "c1", expression="2 + 3")]),
    Message.assistant("", [tool_call("calculator", "c2", expression="5 * 7")]),
    "The result is 35.",
]


def ask_tools_entry(run: Run, prompt: str, max_steps: int = 6) -> dict[str, str]:
    """Like ``rar ask --tools``: the agent loop with a scripted model and the calculator."""
    client = Client(ScriptedModel(TOOL_SCRIPT, model="tools"), run=run, profiles=Profiles())
    result = Agent(client, [calculator], max_steps=max_steps).run(prompt, run=run)
    return {"text": result.text, "stop_reason": result.stop_reason.value}


def looping_entry(run: Run, prompt: str) -> dict[str, str]:
    script: list[str | Message] = [
        Message.assistant("Again.", [tool_call("calculator", f"c{i}", expression="1 + 1")])
        for i in range(5)
    ]
    client = Client(ScriptedModel(script, model="loop"), run=run, profiles=Profiles())
    result = Agent(client, [calculator], max_steps=2).run(prompt, run=run)
    return {"text": result.text, "stop_reason": result.stop_reason.value}


def failing_entry(run: Run, prompt: str, timeout: bool = False) -> dict[str, str]:
    client = Client(ScriptedModel(["Thinking."], model="fail"), run=run, profiles=Profiles())
    client.complete(messages=[Message.user(prompt)])
    if timeout:
        raise TimeoutError("the wall-clock budget ran out")
    raise RuntimeError("the agent broke")


def _record(store: Store, entry: Any, **inputs: Any) -> str:
    return execute(
        entry,
        inputs=inputs,
        goal=inputs["prompt"],
        store=store,
        models=[{"provider": "scripted", "model": "tools"}],
        config={"command": "ask"},
        tags={"kind": "ask"},
    ).id


def _failed(store: Store, **inputs: Any) -> str:
    before = set(store.run_ids())
    with pytest.raises((RuntimeError, TimeoutError)):
        _record(store, failing_entry, prompt="Break, please.", **inputs)
    (run_id,) = set(store.run_ids()) - before
    return run_id


def _check(doc: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema())
    jsonschema.validate(doc, load_schema(), cls=jsonschema.Draft202012Validator)
    validate(doc)
    steps = doc["steps"]
    assert [s["type"] for s in steps].count("answer") == 1
    assert steps[-1]["type"] == "answer"
    iterations = [s["iteration"] for s in steps]
    assert iterations == sorted(iterations) and iterations[0] >= 1


def _iterations(doc: dict[str, Any]) -> list[tuple[int, str]]:
    return [(s["iteration"], s["type"]) for s in doc["steps"]]


def test_demo_run(store: Store) -> None:
    run = run_demo(store)
    doc = export_trajectory(store, run.id)
    _check(doc)
    assert doc["experiment"] == "demo"
    assert doc["model"] == "scripted:demo"
    assert doc["outcome"] == "success"
    assert doc["title"] == doc["task"] and doc["task"].startswith("Rate constants")
    assert doc["tags"] == ["kind:demo"]
    assert doc["recorded_at"] == store.manifest(run.id).created_at
    assert _iterations(doc) == [
        (1, "thought"),
        (1, "action"),
        (1, "observation"),
        (2, "thought"),
        (2, "action"),
        (2, "observation"),
        (3, "thought"),
        (3, "answer"),
    ]
    action, observation = doc["steps"][1], doc["steps"][2]
    assert action["tool"] == "calculator"
    assert action["args"] == {"expression": "8.4e-3 / 2.1e-3"}
    assert observation == {
        "iteration": 1,
        "type": "observation",
        "tool": "calculator",
        "content": "4.0",
        "ok": True,
        "call_id": "call_1",
    }
    assert "55.3 kJ/mol" in doc["steps"][-1]["content"]


def test_tool_loop_run(store: Store) -> None:
    run_id = _record(store, ask_tools_entry, prompt="What is (2 + 3) * 7?", max_steps=6)
    doc = export_trajectory(store, run_id)
    _check(doc)
    assert doc["experiment"] == "ask"
    assert doc["outcome"] == "success"
    assert "command=ask" in doc["condition"] and "max_steps=6" in doc["condition"]
    # the second model turn has no text: no thought, only its action
    assert _iterations(doc) == [
        (1, "thought"),
        (1, "action"),
        (1, "observation"),
        (2, "action"),
        (2, "observation"),
        (3, "thought"),
        (3, "answer"),
    ]
    assert doc["steps"][4]["content"] == "35"
    assert doc["steps"][-1]["content"] == "The result is 35."


def test_step_limit_is_a_loop(store: Store) -> None:
    run_id = _record(store, looping_entry, prompt="Loop.")
    doc = export_trajectory(store, run_id)
    _check(doc)
    assert doc["outcome"] == "loop"
    assert max(s["iteration"] for s in doc["steps"]) == 2


def test_failed_run(store: Store) -> None:
    run_id = _failed(store)
    doc = export_trajectory(store, run_id)
    _check(doc)
    assert doc["outcome"] == "failure"
    assert doc["steps"] == [
        {"iteration": 1, "type": "thought", "content": "Thinking."},
        {"iteration": 1, "type": "answer", "content": ""},
    ]


def test_timeout_run(store: Store) -> None:
    doc = export_trajectory(store, _failed(store, timeout=True))
    _check(doc)
    assert doc["outcome"] == "timeout"


def test_science_run(store: Store) -> None:
    from rar.science.runtime import ask_question

    result = ask_question("How is activation energy determined?", store=store)
    doc = export_trajectory(store, result.run_id)
    _check(doc)
    assert doc["experiment"] == "science"
    assert doc["model"] == "planner:rule-based"
    assert "mode=owl_lite" in doc["condition"]
    assert doc["outcome"] == "success"
    observations = [s for s in doc["steps"] if s["type"] == "observation"]
    assert observations and {s["tool"] for s in observations} <= {"search", "python"}
    assert all(s["content"] for s in observations)
    assert doc["steps"][-1]["content"] == result.answer
    model_calls = sum(
        1 for e in store.events(result.run_id) if e["type"] == "effect" and e["kind"] == "llm"
    )
    assert doc["steps"][-1]["iteration"] == model_calls


def test_validate_rejects_bad_documents(store: Store) -> None:
    doc = export_trajectory(store, run_demo(store).id)
    two_answers = {**doc, "steps": [*doc["steps"], doc["steps"][-1]]}
    assert check_steps(two_answers)
    with pytest.raises(TrajectoryError, match="exactly one answer"):
        validate(two_answers)
    with pytest.raises(TrajectoryError, match="last step"):
        validate({**doc, "steps": [doc["steps"][-1], doc["steps"][0]]})
    with pytest.raises(TrajectoryError, match="outcome"):
        validate({**doc, "outcome": "maybe"})
    with pytest.raises(TrajectoryError):
        validate({**doc, "steps": [{"iteration": 0, "type": "answer", "content": ""}]})


# --- the command ---------------------------------------------------------------------------------


def _invoke(store: Store, *args: str) -> Any:
    return CliRunner().invoke(export_command, list(args), obj=str(store.root))


def test_command_prints_and_writes(store: Store, tmp_path: Path) -> None:
    run_id = run_demo(store).id
    printed = _invoke(store, run_id.rsplit("-", 1)[-1], "--format", "trajectory")
    assert printed.exit_code == 0, printed.output
    doc = json.loads(printed.stdout)
    _check(doc)
    assert doc["run_id"] == run_id
    target = tmp_path / "out" / "trajectory.json"
    target.parent.mkdir()
    written = _invoke(store, run_id, "-o", str(target))
    assert written.exit_code == 0, written.output
    assert json.loads(target.read_text(encoding="utf-8")) == doc


def test_command_unknown_run(store: Store) -> None:
    run_demo(store)
    result = _invoke(store, "nosuchrun")
    assert result.exit_code == 2
    assert "no run matches" in result.stderr


def test_an_unknown_format_is_refused_by_the_command(store: Store) -> None:
    run_id = run_demo(store).id
    result = _invoke(store, run_id, "--format", "pdf")
    assert result.exit_code == 2
