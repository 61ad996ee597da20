"""Properties of replay over randomly generated scripted agent runs (hypothesis).

* Any run of the scripted agent loop (random steps, parallel calls from a few tools, tool
  failures, an answer or max_steps) replays strictly as reproducible.
* A one-line change of agent behaviour (a system prompt, a tool argument, an extra tool call, a
  reformatted tool result) at a random step is caught at exactly the span and ordinal it first
  shows. (Changing the model's script alone is not a change: answers come from the record.)
* Damage to the record is refused before anything is replayed.

Span paths follow the loop: step ``i`` (0-based) is ``run/step`` then ``run/step#2``, ...; the
``j``-th tool call of a step runs in ``<step>/tool-j``; each span holds one effect (ordinal 0).
"""

from __future__ import annotations

import dataclasses
import json
import string
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rar.llm import Message, ScriptedModel, ToolCall, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.redaction import Redactor
from rar.replay import ReplayRefusedError, ReplayReport, execute, replay
from rar.runtime.run import Run
from rar.store.blobs import HEADER_SIZE
from rar.store.store import Store
from rar.tools import ToolRegistry, ToolResult, tool

QUIET = Redactor(env={})
SYSTEM = "Use the tools."
PROPERTIES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b (fails when b is 0).

    Args:
        a: the dividend.
        b: the divisor.
    """
    return a / b


@tool
def flaky(reason: str) -> str:
    """Always fails with the reason given.

    Args:
        reason: why.
    """
    raise RuntimeError(reason)


TOOLS = (add, divide, flaky)


@dataclasses.dataclass(frozen=True)
class Plan:
    """A scripted run: the tool calls of each step, then an answer (None: hit max_steps)."""

    steps: tuple[tuple[tuple[str, dict[str, Any]], ...], ...]
    answer: str | None
    task: str

    @property
    def max_steps(self) -> int:
        return len(self.steps) + (self.answer is not None)

    def script(self) -> list[str | Message]:
        turns: list[str | Message] = [
            Message.assistant(
                f"step {i}",
                [tool_call(name, f"call_{i}_{j}", **args) for j, (name, args) in enumerate(calls)],
            )
            for i, calls in enumerate(self.steps)
        ]
        if self.answer is not None:
            turns.append(self.answer)
        return turns


words = st.text(alphabet=string.ascii_letters + string.digits + " .,?", min_size=1, max_size=24)
ints = st.integers(-50, 50)
calls = st.one_of(
    st.builds(lambda a, b: ("add", {"a": a, "b": b}), ints, ints),
    st.builds(lambda a, b: ("divide", {"a": a, "b": b}), ints, st.integers(-2, 2)),  # 0 fails
    st.builds(lambda r: ("flaky", {"reason": r}), words),
)


@st.composite
def plans(draw: st.DrawFn, min_steps: int = 0) -> Plan:
    batch = st.lists(calls, min_size=1, max_size=3).map(tuple)
    steps = draw(st.lists(batch, min_size=min_steps, max_size=4))
    answer = draw(words if not steps else st.none() | words)  # no steps: it has to answer
    return Plan(tuple(steps), answer, draw(words))


def step_span(index: int) -> str:
    return "run/step" if index == 0 else f"run/step#{index + 1}"


class Tweaked(ToolRegistry):
    """The tool registry with one change of behaviour at one step (its ``index``-th batch)."""

    def __init__(self, tools: Sequence[Any], change: str, index: int, call: int = 0) -> None:
        super().__init__(tools)
        self.change, self.index, self.call, self.batches = change, index, call, 0

    def execute_all(self, calls: Sequence[ToolCall], *, run: Run | None = None) -> list[ToolResult]:
        batch, self.batches = self.batches, self.batches + 1
        calls = list(calls)
        if batch == self.index and self.change == "argument":
            original = calls[self.call]
            args = json.loads(original.arguments)
            key = sorted(args)[0]
            args[key] = args[key] + 1 if isinstance(args[key], int) else args[key] + "!"
            calls[self.call] = original.model_copy(update={"arguments": json.dumps(args)})
        elif batch == self.index and self.change == "extra-call":
            calls.append(tool_call("add", "extra", a=1, b=1))
        results = super().execute_all(calls, run=run)
        if batch == self.index and self.change == "result-format":
            results = [dataclasses.replace(r, content=f"[{r.content}]") for r in results]
        return results


def agent_for(
    plan: Plan, *, system: str = SYSTEM, registry: Callable[[], ToolRegistry] | None = None
) -> Callable[..., dict[str, Any]]:
    script = plan.script()

    def entrypoint(run: Run, task: str) -> dict[str, Any]:
        client = Client(ScriptedModel(script), run=run, profiles=Profiles())
        tools = registry() if registry is not None else ToolRegistry(TOOLS)
        result = Agent(client, tools, max_steps=plan.max_steps, system_prompt=system).run(
            task, run=run
        )
        return {
            "answer": result.text,
            "stop_reason": result.stop_reason.value,
            "calls": [[c.name, c.arguments, r.ok, r.content] for c, r in result.calls],
        }

    return entrypoint


@contextmanager
def recorded(plan: Plan) -> Iterator[tuple[Store, str]]:
    """A fresh store holding one recorded run of ``plan``."""
    with tempfile.TemporaryDirectory(prefix="rar-prop-") as scratch:
        store = Store(Path(scratch) / "runs", create=True)
        try:
            run = execute(
                agent_for(plan),
                inputs={"task": plan.task},
                store=store,
                seed=3,
                durable=False,
                redactor=QUIET,
            )
            yield store, run.id
        finally:
            store.close()


def _effects(store: Store, run_id: str) -> list[dict[str, Any]]:
    return [e for e in store.events(run_id) if e["type"] == "effect"]


# --- any scripted run replays -----------------------------------------------------------------


@PROPERTIES
@given(plans())
def test_any_scripted_agent_run_replays_strictly_as_reproducible(plan: Plan) -> None:
    with recorded(plan) as (store, run_id):
        effects = _effects(store, run_id)
        assert len(effects) == plan.max_steps + sum(len(step) for step in plan.steps)
        report = replay(run_id, store=store, function=agent_for(plan), redactor=QUIET)
        assert report.replay_status == "reproducible", report.first_divergence
        assert report.served == len(effects) and report.mismatched == 0
        assert report.result_equal is True and report.unconsumed == []


# --- a change of behaviour is caught where it first shows -------------------------------------


def _expected(plan: Plan, change: str, index: int, call: int) -> tuple[str | None, str]:
    """(span, kind) of the first divergence; span None: only the final result differs."""
    if change == "system":
        return "run/step", "llm"
    if change == "argument":
        return f"{step_span(index)}/tool-{call}", "tool"
    if change == "extra-call":
        return f"{step_span(index)}/tool-{len(plan.steps[index])}", "tool"
    # result-format: the next model call sees the reformatted results, if there is one
    if index + 1 < plan.max_steps:
        return step_span(index + 1), "llm"
    return None, ""


@PROPERTIES
@given(plans(min_steps=1), st.data())
def test_a_one_line_change_of_behaviour_is_caught_at_the_right_span_and_ordinal(
    plan: Plan, data: st.DataObject
) -> None:
    changes = ["system", "argument", "extra-call", "result-format"]
    change = data.draw(st.sampled_from(changes), label="change")
    index = data.draw(st.integers(0, len(plan.steps) - 1), label="step")
    call = data.draw(st.integers(0, len(plan.steps[index]) - 1), label="call")
    if change == "system":
        changed = agent_for(plan, system=SYSTEM + " Be terse.")
    else:
        changed = agent_for(plan, registry=lambda: Tweaked(TOOLS, change, index, call))
    with recorded(plan) as (store, run_id):
        report = replay(run_id, store=store, function=changed, redactor=QUIET)
    assert report.replay_status == "non-reproducible" and not report.reproducible
    divergence = report.first_divergence
    assert divergence is not None
    span, kind = _expected(plan, change, index, call)
    event(f"{change}{'' if span else ' (only the result differs)'}")
    if span is None:
        assert divergence["reason"] == "the final result differs"
        return
    assert (divergence["span"], divergence["ordinal"], divergence["kind"]) == (span, 0, kind)
    assert report.mismatched == 1
    fields = {d["field"] for d in divergence.get("differences") or []}
    if change == "system":
        assert "request.messages[0].content" in fields
    elif change == "argument":
        key = sorted(plan.steps[index][call][1])[0]
        assert f"args.{key}" in fields
    elif change == "extra-call":
        assert "does more than it did" in divergence["reason"]
    else:
        assert any(f.startswith("request.messages[") for f in fields), fields


# --- damage is refused ------------------------------------------------------------------------


@PROPERTIES
@given(plans(), st.data())
def test_a_tampered_log_line_is_refused(plan: Plan, data: st.DataObject) -> None:
    with recorded(plan) as (store, run_id):
        log = store.run_dir(run_id) / "events.jsonl"
        lines = log.read_bytes().split(b"\n")[:-1]
        # positions drawn as numbers taken modulo the sizes: timestamps and durations make a
        # record's lines a little longer or shorter from run to run
        line = data.draw(st.integers(0, 2**16), label="line") % len(lines)
        position = data.draw(st.integers(0, 2**16), label="byte") % len(lines[line])
        old = lines[line][position]
        new = data.draw(st.integers(0, 255).filter(lambda b: b not in (old, 10)), label="to")
        damaged = bytearray(lines[line])
        damaged[position] = new
        lines[line] = bytes(damaged)
        log.write_bytes(b"\n".join(lines) + b"\n")
        with pytest.raises(ReplayRefusedError, match="fails verification"):
            replay(run_id, store=store, function=agent_for(plan), redactor=QUIET)


def _damage_a_response_blob(store: Store, run_id: str, data: st.DataObject) -> bool:
    """Flip one byte inside a model answer stored as a blob; False when every answer is inline."""
    blobs = [
        e["result"]["digest"]
        for e in _effects(store, run_id)
        if e["kind"] == "llm" and "value" not in e.get("result", {"value": None})
    ]
    if not blobs:
        return False
    digest = blobs[data.draw(st.integers(0, 2**16), label="blob") % len(blobs)]
    location = store.locate_blob(digest)
    assert location is not None
    pack = store.packs_dir / f"{location.pack}.pack"
    raw = bytearray(pack.read_bytes())
    offset = data.draw(st.integers(0, 2**16), label="byte") % location.stored_size
    position = location.offset + HEADER_SIZE + offset
    raw[position] ^= data.draw(st.integers(1, 255), label="xor")
    pack.write_bytes(bytes(raw))
    return True


@PROPERTIES
@given(plans(), st.data())
@pytest.mark.usefixtures("blobs_in_packs")
def test_a_tampered_response_blob_is_never_replayed_as_reproducible(
    plan: Plan, data: st.DataObject
) -> None:
    """Replay verifies the record, blobs included, before it starts: it refuses."""
    with recorded(plan) as (store, run_id):
        damaged = _damage_a_response_blob(store, run_id, data)
        event("damaged" if damaged else "every answer inline")
        if not damaged:
            return
        fresh = Store(store.root)  # nothing cached from the recording
        try:
            report: ReplayReport = replay(
                run_id, store=fresh, function=agent_for(plan), redactor=QUIET
            )
        except ReplayRefusedError:
            return
        finally:
            fresh.close()
    raise AssertionError(f"a damaged record was replayed: {report.replay_status}")


@pytest.mark.usefixtures("blobs_in_packs")
def test_a_tampered_response_blob_is_refused_before_replay() -> None:
    plan = Plan(steps=((("add", {"a": 1, "b": 2}),),), answer="It is 3.", task="1 + 2?")
    with recorded(plan) as (store, run_id):
        first = next(e for e in _effects(store, run_id) if e["kind"] == "llm")
        location = store.locate_blob(first["result"]["digest"])
        assert location is not None
        pack = store.packs_dir / f"{location.pack}.pack"
        raw = bytearray(pack.read_bytes())
        raw[location.offset + HEADER_SIZE + location.stored_size // 2] ^= 0x01
        pack.write_bytes(bytes(raw))
        with pytest.raises(ReplayRefusedError):
            replay(run_id, store=Store(store.root), function=agent_for(plan), redactor=QUIET)
