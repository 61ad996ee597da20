"""Verification throughput: ``verify_store`` over a run of 100k events, per run and whole store.

The run is recorded with durable=False and a mix of small effects: tool calls with small inline
payloads, ``run.random()``, ``run.now()``, short LLM conversations (message chains in blobs) and
tool calls whose ~2 KB result is stored as a blob. Each timing uses a fresh ``Store`` object.

    python bench/verify_throughput.py [--quick]

Goal: >= 100,000 events/s.
"""

from __future__ import annotations

import random
import time

import _common
from _common import median, table, temp_dir, text

from rar.hashing import Canonical
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store
from rar.store.verify import verify_store

GOAL = 100_000


def build(store_dir, target_events: int) -> tuple[str, float, dict[str, int]]:
    rng = random.Random(11)
    snippets = [text(rng, rng.randint(40, 160)) for _ in range(512)]
    big = [text(rng, 2000) for _ in range(64)]
    mix = {"tool-small": 0, "random": 0, "clock": 0, "llm": 0, "tool-blob": 0}
    t0 = time.perf_counter()
    run = record("verify bench", store=store_dir, seed=3, durable=False,
                 redactor=Redactor(env={}))
    messages: list[Canonical] = []
    i = 0
    # run.started + 2 snapshots + run.finished = 4 events besides effects
    while i < target_events - 4:
        roll = i % 10
        if roll < 4:
            s = snippets[i % 512]
            run.effect("tool", {"name": "lookup", "args": {"q": s[:60], "n": i}},
                       lambda s=s: {"ok": True, "text": s})
            mix["tool-small"] += 1
        elif roll < 6:
            run.random()
            mix["random"] += 1
        elif roll == 6:
            run.now()
            mix["clock"] += 1
        elif roll < 9:
            if len(messages) >= 12:
                messages = []
            messages.append(Canonical({"role": "user", "content": f"{i} {snippets[i % 512]}"}))
            reply = {"role": "assistant", "content": f"{i} {snippets[(i * 3) % 512]}"}
            run.effect("llm", {"model": "m", "messages": list(messages)}, lambda r=reply: r)
            messages.append(Canonical(reply))
            mix["llm"] += 1
        else:
            b = big[i % 64]
            run.effect("tool", {"name": "fetch", "args": {"url": f"https://example.org/{i}"}},
                       lambda b=b, i=i: {"status": 200, "body": f"{i} {b}"})
            mix["tool-blob"] += 1
        i += 1
    run.finish()
    return run.id, time.perf_counter() - t0, mix


def timed(store_dir, run_ids) -> tuple[float, object]:
    store = Store(store_dir)
    try:
        t0 = time.perf_counter()
        report = verify_store(store, run_ids)
        return time.perf_counter() - t0, report
    finally:
        store.close()


def main() -> None:
    args = _common.parse_args(__doc__.splitlines()[0])
    target, reps = (10_000, 3) if args.quick else (100_000, 3)
    with temp_dir("verify") as tmp:
        store_dir = tmp / "store"
        run_id, build_s, mix = build(store_dir, target)
        rows = []
        for label, ids in (("one run  verify_store(store, [id])", [run_id]),
                           ("whole store  verify_store(store)", None)):
            times = []
            report = None
            for _ in range(reps):
                seconds, report = timed(store_dir, ids)
                times.append(seconds)
            sec = median(times)
            rate = report.events / sec
            rows.append([label, report.events, report.blobs, len(report.problems), sec * 1e3,
                         rate, f">= {GOAL:,}", _common.verdict(rate >= GOAL)])
        print(f"verify_throughput: built 1 run of {target:,} events in {build_s:.1f} s "
              f"(durable=False); effect mix {mix}")
        print(table(["what", "events", "blobs", "problems", "ms (median)", "events/s", "goal",
                     "met"], rows, title=f"median of {reps}"))


if __name__ == "__main__":
    main()
