"""The embedded demo: a small agent run, recorded offline with no API key.

A scripted model answers a question about Arrhenius rate constants in a few turns, calling the
built-in calculator twice, through the same agent loop, client and tool registry that real models
use. Every model turn and tool call passes through the run's effect boundary, so the run lands in
the store as a complete, verifiable record.
"""

from __future__ import annotations

from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.runtime.run import Run
from rar.store.store import Store
from rar.tools import calculator

QUESTION = (
    "Rate constants measured at 300 K and 320 K are 2.1e-3 and 8.4e-3 per second. "
    "What activation energy does the two-point Arrhenius equation give?"
)
SYSTEM = "You are a careful physical chemist. Use the calculator for arithmetic."
MODEL = "demo"

SCRIPT: list[str | Message] = [
    Message.assistant(
        "I will take the ratio of the rate constants first.",
        [tool_call("calculator", "call_1", expression="8.4e-3 / 2.1e-3")],
    ),
    Message.assistant(
        "Now Ea = R ln(k2/k1) / (1/T1 - 1/T2), with R = 8.314 J/(mol K).",
        [tool_call("calculator", "call_2", expression="8.314 * log(4) / (1/300 - 1/320) / 1000")],
    ),
    "The two-point Arrhenius estimate is Ea ≈ 55.3 kJ/mol "
    "(k rises fourfold between 300 K and 320 K).",
]


def demo_agent(run: Run, question: str) -> dict[str, str]:
    """The demo's entrypoint: answer ``question`` with the scripted model and the calculator."""
    client = Client(ScriptedModel(SCRIPT, model=MODEL), run=run, profiles=Profiles())
    with run.span("agent", agent="assistant"):
        result = Agent(client, [calculator], max_steps=5, system_prompt=SYSTEM).run(
            question, run=run
        )
    return {"answer": result.text, "stop_reason": result.stop_reason.value}


def run_demo(store: Store | None = None, *, seed: int = 7) -> Run:
    """Record the demo run into ``store`` and return the finished :class:`Run`."""
    from rar.replay.engine import execute

    return execute(
        demo_agent,
        inputs={"question": QUESTION},
        goal=QUESTION,
        store=store,
        seed=seed,
        models=[{"provider": "scripted", "model": MODEL}],
        tools=[{"name": calculator.name, "version": calculator.version}],
        tags={"kind": "demo"},
    )
