"""A 200-step scripted conversation recorded by RAR, by LangGraph + SqliteSaver, and as plain JSONL.

Each step appends a ~200-byte user message, then a ~1 KB model reply; the whole conversation so
far goes with every request. Messages are deterministic (seeded pseudo-prose).

(a) RAR: ``run.effect("llm", {"model": "m", "messages": messages}, lambda: reply)`` with
    ``messages`` a list of ``Canonical`` dicts, durable=True (fsync per effect);
(b) LangGraph 1.x: ``StateGraph(MessagesState)`` with one node returning the scripted reply,
    compiled with ``SqliteSaver`` on a file, invoked once per step with the new user message on
    one thread_id (default durability; the saver uses WAL, sqlite synchronous=FULL);
(c) the floor: both messages of a step appended as JSON lines, without and with fsync per step.

Sizes: the whole store directory for RAR, the sqlite file + -wal for LangGraph, the file for the
floor. Time: µs per step, median over steps (the step includes wrapping messages).

    python bench/conversation_vs_langgraph.py [--quick] [--steps N] [--profile]
    python bench/conversation_vs_langgraph.py --growth [--steps N]

``--growth``: per-step CPU (``time.thread_time``, durable=False, median of the 20 steps around
step 10 and around step N-10, N = 1000 by default) on four paths: plain dicts passed to
``run.effect`` (the README's API), ``Canonical`` messages, the model client (``Client`` with an
O(1) in-process provider, ``Message`` objects) and the agent loop (``Agent``, one tool call per
step). Goal: <= 2x growth on every path.

Goals: RAR <= 1 MB and <= 1 ms per step; >= 100x smaller and >= 18x faster than LangGraph;
within 4x of the floor with fsync.
"""

from __future__ import annotations

import cProfile
import io
import itertools
import os
import pstats
import random
import sqlite3
import time
from pathlib import Path

import _common
import orjson
from _common import dir_size, median, table, temp_dir, text

from rar.hashing import Canonical
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store
from rar.store.verify import verify_store

USER_BYTES = 200
REPLY_BYTES = 1000
GOAL_RAR_BYTES = 1_000_000
GOAL_RAR_US = 1000.0
GOAL_SMALLER = 100.0
GOAL_FASTER = 18.0
GOAL_FLOOR = 4.0


def _message(role: str, body: str, size: int) -> dict:
    """A message whose canonical JSON is ``size`` bytes."""
    overhead = len(orjson.dumps({"content": "", "role": role}))
    return {"role": role, "content": body[: size - overhead]}


def script(steps: int) -> list[tuple[dict, dict]]:
    rng = random.Random(42)
    out = []
    for i in range(steps):
        user = _message("user", f"[{i}] " + text(rng, USER_BYTES), USER_BYTES)
        reply = _message("assistant", f"[{i}] " + text(rng, REPLY_BYTES), REPLY_BYTES)
        out.append((user, reply))
    return out


def checkpoints(steps: int) -> list[int]:
    return [steps * k // 4 for k in (1, 2, 3, 4)]


# --- (a) RAR -----------------------------------------------------------------------------------


def run_rar(root: Path, turns, marks, profiler: cProfile.Profile | None = None):
    store_dir = root / "rar-store"
    run = record("conversation bench", store=store_dir, seed=1, durable=True,
                 redactor=Redactor(env={}))
    messages: list[Canonical] = []
    times: list[float] = []
    sizes: dict[int, int] = {}
    if profiler:
        profiler.enable()
    for step, (user, reply) in enumerate(turns, 1):
        t0 = time.perf_counter()
        messages.append(Canonical(user))
        answer = run.effect("llm", {"model": "m", "messages": messages},
                            lambda reply=reply: reply)
        messages.append(Canonical(answer))
        times.append(time.perf_counter() - t0)
        if step in marks:
            if profiler:
                profiler.disable()
            sizes[step] = dir_size(store_dir)
            if profiler:
                profiler.enable()
    if profiler:
        profiler.disable()
    run.finish()
    final = dir_size(store_dir)
    # sanity: the record verifies and the last request unlinks to the whole conversation
    store = Store(store_dir)
    report = verify_store(store, [run.id])
    last = [e for e in store.events(run.id) if e["type"] == "effect"][-1]
    plain = store.resolve_payload(last["request"])
    assert report.ok, report.problems[:3]
    assert len(plain["messages"]) == 2 * len(turns) - 1
    assert plain["messages"][-1] == turns[-1][0]
    store.close()
    return times, sizes, final


# --- (b) LangGraph -----------------------------------------------------------------------------


def run_langgraph(root: Path, turns, marks):
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    path = root / "langgraph.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    pending: list[dict] = []

    def model(state: MessagesState) -> dict:
        reply = pending.pop()
        return {"messages": [AIMessage(content=reply["content"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "conversation"}}

    def size() -> int:
        return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())

    times: list[float] = []
    sizes: dict[int, int] = {}
    out = None
    for step, (user, reply) in enumerate(turns, 1):
        pending.append(reply)
        t0 = time.perf_counter()
        out = app.invoke({"messages": [HumanMessage(content=user["content"])]}, config)
        times.append(time.perf_counter() - t0)
        if step in marks:
            sizes[step] = size()
    assert out is not None and len(out["messages"]) == 2 * len(turns)
    checkpoints_n = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    conn.close()
    return times, sizes, size(), checkpoints_n


# --- (c) the floor -----------------------------------------------------------------------------


def run_floor(root: Path, turns, marks, *, fsync: bool):
    path = root / f"floor-{'fsync' if fsync else 'nofsync'}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    times: list[float] = []
    sizes: dict[int, int] = {}
    try:
        for step, (user, reply) in enumerate(turns, 1):
            t0 = time.perf_counter()
            os.write(fd, orjson.dumps(user) + b"\n" + orjson.dumps(reply) + b"\n")
            if fsync:
                os.fsync(fd)
            times.append(time.perf_counter() - t0)
            if step in marks:
                sizes[step] = os.fstat(fd).st_size
    finally:
        os.close(fd)
    return times, sizes, path.stat().st_size


# --- --growth: per-step CPU at the start and the end of a long conversation ---------------------


class _Fixed:
    """An in-process provider answering in O(1) (the scripted model counts tokens per call)."""

    name = "fixed"
    base_url = None

    def __init__(self, answer) -> None:
        self.answer = answer

    def complete(self, request):
        return self.answer(request)


def growth_path(root: Path, path: str, steps: int) -> list[float]:
    """Per-step CPU seconds of one path (see the module docstring)."""
    from rar.llm.client import Client
    from rar.llm.profiles import Profiles
    from rar.llm.types import Message, Response

    rng = random.Random(7)
    run = record("growth", store=root / path, seed=1, durable=False, redactor=Redactor(env={}))
    times: list[float] = []
    clock = time.thread_time
    if path in ("plain dicts", "Canonical"):
        messages: list = []
        wrap = Canonical if path == "Canonical" else (lambda m: m)
        for i in range(steps):
            user = _message("user", f"[{i}] " + text(rng, USER_BYTES), USER_BYTES)
            reply = _message("assistant", f"[{i}] " + text(rng, REPLY_BYTES), REPLY_BYTES)
            t0 = clock()
            messages.append(wrap(user))
            answer = run.effect("llm", {"model": "m", "messages": messages},
                                lambda reply=reply: reply)
            messages.append(wrap(answer))
            times.append(clock() - t0)
    elif path == "model client":
        replies = [Response(content=f"[{i}] " + text(rng, REPLY_BYTES)) for i in range(steps)]
        count = iter(range(steps))
        client = Client(_Fixed(lambda request: replies[next(count)]), run=run,
                        profiles=Profiles())
        history: list = []
        for i in range(steps):
            t0 = clock()
            history.append(Message.user(f"[{i}] " + text(rng, USER_BYTES)))
            history.append(client.complete(messages=history).message)
            times.append(clock() - t0)
    else:  # the agent loop: a tool call per step, timed between the model's calls
        from rar.llm.providers.scripted import tool_call
        from rar.loop import Agent
        from rar.tools import tool

        @tool
        def echo(x: str) -> str:
            """Repeat x.

            Args:
                x: what to repeat.
            """
            return x * 4

        stamps: list[float] = []
        args = [f"[{i}] " + text(rng, USER_BYTES // 4) for i in range(steps)]

        def answer(request) -> Response:
            stamps.append(clock())
            k = len(stamps) - 1
            if k >= steps - 1:
                return Response(content="done")
            return Response(tool_calls=(tool_call("echo", f"c{k}", x=args[k]),),
                            finish_reason="tool_calls")

        Agent(Client(_Fixed(answer), run=run, profiles=Profiles()), tools=[echo],
              max_steps=steps).run("go", run=run)
        times = [b - a for a, b in itertools.pairwise(stamps)]
    run.finish()
    return times


def growth(steps: int) -> None:
    paths = ("plain dicts", "Canonical", "model client", "agent loop")
    rows = []
    with temp_dir("growth") as tmp:
        for path in paths:
            times = growth_path(tmp, path, steps)
            us = [t * 1e6 for t in times]
            early, late = median(us[0:20]), median(us[-20:])
            ratio = late / early
            rows.append([path, early, late, f"{ratio:.2f}x", _common.verdict(ratio <= 2.0)])
            _common.summary(f"per-step CPU growth, {path}, step 10 -> {len(us) - 10}",
                            f"{ratio:.2f}x ({early:,.0f} -> {late:,.0f} µs)", "-", "<= 2x",
                            ratio <= 2.0)
    print(table(["path", "µs @step 10", f"µs @step {steps - 10}", "growth", "<= 2x"], rows,
                title=f"per-step CPU (thread time, durable=False), {steps} steps, medians of "
                      "20 steps"))


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [("--steps", {"type": int, "default": None, "help": "conversation length (200)"}),
         ("--profile", {"action": "store_true", "help": "cProfile the RAR steps"}),
         ("--growth", {"action": "store_true",
                       "help": "per-step CPU at step 10 and N-10 on four paths"})],
    )
    if args.growth:
        growth(args.steps or (300 if args.quick else 1000))
        return
    steps = args.steps or (40 if args.quick else 200)
    marks = checkpoints(steps)
    turns = script(steps)
    profiler = cProfile.Profile() if args.profile else None
    results = {}
    with temp_dir("conversation") as tmp:
        results["floor (JSONL, no fsync)"] = run_floor(tmp, turns, marks, fsync=False)
        results["floor (JSONL, fsync/step)"] = run_floor(tmp, turns, marks, fsync=True)
        results["RAR (durable=True)"] = run_rar(tmp, turns, marks)
        lg_times, lg_sizes, lg_final, lg_ckpts = run_langgraph(tmp, turns, marks)
        results["LangGraph + SqliteSaver"] = (lg_times, lg_sizes, lg_final)
        if profiler:
            with temp_dir("conversation-prof") as ptmp:
                run_rar(ptmp, turns, marks, profiler)

    rows = []
    for name, (times, sizes, final) in results.items():
        us = [t * 1e6 for t in times]
        rows.append([name] + [sizes[m] for m in marks] + [final, median(us), min(us), max(us),
                                                          sum(times) * 1e3])
    print(f"conversation_vs_langgraph: {steps} steps; user message {USER_BYTES} B, reply "
          f"{REPLY_BYTES} B (JSON); LangGraph wrote {lg_ckpts} checkpoints")
    print(table(["system"] + [f"bytes @{m}" for m in marks]
                + ["bytes final", "µs/step (median)", "min", "max", "total ms"], rows))

    rar_us = median(results["RAR (durable=True)"][0]) * 1e6
    rar_bytes = results["RAR (durable=True)"][1][marks[-1]]
    lg_us = median(lg_times) * 1e6
    lg_bytes = lg_sizes[marks[-1]]
    floor_us = median(results["floor (JSONL, fsync/step)"][0]) * 1e6
    floor_bytes = results["floor (JSONL, fsync/step)"][1][marks[-1]]
    ratios = [
        [f"RAR bytes @{marks[-1]}", f"{rar_bytes:,} B", f"<= {GOAL_RAR_BYTES:,} B",
         _common.verdict(rar_bytes <= GOAL_RAR_BYTES)],
        ["RAR µs/step", f"{rar_us:.0f} µs", f"<= {GOAL_RAR_US:.0f} µs",
         _common.verdict(rar_us <= GOAL_RAR_US)],
        ["LangGraph / RAR size", f"{lg_bytes / rar_bytes:.1f}x", f">= {GOAL_SMALLER:.0f}x",
         _common.verdict(lg_bytes / rar_bytes >= GOAL_SMALLER)],
        ["LangGraph / RAR time", f"{lg_us / rar_us:.1f}x", f">= {GOAL_FASTER:.0f}x",
         _common.verdict(lg_us / rar_us >= GOAL_FASTER)],
        ["RAR / floor-with-fsync time", f"{rar_us / floor_us:.2f}x", f"<= {GOAL_FLOOR:.0f}x",
         _common.verdict(rar_us / floor_us <= GOAL_FLOOR)],
        ["RAR / floor size (info)", f"{rar_bytes / floor_bytes:.2f}x", "-", "-"],
    ]
    print()
    print(table(["ratio", "value", "goal", "met"], ratios))
    _common.summary(
        f"conversation bytes on disk, {marks[-1]} steps (Canonical messages)",
        f"{rar_bytes / 1e3:,.0f} kB",
        f"LangGraph + SqliteSaver {lg_bytes / 1e6:,.1f} MB ({lg_bytes / rar_bytes:.0f}x)",
        f">= {GOAL_SMALLER:.0f}x smaller",
        lg_bytes / rar_bytes >= GOAL_SMALLER,
    )
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
        print(f"\ncProfile of the RAR steps ({steps} steps, top by own time):")
        print(out.getvalue())


if __name__ == "__main__":
    main()
