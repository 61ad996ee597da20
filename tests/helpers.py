"""Small helpers shared by tests: record a run with a few effects."""

from __future__ import annotations

from typing import Any

from rar.hashing import Canonical
from rar.redaction import Redactor
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.store.store import Store


def record_small_run(
    store: Store, *, steps: int = 3, seed: int = 1, goal: str = "test goal", durable: bool = True
) -> Run:
    run = record(goal, store=store, seed=seed, durable=durable, redactor=Redactor(env={}))
    with run:
        messages: list[Any] = [Canonical({"role": "user", "content": goal})]
        for step in range(steps):
            reply = run.effect(
                "llm",
                {"model": "m", "messages": messages},
                lambda step=step: {"content": f"reply {step}", "n": step},
            )
            messages = [*messages, Canonical({"role": "assistant", "content": reply["content"]})]
            run.effect("tool", {"name": "t", "args": {"i": step}}, lambda step=step: step * 2)
    return run
