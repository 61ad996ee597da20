"""Strict replay speed: a 10k-effect scripted run, and replay vs recording with a slow model.

* effects/s of ``rar.replay.replay(run, mode="strict")`` over a run of 10,000 model calls made
  through the client with the scripted model (recorded with durable=False; the replay records
  with the source's durability);
* the same run shape with a model that takes 50 ms per call: recording wall time vs strict
  replay wall time (fewer calls, since recording them takes 50 ms each).

    python bench/replay_speed.py [--quick]

Goal: >= 20,000 effects/s.
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


def measure(store: Store, run_id: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        began = time.perf_counter()
        report = replay(run_id, store=store, redactor=QUIET)
        times.append(time.perf_counter() - began)
        assert report.reproducible, report.as_dict()
    return median(times)


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    count, slow_count, reps = (1_000, 10, 2) if args.quick else (10_000, 60, 3)
    rows: list[list[Any]] = []
    with temp_dir("replay") as tmp:
        store = Store(tmp / "store", create=True)
        started = time.perf_counter()
        run = execute(calls, inputs={"count": count, "slow": False}, store=store,
                      durable=False, redactor=QUIET)
        record_s = time.perf_counter() - started
        seconds = measure(store, run.id, reps)
        rate = count / seconds
        rows.append([f"{count:,} scripted model calls (client)", f"{record_s:.2f}",
                     f"{seconds:.2f}", f"{rate:,.0f}", f">= {GOAL:,}",
                     _common.verdict(rate >= GOAL)])
        started = time.perf_counter()
        bare = execute(plain, inputs={"count": count}, store=store, durable=False,
                       redactor=QUIET)
        bare_record = time.perf_counter() - started
        seconds = measure(store, bare.id, reps)
        rate = count / seconds
        rows.append([f"{count:,} run.effect calls (engine only)", f"{bare_record:.2f}",
                     f"{seconds:.2f}", f"{rate:,.0f}", f">= {GOAL:,}",
                     _common.verdict(rate >= GOAL)])
        started = time.perf_counter()
        slow = execute(calls, inputs={"count": slow_count, "slow": True}, store=store,
                       durable=False, redactor=QUIET)
        slow_record = time.perf_counter() - started
        began = time.perf_counter()
        assert replay(slow.id, store=store, redactor=QUIET).reproducible
        slow_replay = time.perf_counter() - began
        rows.append([f"{slow_count} calls, model 50 ms each", f"{slow_record:.2f}",
                     f"{slow_replay:.3f}", f"{slow_count / slow_replay:,.0f}",
                     f"replay {slow_record / slow_replay:,.0f}x faster than recording", "-"])
    print(table(["run", "record s", "strict replay s (median)", "effects/s", "goal", "met"],
                rows, title=f"replay_speed: median of {reps} replays"))


if __name__ == "__main__":
    main()
