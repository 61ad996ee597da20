"""Durable conversation steps: RAR beside the JSONL + fsync floor, measured in the same run.

    python bench/durable_step.py [--quick] [--steps N] [--rounds R] [--profile]

A conversation of ``--steps`` steps (200 B user message + 1 KB reply, the whole history in each
request, plain-dict messages as the README passes them) recorded with ``durable=True``; each step
is one ``run.effect("llm", ...)`` that returns only once its event is on disk. Beside it, in
interleaved rounds:

* **floor**: the same two messages appended as one JSON line to a file, with one fsync per step;
* **RAR**: the default, where a step's new small blobs travel in its event's line (one fsync);
* **RAR, blobs in packs**: every blob written to the pack first (``CARRY_LIMIT = 0``), the
  layout before carried blobs: a pack fsync, then the log's (two fsyncs per step).

Reports the median µs per step of each round's median, the ratio to the floor, and bytes on
disk. Goal (issue 15): ≤ 1.3× the floor.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import _common
import orjson

from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store import writer as writer_module
from rar.store.store import Store
from rar.store.verify import verify_store

USER_BYTES = 200
REPLY_BYTES = 1024


def turns(steps: int) -> list[tuple[dict[str, str], dict[str, str]]]:
    rng = random.Random(7)
    return [
        (
            {"role": "user", "content": f"[{i}] " + _common.text(rng, USER_BYTES)},
            {"role": "assistant", "content": f"[{i}] " + _common.text(rng, REPLY_BYTES)},
        )
        for i in range(steps)
    ]


def floor(root: Path, convo: list[tuple[dict[str, str], dict[str, str]]]) -> list[float]:
    path = root / "floor.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times = []
    try:
        for user, reply in convo:
            t0 = time.perf_counter()
            os.write(fd, orjson.dumps({"user": user, "reply": reply}) + b"\n")
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
    return times


def rar(root: Path, convo, *, carry: bool, check: bool = False) -> tuple[list[float], int]:
    saved = writer_module.CARRY_LIMIT
    writer_module.CARRY_LIMIT = saved if carry else 0
    try:
        store_dir = root / ("carry" if carry else "packs")
        run = record("durable step bench", store=store_dir, durable=True, redactor=Redactor(env={}))
        messages: list[dict[str, str]] = []
        times = []
        for user, reply in convo:
            t0 = time.perf_counter()
            messages.append(user)
            answer = run.effect(
                "llm", {"model": "m", "messages": messages}, lambda reply=reply: reply
            )
            messages.append(answer)
            times.append(time.perf_counter() - t0)
        run.finish()
    finally:
        writer_module.CARRY_LIMIT = saved
    size = _common.dir_size(store_dir)
    if check:
        store = Store(store_dir)
        report = verify_store(store, [run.id])
        assert report.ok, report.problems[:3]
        last = [e for e in store.events(run.id) if e["type"] == "effect"][-1]
        assert store.resolve_payload(last["request"])["messages"][-1] == convo[-1][0]
        store.close()
    return times, size


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [
            ("--steps", {"type": int, "default": 200}),
            ("--rounds", {"type": int, "default": 0, "help": "interleaved rounds (default 5/3)"}),
        ],
    )
    rounds = args.rounds or (3 if args.quick else 5)
    convo = turns(args.steps)
    results: dict[str, list[float]] = {"floor": [], "carry": [], "packs": []}
    sizes: dict[str, int] = {}
    with _common.temp_dir("durable-step") as tmp:
        for r in range(rounds):
            for name in ("floor", "carry", "packs"):
                root = tmp / f"{name}-{r}"
                root.mkdir()
                if name == "floor":
                    times = floor(root, convo)
                    sizes[name] = (root / "floor.jsonl").stat().st_size
                else:
                    with _common.profiled(args.profile and name == "carry" and r == 0, name):
                        times, sizes[name] = rar(root, convo, carry=name == "carry", check=r == 0)
                results[name].append(_common.median(times) * 1e6)
    base = _common.median(results["floor"])
    rows = []
    labels = {"floor": "JSONL + fsync (floor)", "carry": "RAR", "packs": "RAR, blobs in packs"}
    for name, label in labels.items():
        value = _common.median(results[name])
        rows.append([label, f"{value:,.0f}", f"{value / base:.2f}", f"{sizes[name] / 1e3:,.0f}"])
    print(
        _common.table(
            ["path", "µs/step (median)", "× floor", "kB on disk"],
            rows,
            f"durable_step: {args.steps} steps, {rounds} interleaved rounds, "
            "plain-dict messages, durable=True",
        )
    )
    ratio = _common.median(results["carry"]) / base
    _common.summary(
        "durable step, plain dicts",
        f"{_common.median(results['carry']):,.0f} µs",
        f"{base:,.0f} µs",
        "≤ 1.3× floor",
        ratio <= 1.3,
    )


if __name__ == "__main__":
    main()
