"""Strict replay speed: a 10k-effect scripted run, and replay vs recording with a slow model.

* effects/s of ``rar.replay.replay(run, mode="strict")`` over a run of 10,000 model calls made
  through the client with the scripted model (recorded with durable=False; the replay records
  with the source's durability);
* the same run shape with a model that takes 50 ms per call: recording wall time vs strict
  replay wall time (fewer calls, since recording them takes 50 ms each).

Each row records the run afresh and replays it, alternately (``--quick``: 2 rounds, else 3):
recording the same run is the floor a replay is compared with.

    python bench/replay_speed.py [--quick] [--profile]

Goals: >= 20,000 effects/s, and >= 3x faster than recording the same run.
"""

from __future__ import annotations

import time
from typing import Any

import _common
from _common import median, table, temp_dir

from rar.llm import Message, Request, ScriptedModel
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.runtime.run import Run
from rar.store.store import Store

GOAL = 20_000
QUIET = Redactor(env={})


def answer(request: Request) -> str:
    return f"answer to {request.messages[-1].content}"


def slow_answer(request: Request) -> str:
    time.sleep(0.05)
    return answer(request)


def calls(run: Run, count: int, slow: bool) -> int:
    client = Client(ScriptedModel(slow_answer if slow else answer), run=run, profiles=Profiles(),
                    cache=False)
    for i in range(count):
        client.complete(messages=[Message.user(f"question {i}")])
    return count


def plain(run: Run, count: int) -> int:
    """Effects without the model client: what the replay engine itself costs."""
    total = 0
    for i in range(count):
        total += run.effect("tool", {"name": "lookup", "args": {"i": i}}, lambda i=i: i)
    return total


def measure(store: Store, function, inputs: dict[str, Any], rounds: int) -> tuple[float, float]:
    """(median record seconds, median strict-replay seconds), rounds interleaved."""
    records, replays = [], []
    for _ in range(rounds):
        began = time.perf_counter()
        run = execute(function, inputs=inputs, store=store, durable=False, redactor=QUIET)
        records.append(time.perf_counter() - began)
        began = time.perf_counter()
        report = replay(run.id, store=store, redactor=QUIET)
        replays.append(time.perf_counter() - began)
        assert report.reproducible, report.as_dict()
    return median(records), median(replays)


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    count, slow_count, rounds = (1_000, 10, 2) if args.quick else (10_000, 60, 3)
    rows: list[list[Any]] = []
    with temp_dir("replay") as tmp:
        store = Store(tmp / "store", create=True)
        cases = [
            (f"{count:,} scripted model calls (client)", calls, {"count": count, "slow": False}),
            (f"{count:,} run.effect calls (engine only)", plain, {"count": count}),
            (f"{slow_count} calls, model 50 ms each", calls, {"count": slow_count, "slow": True}),
        ]
        for label, function, inputs in cases:
            record_s, replay_s = measure(store, function, inputs, rounds)
            effects = int(inputs["count"])
            rate = effects / replay_s
            speedup = record_s / replay_s
            slow = bool(inputs.get("slow"))
            met = speedup >= 3 if slow else rate >= GOAL and speedup >= 3
            rows.append([label, f"{record_s:.3f}", f"{replay_s:.3f}", f"{rate:,.0f}",
                         f"{speedup:.2f}x", ">= 3x" if slow else f">= {GOAL:,}/s, >= 3x",
                         _common.verdict(met)])
            if function is calls and not slow:
                _common.summary("strict replay (client calls)", f"{rate:,.0f} effects/s",
                                f"recording {effects / record_s:,.0f}/s ({speedup:.2f}x)",
                                ">= 20k/s, >= 3x recording", met)
        with _common.profiled(args.profile, "strict replay of the client run"):
            run = execute(calls, inputs={"count": count, "slow": False}, store=store,
                          durable=False, redactor=QUIET)
            if args.profile:
                replay(run.id, store=store, redactor=QUIET)
    print(table(["run", "record s", "strict replay s", "effects/s (replay)",
                 "replay vs record", "goal", "met"],
                rows, title=f"replay_speed: medians of {rounds} interleaved record/replay rounds"))


if __name__ == "__main__":
    main()
