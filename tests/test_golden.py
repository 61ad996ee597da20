"""Golden trajectories of the scripted agent loop, replayed strictly from tests/golden/.

Record again after an intended change of behaviour: ``pytest tests/test_golden.py --rar-record``.
The last tests run the plugin on tiny test files (pytester) to show that it fails when the
behaviour changes and when a cassette is missing, and that a replay leaves the cassette as is.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from rar.llm import Message, Request, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent, AgentResult
from rar.runtime.run import Run
from rar.testing import (
    CassetteMissingError,
    GoldenMismatchError,
    record_cassette,
    replay_cassette,
)
from rar.testing.plugin import RarCassette
from rar.tools import tool

pytest_plugins = ["pytester"]

SYSTEM = "You are a careful assistant. Use the tools for arithmetic."


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b.

    Args:
        a: the dividend.
        b: the divisor.
    """
    return a / b


def _agent(run: Run, script: Any, *, max_steps: int = 5) -> Agent:
    client = Client(ScriptedModel(script, model="golden"), run=run, profiles=Profiles())
    return Agent(client, [add, divide], max_steps=max_steps, system_prompt=SYSTEM)


def _summary(result: AgentResult) -> dict[str, Any]:
    """What a golden test compares: deterministic (no latency), JSON-friendly."""
    return {
        "answer": result.text,
        "stop_reason": result.stop_reason.value,
        "steps": len(result.steps),
        "tool_calls": [
            {"name": c.name, "arguments": c.arguments, "ok": r.ok, "content": r.content}
            for c, r in result.calls
        ],
    }


# --- the five scenarios: entrypoints function(run, **inputs) ----------------------------------


def one_tool_call(run: Run, question: str) -> dict[str, Any]:
    script = [
        Message.assistant("Let me add.", [tool_call("add", "call_1", a=2, b=3)]),
        "The sum is 5.",
    ]
    return _summary(_agent(run, script).run(question, run=run))


def parallel_tool_calls(run: Run, question: str) -> dict[str, Any]:
    script = [
        Message.assistant(
            "Three sums at once.",
            [
                tool_call("add", "call_1", a=1, b=2),
                tool_call("add", "call_2", a=10, b=20),
                tool_call("add", "call_3", a=100, b=200),
            ],
        ),
        "The sums are 3, 30 and 300.",
    ]
    return _summary(_agent(run, script).run(question, run=run))


def tool_error_recovery(run: Run, question: str) -> dict[str, Any]:
    script = [
        Message.assistant("Dividing.", [tool_call("divide", "call_1", a=1, b=0)]),
        Message.assistant(
            "Division by zero failed; I will divide by 4 as the task intends.",
            [tool_call("divide", "call_2", a=1, b=4)],
        ),
        "1 / 0 is undefined; 1 / 4 = 0.25.",
    ]
    return _summary(_agent(run, script).run(question, run=run))


def no_tool(run: Run, question: str) -> dict[str, Any]:
    return _summary(_agent(run, ["Paris is the capital of France."]).run(question, run=run))


def _always_add(request: Request) -> Message:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    return Message.assistant(f"Adding again ({turn + 1}).", [tool_call("add", a=turn, b=1)])


def max_steps(run: Run, question: str) -> dict[str, Any]:
    return _summary(_agent(run, _always_add, max_steps=3).run(question, run=run))


# --- golden tests ----------------------------------------------------------------------------


@pytest.mark.rar_golden("one_tool_call")
def test_one_tool_call(rar_cassette: RarCassette) -> None:
    golden = rar_cassette.run(one_tool_call, inputs={"question": "What is 2 + 3?"})
    assert golden.result == {
        "answer": "The sum is 5.",
        "stop_reason": "completed",
        "steps": 2,
        "tool_calls": [{"name": "add", "arguments": '{"a":2,"b":3}', "ok": True, "content": "5.0"}],
    }
    assert golden.report.reproducible and golden.report.served == 3  # llm, tool, llm


@pytest.mark.rar_golden("parallel_tool_calls")
def test_parallel_tool_calls(rar_cassette: RarCassette) -> None:
    golden = rar_cassette.run(parallel_tool_calls, inputs={"question": "1+2, 10+20, 100+200?"})
    assert [c["content"] for c in golden.result["tool_calls"]] == ["3.0", "30.0", "300.0"]
    assert golden.result["steps"] == 2 and golden.result["stop_reason"] == "completed"
    assert golden.report.served == 5  # llm, three tools, llm


@pytest.mark.rar_golden("tool_error_recovery")
def test_recovery_from_a_tool_error(rar_cassette: RarCassette) -> None:
    golden = rar_cassette.run(tool_error_recovery, inputs={"question": "What is 1 / 0?"})
    first, second = golden.result["tool_calls"]
    assert not first["ok"] and "ZeroDivisionError" in first["content"]
    assert second["ok"] and second["content"] == "0.25"
    assert golden.result["answer"] == "1 / 0 is undefined; 1 / 4 = 0.25."
    assert golden.report.served == 5


@pytest.mark.rar_golden("no_tool")
def test_no_tool(rar_cassette: RarCassette) -> None:
    golden = rar_cassette.run(no_tool, inputs={"question": "What is the capital of France?"})
    assert golden.result == {
        "answer": "Paris is the capital of France.",
        "stop_reason": "completed",
        "steps": 1,
        "tool_calls": [],
    }
    assert golden.report.served == 1


@pytest.mark.rar_golden("max_steps")
def test_hitting_max_steps(rar_cassette: RarCassette) -> None:
    golden = rar_cassette.run(max_steps, inputs={"question": "Keep adding."})
    assert golden.result["stop_reason"] == "max_steps" and golden.result["steps"] == 3
    assert [c["content"] for c in golden.result["tool_calls"]] == ["1.0", "2.0", "3.0"]
    assert golden.report.served == 6


def test_the_cassettes_are_small_and_self_contained() -> None:
    root = Path(__file__).parent / "golden"
    for name in (
        "one_tool_call",
        "parallel_tool_calls",
        "tool_error_recovery",
        "no_tool",
        "max_steps",
    ):
        files = [p for p in (root / name).rglob("*") if p.is_file() and p.name != "index.sqlite"]
        kinds = sorted(p.suffix if p.suffix == ".pack" else p.name for p in files)
        assert kinds == [".pack", "cassette.json", "events.jsonl", "manifest.json"], kinds
        assert sum(p.stat().st_size for p in files) < 64_000
        for path in files:  # recorded in a temporary directory: no path of this checkout
            assert str(root.parent.parent) not in path.read_bytes().decode("utf-8", "replace")


# --- the plugin itself, on tiny test files ----------------------------------------------------

INNER = '''
from rar.loop import Agent
from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.tools import tool

SYSTEM = {system!r}


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def agent(run, question):
    script = [Message.assistant(tool_calls=[tool_call("add", "c1", a=2, b=3)]), "5."]
    client = Client(ScriptedModel(script), run=run, profiles=Profiles())
    result = Agent(client, [add], system_prompt=SYSTEM).run(question, run=run)
    return result.text


def test_agent(rar_cassette):
    golden = rar_cassette.run(agent, inputs={{"question": {question!r}}}, name="inner")
    assert golden.result == "5."
'''


def _inner(pytester: pytest.Pytester, system: str = "Be brief.", question: str = "2 + 3?") -> None:
    pytester.makepyfile(test_inner_golden=INNER.format(system=system, question=question))


def _pytest(pytester: pytest.Pytester, *args: str, autoload: bool = False) -> pytest.RunResult:
    """Run pytest on the tiny files; only the rar plugin (faster than every installed plugin)."""
    if autoload:  # the plugin as users get it: through its pytest11 entry point
        return pytester.runpytest("-p", "no:cacheprovider", *args)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        return pytester.runpytest(
            "-p", "no:cacheprovider", "-p", "rar.testing.plugin", "--assert=plain", *args
        )


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_the_plugin_records_only_when_asked_and_then_replays(pytester: pytest.Pytester) -> None:
    _inner(pytester)
    missing = _pytest(pytester, autoload=True)
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(
        ["*no RAR cassette 'inner'*", "*pytest --rar-record test_inner_golden.py::test_agent*"]
    )
    assert not (pytester.path / "golden").exists()  # never records silently

    _pytest(pytester, "--rar-record").assert_outcomes(passed=1)
    cassette = pytester.path / "golden" / "inner"
    assert (cassette / "cassette.json").is_file()
    before = _digests(cassette)
    _pytest(pytester).assert_outcomes(passed=1)
    assert _digests(cassette) == before  # a replay leaves the checked-in cassette as it is


def test_a_changed_system_prompt_fails_with_the_first_divergence(
    pytester: pytest.Pytester,
) -> None:
    _inner(pytester, system="Be brief.")
    _pytest(pytester, "--rar-record").assert_outcomes(passed=1)
    _inner(pytester, system="Be sloppy and long-winded.")
    result = _pytest(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*golden run 'inner' diverged from its cassette: non-reproducible*",
            "*first divergence: a different request than recorded*",
            "*span:    run/step*",
            "*ordinal: 0*",
            "*kind:    llm*",
            "*request.messages[[]0[]].content: 'Be brief.' -> 'Be sloppy and long-winded.'*",
            "*record the cassette again: pytest --rar-record*",
        ]
    )


def test_changed_inputs_fail_instead_of_replaying_the_recorded_ones(
    pytester: pytest.Pytester,
) -> None:
    _inner(pytester)
    _pytest(pytester, "--rar-record").assert_outcomes(passed=1)
    _inner(pytester, question="2 + 4?")
    result = _pytest(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the inputs differ*", "*question: '2 + 3?' -> '2 + 4?'*"])


def test_record_mode_missing_records_only_new_cassettes(pytester: pytest.Pytester) -> None:
    _inner(pytester)
    _pytest(pytester, "--rar-record").assert_outcomes(passed=1)
    cassette = pytester.path / "golden" / "inner"
    before = _digests(cassette)
    pytester.makepyfile(
        test_second=INNER.format(system="Other.", question="x").replace(
            'name="inner"', 'name="second"'
        )
    )
    result = _pytest(pytester, "--rar-record-mode=missing")
    result.assert_outcomes(passed=2)
    assert _digests(cassette) == before
    assert (pytester.path / "golden" / "second" / "cassette.json").is_file()


@pytest.mark.parametrize("part", ["log", "pack"])
def test_a_damaged_cassette_fails_with_a_clear_message(
    pytester: pytest.Pytester, part: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if part == "pack":
        monkeypatch.setenv("RAR_CARRY_LIMIT", "0")  # every blob in the pack damaged below
    _inner(pytester)
    _pytest(pytester, "--rar-record").assert_outcomes(passed=1)
    cassette = pytester.path / "golden" / "inner"
    (target,) = cassette.glob("*/events.jsonl" if part == "log" else "blobs/packs/*.pack")
    damaged = bytearray(target.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01
    target.write_bytes(bytes(damaged))
    result = _pytest(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cassette 'inner'*cannot be replayed*fails verification*"])


# --- the same without pytest: record_cassette / replay_cassette -------------------------------


def test_a_failed_run_is_a_golden_run_too(tmp_path: Path) -> None:
    def fails(run: Run, n: int) -> int:
        run.effect("tool", {"n": n}, lambda: n)
        raise ValueError(f"no answer for {n}")

    cassette = tmp_path / "fails"
    with pytest.raises(ValueError, match="no answer for 3"):
        record_cassette(cassette, fails, inputs={"n": 3})
    assert (cassette / "cassette.json").is_file()
    with pytest.raises(ValueError, match="no answer for 3"):
        replay_cassette(cassette, fails, inputs={"n": 3})
    golden = replay_cassette(cassette, fails, inputs={"n": 3}, raise_error=False)
    assert isinstance(golden.error, ValueError) and golden.report.reproducible


def test_ending_differently_after_the_last_effect_is_a_mismatch(tmp_path: Path) -> None:
    def answers(run: Run) -> int:
        return run.effect("tool", {"n": 1}, lambda: 1)

    def raises(run: Run) -> int:
        run.effect("tool", {"n": 1}, lambda: 1)
        raise KeyError("changed")

    record_cassette(tmp_path / "c", answers)
    assert replay_cassette(tmp_path / "c", answers).result == 1
    with pytest.raises(GoldenMismatchError, match="now fails with KeyError") as info:
        replay_cassette(tmp_path / "c", raises)
    assert "the replay raised KeyError" in str(info.value)


def test_an_entrypoint_that_is_not_a_function_of_its_effects_is_not_recorded(
    tmp_path: Path,
) -> None:
    counter = iter(range(100))

    def drifts(run: Run) -> int:
        return run.effect("tool", {"n": 1}, lambda: 1) + next(counter)  # state outside the run

    with pytest.raises(GoldenMismatchError, match="just recorded and does not replay"):
        record_cassette(tmp_path / "drifts", drifts)
    assert not (tmp_path / "drifts").exists()


def test_a_missing_cassette_is_an_error_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(CassetteMissingError, match="no cassette at"):
        replay_cassette(tmp_path / "nothing", no_tool)
