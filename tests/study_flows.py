"""Flow entrypoints for the study tests: a seeded one whose answer depends on the seed, and one
that always fails."""

from __future__ import annotations

from typing import Any

from rar.runtime.run import Run


def coin(run: Run, sides: int = 3) -> dict[str, Any]:
    """Answers ``x = N`` with N drawn from the run's seeded stream: seeds disagree."""
    value = run.randint(1, sides)
    return {"answer": f"x = {value}", "claims": [{"text": f"x = {value}"}]}


def broken(run: Run) -> dict[str, Any]:
    raise ValueError("broken on purpose")
