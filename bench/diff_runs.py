"""`diff_runs` on two 10k-event runs: identical, a handful of changes, every llm request changed.

Each run has 2,000 step spans holding one llm-shaped and two tool effects (10,004 events with the
start, snapshot and finish events), recorded with durable=False. Run B repeats run A with: the
same content (``identical``); both tool results of 3 steps and 2 model answers changed, 2 tool
calls inserted and 1 removed, 11 steps in all (``handful``); every llm request changed, as by
another temperature (``every llm request``). ``diff_runs(store, a, b)`` is timed, reading both
logs and manifests included (a fresh ``Store`` each time), median of 5.

    python bench/diff_runs.py [--quick]

Goal: <= 1 s for two 10k-event runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import _common
from _common import median, table, temp_dir

from rar.redaction import Redactor
from rar.replay.diff import diff_runs
from rar.runtime.start import record
from rar.store.store import Store

GOAL_S = 1.0
STEPS = 2000
CHANGED_RESULTS = {137: "tool", 901: "tool", 1555: "tool", 420: "llm", 1710: "llm"}
INSERTED = {333, 1234}  # an extra tool call in these steps
REMOVED = {1800}  # the second tool call left out of this step

Variant = Callable[[int, str], tuple[dict, dict] | None]


def same(step: int, what: str) -> tuple[dict, dict] | None:
    return _effect(step, what)


def handful(step: int, what: str) -> tuple[dict, dict] | None:
    if what == "tool-2" and step in REMOVED:
        return None
    request, result = _effect(step, what)
    if CHANGED_RESULTS.get(step) == what.split("-")[0]:
        result = {**result, "changed": True}
    return request, result


def every_llm_request(step: int, what: str) -> tuple[dict, dict] | None:
    request, result = _effect(step, what)
    if what == "llm":
        request = {**request, "request": {**request["request"], "temperature": 0.7}}
    return request, result


def _effect(step: int, what: str) -> tuple[dict, dict]:
    if what == "llm":
        request = {
            "provider": "scripted",
            "base_url": None,
            "request": {"model": "m", "prompt": f"step {step}: what next?"},
        }
        response = {"content": f"call the tools for {step}", "tool_calls": [], "usage": {}}
        return request, {"response": response, "cached": False}
    args = {"query": f"{what} of step {step}", "top_k": 5}
    return {"name": "search", "version": "1", "args": args, "call_id": f"c{step}-{what}"}, {
        "ok": True,
        "value": step,
        "content": f"{what} result {step}",
    }


def record_run(store: Store, variant: Variant, *, extra: bool) -> str:
    run = record("bench", store=store, seed=1, durable=False, redactor=Redactor(env={}))
    with run:
        for step in range(STEPS):
            with run.span("step"):
                for what in ("llm", "tool-1", "tool-2"):
                    if extra and what == "tool-2" and step in INSERTED:
                        run.effect("tool", {"name": "extra", "args": {"step": step}}, lambda: 1)
                    effect = variant(step, what)
                    if effect is not None:
                        request, result = effect
                        kind = "llm" if what == "llm" else "tool"
                        run.effect(kind, request, lambda result=result: result)
        run.finish(result={"answer": "done"})
    return run.id


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    reps = 2 if args.quick else 5
    rows = []
    with temp_dir("diff") as tmp:
        store = Store(tmp / "store", create=True)
        base = record_run(store, same, extra=False)
        scenarios = [
            ("identical", record_run(store, same, extra=False)),
            ("handful", record_run(store, handful, extra=True)),
            ("every llm request", record_run(store, every_llm_request, extra=False)),
        ]
        for name, other in scenarios:
            times = []
            for _ in range(reps):
                fresh = Store(store.root)  # no warm blob or index handles between repetitions
                began = time.perf_counter()
                diff = diff_runs(fresh, base, other)
                times.append(time.perf_counter() - began)
                fresh.close()
            differing = len(diff.steps) - diff.counts["same"]
            rows.append(
                [
                    name,
                    diff.a.events,
                    diff.b.events,
                    len(diff.steps),
                    differing,
                    diff.first_divergence.aligned.status if diff.first_divergence else "-",
                    median(times) * 1e3,
                    min(times) * 1e3,
                    max(times) * 1e3,
                    f"<= {GOAL_S * 1e3:.0f}",
                    _common.verdict(median(times) <= GOAL_S),
                ]
            )
        store.close()
    print(
        table(
            [
                "B vs A",
                "events A",
                "events B",
                "aligned steps",
                "not same",
                "first divergence",
                "ms (median)",
                "min",
                "max",
                "goal ms",
                "met",
            ],
            rows,
            title=f"diff_runs: {reps} repetitions; {STEPS} step spans x (1 llm + 2 tool effects)",
        )
    )


if __name__ == "__main__":
    main()
