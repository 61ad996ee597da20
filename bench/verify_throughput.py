"""Verification throughput: ``verify_store`` over a run of 100k events, per run and whole store.

The run is recorded with durable=False and a mix of small effects: tool calls with small inline
payloads, ``run.random()``, ``run.now()``, short LLM conversations (message chains in blobs) and
tool calls whose ~2 KB result is stored as a blob. Each timing uses a fresh ``Store`` object.

Beside it, in the same run and interleaved with it, the floor: sha256 over the same bytes
(every log line, and every blob the run refers to, decompressed, as verify hashes them), with
the log read from disk each time.

    python bench/verify_throughput.py [--quick] [--profile]

Goals: >= 100,000 events/s, and within 3x of the sha256 floor.
"""

from __future__ import annotations

import hashlib
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
FLOOR_RATIO = 3.0


def floor_inputs(store_dir, run_id: str) -> tuple[object, list[bytes]]:
    """The log's path and the raw bytes of every blob the run's verification hashed."""
    store = Store(store_dir)
    try:
        log = store.run_dir(run_id) / "events.jsonl"
        from rar.store.catalog import PackCatalog

        catalog = PackCatalog(store.reader)
        catalog.refresh()
        blobs = [store.reader.read(d, loc) for d, loc in catalog.locations.items()]
    finally:
        store.close()
    return log, blobs


def sha_floor(log, blobs: list[bytes]) -> float:
    t0 = time.perf_counter()
    data = log.read_bytes()
    for line in data.split(b"\n"):
        hashlib.sha256(line).hexdigest()
    for raw in blobs:
        hashlib.sha256(raw).hexdigest()
    return time.perf_counter() - t0


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
    target, reps = (10_000, 3) if args.quick else (100_000, 5)
    with temp_dir("verify") as tmp:
        store_dir = tmp / "store"
        run_id, build_s, mix = build(store_dir, target)
        log, blobs = floor_inputs(store_dir, run_id)
        rows = []
        floor_times: list[float] = []
        results: dict[str, list[float]] = {"run": [], "store": []}
        reports: dict[str, object] = {}
        for _ in range(reps):  # interleaved: floor, one run, whole store
            floor_times.append(sha_floor(log, blobs))
            for key, ids in (("run", [run_id]), ("store", None)):
                seconds, reports[key] = timed(store_dir, ids)
                results[key].append(seconds)
        floor = median(floor_times)
        events = reports["run"].events  # type: ignore[attr-defined]
        rows.append(["floor: sha256 of the same bytes", events, len(blobs), "-", floor * 1e3,
                     events / floor, "-", "-", "-"])
        for key, label in (("run", "one run  verify_store(store, [id])"),
                           ("store", "whole store  verify_store(store)")):
            report = reports[key]
            sec = median(results[key])
            rate = report.events / sec  # type: ignore[attr-defined]
            ratio = sec / floor
            met = rate >= GOAL and ratio <= FLOOR_RATIO
            rows.append([label, report.events, report.blobs, len(report.problems), sec * 1e3,  # type: ignore[attr-defined]
                         rate, f"{ratio:.1f}x", f">= {GOAL:,}/s, <= {FLOOR_RATIO:.0f}x floor",
                         _common.verdict(met)])
            if key == "run":
                _common.summary("rar verify (one run)", f"{rate:,.0f} events/s",
                                f"sha256 {events / floor:,.0f}/s ({ratio:.1f}x)",
                                ">= 100k/s, <= 3x floor", met)
        print(f"verify_throughput: built 1 run of {target:,} events in {build_s:.1f} s "
              f"(durable=False); effect mix {mix}")
        print(table(["what", "events", "blobs", "problems", "ms (median)", "events/s",
                     "x floor", "goal", "met"], rows,
                    title=f"median of {reps}, interleaved"))
        with _common.profiled(args.profile, "verify_store(store, [id])"):
            timed(store_dir, [run_id])


if __name__ == "__main__":
    main()
