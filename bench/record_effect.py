"""Recording cost per effect: ~2 KB request, ~1 KB result, durable=False and durable=True.

Each repetition records a fresh run of N effects (``run.effect("tool", request, lambda: result)``)
with distinct requests and results (so no blob is deduplicated), and times the effect loop.
``finish()`` (snapshot, manifest, blob index) is timed separately and reported amortised.

    python bench/record_effect.py [--quick] [--profile]

Goal: <= 30 µs per effect without fsync (durable=False).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import time

import _common
from _common import median, table, temp_dir, text

from rar.hashing import canonical
from rar.redaction import Redactor
from rar.runtime.start import record

GOAL_US = 30.0
POOL = 256


def make_payloads(count: int) -> tuple[list[dict], list[dict]]:
    """Distinct ~2 KB requests and ~1 KB results (canonical JSON sizes), deterministic."""
    rng = random.Random(7)
    queries = [text(rng, 1850) for _ in range(POOL)]
    notes = [text(rng, 940) for _ in range(POOL)]
    requests = []
    results = []
    for i in range(count):
        requests.append({
            "name": "search",
            "args": {"query": f"{i} {queries[i % POOL]}", "top_k": 5, "lang": "en",
                     "filters": {"year": 2024, "score": 0.5}},
        })
        results.append({"ok": True, "hits": 5, "text": f"{i} {notes[(i * 7) % POOL]}"})
    return requests, results


def one_repetition(store_dir, requests, results, durable: bool) -> tuple[float, float]:
    """Return (seconds for the effect loop, seconds for finish())."""
    redactor = Redactor(env={})
    run = record("bench", store=store_dir, seed=1, durable=durable, redactor=redactor)
    effect = run.effect
    t0 = time.perf_counter()
    for request, result in zip(requests, results, strict=True):
        effect("tool", request, lambda result=result: result)
    t1 = time.perf_counter()
    run.finish()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def measure(n: int, reps: int, durable: bool, requests, results) -> dict[str, float]:
    loops, finishes = [], []
    with temp_dir("record") as tmp:
        for rep in range(reps):
            loop, fin = one_repetition(tmp / f"store-{rep}", requests, results, durable)
            loops.append(loop)
            finishes.append(fin)
    per = [s / n * 1e6 for s in loops]
    return {
        "median": median(per),
        "min": min(per),
        "max": max(per),
        "finish_ms": median(finishes) * 1e3,
        "with_finish": median([(a + b) / n * 1e6 for a, b in zip(loops, finishes, strict=True)]),
    }


def profile(n: int, durable: bool, requests, results) -> str:
    with temp_dir("record-prof") as tmp:
        prof = cProfile.Profile()
        prof.enable()
        one_repetition(tmp / "store", requests, results, durable)
        prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).sort_stats("tottime")
    stats.print_stats(18)
    return out.getvalue()


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [("--profile", {"action": "store_true", "help": "also print cProfile top costs"})],
    )
    n, reps = (300, 2) if args.quick else (2000, 5)
    requests, results = make_payloads(n)
    req_size = len(canonical(requests[0]))
    res_size = len(canonical(results[0]))
    rows = []
    lean = 0.0
    for durable in (False, True):
        m = measure(n, reps, durable, requests, results)
        if not durable:
            lean = m["median"]
        goal = f"<= {GOAL_US:.0f}" if not durable else "-"
        ok = _common.verdict(m["median"] <= GOAL_US) if not durable else "-"
        rows.append([f"durable={durable}", m["median"], m["min"], m["max"], m["with_finish"],
                     m["finish_ms"], goal, ok])
    print(table(
        ["mode", "µs/effect (median)", "min", "max", "µs/effect incl. finish", "finish ms",
         "goal µs", "met"],
        rows,
        title=f"record_effect: {reps} repetitions x {n} effects; request {req_size} B, "
              f"result {res_size} B (canonical JSON)",
    ))
    _common.summary(
        "run.effect, durable=False (2 KB request, 1 KB result)",
        f"{lean:,.0f} µs",
        "-",
        f"<= {GOAL_US:.0f} µs",
        lean <= GOAL_US,
    )
    if args.profile:
        for durable in (False, True):
            print(f"\ncProfile, durable={durable}, {n} effects (top by own time):")
            print(profile(n, durable, requests, results))


if __name__ == "__main__":
    main()
