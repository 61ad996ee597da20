"""The minimal agent loop with the scripted model: every step recorded, errors as values."""

from __future__ import annotations

from typing import Any

from rar.errors import ProviderUnavailableError
from rar.llm import Message, Request, Response, ScriptedModel, ToolCall, tool_call
from rar.llm.client import Client, RetryPolicy
from rar.llm.profiles import Profiles
from rar.loop import Agent, StopReason
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store
from rar.tools import tool

NO_PROFILES = Profiles()


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


def _agent(script: Any, tools: Any = (add,), max_steps: int = 5) -> Agent:
    return Agent(Client(ScriptedModel(script), profiles=NO_PROFILES), tools, max_steps=max_steps,
                 system_prompt="Be brief.")


def _run(store: Store):  # type: ignore[no-untyped-def]
    return record("agent test", store=store, redactor=Redactor(env={}))


def _effects(store: Store, run_id: str) -> list[tuple[str, str]]:
    return [(e["kind"], e["span"]) for e in store.events(run_id) if e["type"] == "effect"]


def test_one_tool_call_then_an_answer_is_recorded_step_by_step(store: Store) -> None:
    script = [Message.assistant(tool_calls=[tool_call("add", a=2, b=3)]), "The sum is 5."]
    with _run(store) as run:
        agent = Agent(Client(ScriptedModel(script), run=run, profiles=NO_PROFILES), [add])
        result = agent.run("What is 2 + 3?", run=run)
    assert result.text == "The sum is 5." and result.stop_reason == StopReason.COMPLETED
    assert [c.name for c in result.tool_calls] == ["add"]
    assert result.calls[0][1].value == 5
    assert len(result.steps) == 2 and result.usage.input_tokens > 0
    assert _effects(store, run.id) == [("llm", "run/step"), ("tool", "run/step/tool-0"),
                                       ("llm", "run/step#2")]


def test_the_tool_result_goes_back_to_the_model(store: Store) -> None:
    seen: list[Request] = []

    def model(request: Request) -> Any:
        seen.append(request)
        if len(seen) == 1:
            return Message.assistant(tool_calls=[tool_call("add", "c1", a=1, b=1)])
        return f"got {request.messages[-1].content}"

    result = _agent(model).run("1+1?")
    last = seen[-1].messages[-1]
    assert last.role == "tool" and last.tool_call_id == "c1" and last.content == "2.0"
    assert result.text == "got 2.0"
    assert [t.name for t in seen[0].tools] == ["add"]
    assert seen[0].messages[0] == Message.system("Be brief.")


def test_parallel_tool_calls_run_and_come_back_in_the_models_order(store: Store) -> None:
    calls = [tool_call("add", "c1", a=1, b=2), tool_call("add", "c2", a=10, b=20),
             tool_call("add", "c3", a=100, b=200)]
    seen: list[Request] = []

    def model(request: Request) -> Any:
        seen.append(request)
        return Message.assistant(tool_calls=calls) if len(seen) == 1 else "done"

    with _run(store) as run:
        Agent(Client(ScriptedModel(model), run=run, profiles=NO_PROFILES), [add]).run(
            "sum them", run=run)
    tool_messages = [m for m in seen[-1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2", "c3"]
    assert [m.content for m in tool_messages] == ["3.0", "30.0", "300.0"]
    tool_events = [e for e in store.events(run.id) if e["type"] == "effect"
                   and e["kind"] == "tool"]
    recorded = [store.resolve_payload(e["request"])["call_id"] for e in tool_events]
    assert recorded == ["c1", "c2", "c3"]


def test_an_unknown_tool_is_an_error_result_for_the_model(store: Store) -> None:
    seen: list[Request] = []

    def model(request: Request) -> Any:
        seen.append(request)
        return (Message.assistant(tool_calls=[tool_call("nonexistent", "c1")])
                if len(seen) == 1 else "sorry")

    result = _agent(model).run("x")
    reply = seen[-1].messages[-1]
    assert reply.is_error and reply.content.startswith("Error:") and "add" in reply.content
    assert result.stop_reason == StopReason.COMPLETED and not result.calls[0][1].ok


def test_tool_arguments_that_are_not_json_are_an_error_result() -> None:
    seen: list[Request] = []
    broken = ToolCall(id="c1", name="add", arguments='{"a": 1, "b": ')

    def model(request: Request) -> Any:
        seen.append(request)
        return Message.assistant(tool_calls=[broken]) if len(seen) == 1 else "retrying later"

    _agent(model).run("x")
    reply = seen[-1].messages[-1]
    assert reply.is_error and "JSON" in reply.content


def test_a_failing_tool_is_recovered_from(store: Store) -> None:
    script = [Message.assistant(tool_calls=[tool_call("explode", reason="disk on fire")]),
              "The tool failed, so I answer without it."]
    with _run(store) as run:
        result = Agent(Client(ScriptedModel(script), run=run, profiles=NO_PROFILES),
                       [explode]).run("x", run=run)
    assert result.stop_reason == StopReason.COMPLETED
    (_call, outcome) = result.calls[0]
    assert not outcome.ok and outcome.error == {"type": "RuntimeError", "message": "disk on fire"}


def test_a_model_that_never_stops_calling_tools_hits_max_steps() -> None:
    result = _agent(lambda request: Message.assistant(tool_calls=[tool_call("add", a=1, b=1)]),
                    max_steps=3).run("loop forever")
    assert result.stop_reason == StopReason.MAX_STEPS
    assert len(result.steps) == 3 and len(result.calls) == 3


def test_no_tool_needed_means_one_step() -> None:
    result = _agent(["Just an answer."]).run("hello")
    assert result.text == "Just an answer." and len(result.steps) == 1 and not result.calls


def test_a_provider_failure_stops_the_loop_with_an_error_value(store: Store) -> None:
    class Down:
        name = "scripted"
        base_url = None
        model = "down"

        def complete(self, request: Request) -> Response:
            raise ProviderUnavailableError("gateway timeout", provider="scripted", status=504)

    client = Client(Down(), profiles=NO_PROFILES, retry=RetryPolicy(max_attempts=2),
                    sleep=lambda s: None)
    result = Agent(client, [add]).run("x")
    assert result.stop_reason == StopReason.ERROR
    assert result.error is not None and "gateway timeout" in result.error["message"]
