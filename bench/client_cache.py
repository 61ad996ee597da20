"""Model response cache: hit latency from a 100k-entry store, and keying a 400-message conversation.

(a) A store holds 100,000 cached responses; ``Client.complete`` (``run=None``, ``store=store``)
is timed per call for requests that hit (distinct prompts, each asked once, shuffled), key
computation included. Separately timed: building the payload, ``ResponseCache.key(payload)`` and
``ResponseCache.get(key)`` (with a fresh ``ResponseCache``, so the linker's memos are cold).

How the store is filled (``--fill``):

* ``replicate`` (default, fast): a few thousand real ``llm`` effects are recorded through
  ``Client`` (in-process fake provider named ``openai``, ~1 KB answers, durable=False), then
  their ``llm_cache`` rows are replicated with synthetic distinct keys up to 100,000 rows via
  ``store.index.cache_put``. Every replica points at a real recorded result blob; the blob
  index therefore holds only the real calls' blobs. Hits are drawn from the real keys.
* ``real``: all 100,000 calls are recorded for real (about a minute).

(b) ``ResponseCache.key`` of a 400-message conversation (~200 B user / ~1 KB assistant,
alternating, ``Message`` objects) that extends the previously keyed request by two messages,
vs the same 400 messages keyed cold (fresh ``Message`` objects, fresh ``ResponseCache``).

(c) Bytes of the store after a 200-step conversation (``--steps``; ~200 B user / ~1 KB reply,
durable runs) recorded through ``rar.llm.client.Client`` (a scripted model, the cache on: one
cache row per call) and the same conversation through ``run.effect`` (the payload the client
records, no cache row): after the run finished (store still open) and after ``Store.close``,
with the index's WAL apart, and the µs per step. ``--only conversation`` runs (c) alone.

    python bench/client_cache.py [--quick] [--fill replicate|real] [--profile]
                                 [--only conversation] [--steps N]

Goals: <= 100 µs per cache hit (peer: Inspect AI 589 µs p50 per hit, measured here);
<= 1 ms to key the 400-message extension (peer: Inspect AI 2.45 ms per 400-message key);
the client path's store within 2x of the plain path's after 200 steps.
"""

from __future__ import annotations

import contextlib
import cProfile
import hashlib
import io
import pstats
import random
import statistics
import time
from typing import Any

import _common
from _common import median, table, temp_dir, text

from rar.llm.cache import ResponseCache
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.llm.providers.openai import OpenAIChat
from rar.llm.types import Message, Request, Response, Usage
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store._sqlite import CACHE_COLUMNS
from rar.store.store import Store

HIT_GOAL_US = 100.0
HIT_PEER_US = 589.0
KEY_GOAL_US = 1000.0
KEY_PEER_US = 2450.0
MODEL = "bench-model"
# the hit path never opens a connection; nothing listens here
BASE_URL = "http://127.0.0.1:9/v1"
SYSTEM = "You are a terse assistant. Answer in one paragraph."
POOL = 256
RUN_SIZE = 1000  # recorded calls per run while filling


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class FakeOpenAI:
    """Stands in for the OpenAI provider while filling the store (same name and base URL)."""

    name = "openai"
    base_url = BASE_URL

    def __init__(self, answers: list[str]) -> None:
        self.model = MODEL
        self.answers = answers
        self.calls = 0

    def complete(self, request: Request) -> Response:
        self.calls += 1
        content = f"#{self.calls} {self.answers[self.calls % len(self.answers)]}"
        return Response(
            content=content, model=MODEL, usage=Usage(input_tokens=60, output_tokens=250)
        )


def prompt(i: int, prompts: list[str]) -> str:
    return f"question {i}: {prompts[i % len(prompts)]}"


def fill(store_dir, real: int, total: int, prompts: list[str], answers: list[str]) -> dict:
    """Record ``real`` llm calls, then replicate cache rows up to ``total``; returns timings."""
    store = Store(store_dir, create=True)
    provider = FakeOpenAI(answers)
    system = Message.system(SYSTEM)
    t0 = time.perf_counter()
    for start in range(0, real, RUN_SIZE):
        run = record("cache fill", store=store, seed=start, durable=False,
                     redactor=Redactor(env={}))
        client = Client(provider, run=run, profiles=Profiles())
        client.cache = ResponseCache(store, redactor=Redactor(env={}))
        for i in range(start, min(real, start + RUN_SIZE)):
            client.complete(messages=[system, Message.user(prompt(i, prompts))])
        run.finish()
    t1 = time.perf_counter()
    flush = getattr(store.index, "cache_flush", None)
    if flush is not None:  # rows are queued and written in batches (and when a run finishes)
        flush()
    # exactly the columns cache_put takes (it adds the row's crc itself): a SELECT * also
    # returned the stored crc, so every replica had one value too many
    columns = ", ".join(CACHE_COLUMNS)
    rows = store.index._conn.execute(f"SELECT {columns} FROM llm_cache").fetchall()
    assert len(rows) == real, (len(rows), real)
    replicas = []
    for n in range(total - real):
        row = rows[n % real]
        key = "sha256:" + hashlib.sha256(f"replica {n}".encode()).hexdigest()
        replicas.append((key, *row[1:]))
        if len(replicas) == 20_000:
            store.index.cache_put(replicas)
            replicas = []
    if replicas:
        store.index.cache_put(replicas)
    t2 = time.perf_counter()
    count = store.index._conn.execute("SELECT count(*) FROM llm_cache").fetchone()[0]
    blobs = store.index._conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    store.close()
    return {"record_s": t1 - t0, "replicate_s": t2 - t1, "rows": count, "blobs": blobs}


def hit_client(store: Store) -> Client:
    client = Client(OpenAIChat(MODEL, base_url=BASE_URL), store=store, profiles=Profiles())
    client.cache = ResponseCache(store, redactor=Redactor(env={}))  # env-independent redaction
    return client


def measure_hits(store_dir, real: int, hits: int, prompts: list[str]) -> dict[str, list[float]]:
    """Per-call µs of Client.complete hits, and of payload / key / get done by hand."""
    store = Store(store_dir)  # a fresh Store, as another process would open it
    rng = random.Random(3)
    order = rng.sample(range(real), min(real, hits * 2 + 100))
    warm, timed_client, timed_parts = order[:100], order[100:100 + hits], order[100 + hits:]
    system = Message.system(SYSTEM)
    client = hit_client(store)
    for i in warm:
        client.complete(messages=[system, Message.user(prompt(i, prompts))])
    # (1) the full client call; Message objects are built beforehand, their digests are not
    messages = [[system, Message.user(prompt(i, prompts))] for i in timed_client]
    before = client.stats.cached_calls
    complete = client.complete
    per_call = []
    for msgs in messages:
        t0 = time.perf_counter_ns()
        complete(messages=msgs)
        per_call.append((time.perf_counter_ns() - t0) / 1e3)
    served = client.stats.cached_calls - before
    assert served == len(messages), f"only {served} of {len(messages)} calls were cache hits"
    # (2) the same work by hand, with a fresh ResponseCache (cold linker memos)
    cache = ResponseCache(store, redactor=Redactor(env={}))
    cache.get(cache.key(client.targets[0].payload(client.request(messages=messages[0]))))
    target = client.targets[0]
    parts: dict[str, list[float]] = {"payload": [], "key": [], "get": [], "sum": []}
    for i in timed_parts:
        msgs = [system, Message.user(prompt(i, prompts))]
        t0 = time.perf_counter_ns()
        payload = target.payload(client.request(messages=msgs))
        t1 = time.perf_counter_ns()
        key = cache.key(payload)
        t2 = time.perf_counter_ns()
        result = cache.get(key)
        t3 = time.perf_counter_ns()
        assert result is not None and "response" in result
        parts["payload"].append((t1 - t0) / 1e3)
        parts["key"].append((t2 - t1) / 1e3)
        parts["get"].append((t3 - t2) / 1e3)
        parts["sum"].append((t3 - t0) / 1e3)
    store.close()
    return {"complete": per_call, **parts}


def profile_hits(store_dir, real: int, prompts: list[str]) -> str:
    store = Store(store_dir)
    system = Message.system(SYSTEM)
    client = hit_client(store)
    client.complete(messages=[system, Message.user(prompt(0, prompts))])
    messages = [[system, Message.user(prompt(i, prompts))] for i in range(1, min(real, 2001))]
    prof = cProfile.Profile()
    prof.enable()
    for msgs in messages:
        client.complete(messages=msgs)
    prof.disable()
    store.close()
    return _stats(prof, f"{len(messages)} cache hits through Client.complete")


# --- the peer: Inspect AI's model cache, filled and hit in the same run ---------------------


def inspect_peer(root, total: int, hits: int, prompts: list[str], answers: list[str]):
    """Fill Inspect AI's cache with ``total`` entries (the same prompts and answers), then time
    ``cache_fetch`` of a freshly built ``CacheEntry`` per hit (key included, as for RAR).
    Returns (µs per hit, bytes on disk), or None when inspect_ai is not installed."""
    import os

    os.environ["INSPECT_CACHE_DIR"] = str(root)
    try:
        from inspect_ai.model import (
            ChatMessageSystem,
            ChatMessageUser,
            GenerateConfig,
            ModelOutput,
        )
        from inspect_ai.model._cache import CacheEntry, CachePolicy, cache_fetch, cache_store
    except ImportError:
        return None
    policy = CachePolicy(expiry=None, per_epoch=False)
    config = GenerateConfig()
    system = ChatMessageSystem(content=SYSTEM)

    def entry(i: int) -> CacheEntry:
        return CacheEntry(
            base_url=BASE_URL, config=config, model=f"openai/{MODEL}", policy=policy,
            tool_choice=None, tools=[],
            input=[system, ChatMessageUser(content=prompt(i, prompts))],
        )

    for i in range(total):
        content = f"#{i} {answers[i % len(answers)]}"
        cache_store(entry(i), ModelOutput.from_content(f"openai/{MODEL}", content))
    rng = random.Random(5)
    per_hit = []
    for i in rng.sample(range(total), hits):
        t0 = time.perf_counter_ns()
        output = cache_fetch(entry(i))
        per_hit.append((time.perf_counter_ns() - t0) / 1e3)
        assert output is not None, "an Inspect AI entry was not found"
    return per_hit, _common.dir_size(root)


# --- (b) keying a long conversation --------------------------------------------------------


def conversation(rep: int, users: list[str], replies: list[str], length: int) -> list[Message]:
    out = []
    for i in range(length):
        if i % 2 == 0:
            out.append(Message.user(f"{rep}.{i} {users[i % POOL]}"))
        else:
            out.append(Message.assistant(f"{rep}.{i} {replies[i % POOL]}"))
    return out


def wrap(request: Request) -> dict[str, Any]:
    """The payload the client keys (what ``_Target.payload`` builds for OpenAIChat)."""
    return {"provider": "openai", "base_url": BASE_URL, "request": request.payload()}


def measure_keying(store: Store, reps: int, length: int, users, replies) -> dict[str, list]:
    out: dict[str, list[float]] = {k: [] for k in
                                   ("ext_key", "ext_payload", "ext_all", "cold_key",
                                    "cold_payload", "cold_all")}
    for rep in range(reps):
        # extension: the request of length-2 messages was keyed just before
        msgs = conversation(rep, users, replies, length)
        cache = ResponseCache(store, redactor=Redactor(env={}))
        previous = Request(model=MODEL, messages=tuple(msgs[:-2]))
        cache.key(wrap(previous))
        t0 = time.perf_counter_ns()
        request = previous.extend(msgs[-2], msgs[-1])
        t1 = time.perf_counter_ns()
        payload = wrap(request)
        t2 = time.perf_counter_ns()
        ext_key = cache.key(payload)
        t3 = time.perf_counter_ns()
        out["ext_key"].append((t3 - t2) / 1e3)
        out["ext_payload"].append((t3 - t1) / 1e3)
        out["ext_all"].append((t3 - t0) / 1e3)
        # cold: the same contents as fresh objects and a fresh cache (nothing memoised)
        fresh = conversation(rep, users, replies, length)
        cache = ResponseCache(store, redactor=Redactor(env={}))
        t0 = time.perf_counter_ns()
        request = Request(model=MODEL, messages=tuple(fresh))
        t1 = time.perf_counter_ns()
        payload = wrap(request)
        t2 = time.perf_counter_ns()
        cold_key = cache.key(payload)
        t3 = time.perf_counter_ns()
        out["cold_key"].append((t3 - t2) / 1e3)
        out["cold_payload"].append((t3 - t1) / 1e3)
        out["cold_all"].append((t3 - t0) / 1e3)
        assert ext_key == cold_key, "extension and cold keying disagree"
    return out


def profile_keying(store: Store, length: int, users, replies) -> str:
    prof = cProfile.Profile()
    for rep in range(200):
        msgs = conversation(rep, users, replies, length)
        cache = ResponseCache(store, redactor=Redactor(env={}))
        previous = Request(model=MODEL, messages=tuple(msgs[:-2]))
        cache.key(wrap(previous))
        prof.enable()
        cache.key(wrap(previous.extend(msgs[-2], msgs[-1])))
        prof.disable()
    return _stats(prof, f"200 extensions of a {length}-message conversation (extend+payload+key)")


# --- (c) the client path's store vs the plain path's ------------------------------------------


def conversation_bytes(root, steps: int, users: list[str], replies: list[str]) -> dict:
    """Record one ``steps``-step conversation through ``Client`` (cache on) and the same one
    through ``run.effect``; bytes on disk (index WAL apart) after finishing and after closing."""
    from rar.llm import ScriptedModel

    out: dict[str, dict[str, float]] = {}
    for path in ("client", "plain"):
        store_dir = root / path
        store = Store(store_dir, create=True)
        model = ScriptedModel(lambda request: replies[len(request.messages) % POOL], model=MODEL)
        messages = [Message.system(SYSTEM)]
        t0 = time.perf_counter()
        with record("conversation", store=store, redactor=Redactor(env={})) as run:
            client = Client(model, run=run, profiles=Profiles())
            target = client.targets[0]
            for step in range(steps):
                messages.append(Message.user(f"{step} {users[step % POOL]}"))
                request = client.request(messages=messages)
                if path == "client":
                    reply = client.complete(request).message
                else:
                    answer = model.complete(request)
                    run.effect(
                        "llm",
                        target.payload(request),
                        lambda answer=answer: {"response": answer.plain(), "cached": False},
                    )
                    reply = answer.message
                messages.append(reply)
        per_step = (time.perf_counter() - t0) / steps * 1e6
        wal = store_dir / "index.sqlite-wal"
        finished = _common.dir_size(store_dir)
        wal_finished = wal.stat().st_size if wal.exists() else 0
        store.close()
        closed = _common.dir_size(store_dir)
        rows = 0
        import sqlite3

        with contextlib.closing(sqlite3.connect(store_dir / "index.sqlite")) as conn:
            rows = conn.execute("SELECT count(*) FROM llm_cache").fetchone()[0]
        out[path] = {"finished": finished, "wal_finished": wal_finished, "closed": closed,
                     "index": (store_dir / "index.sqlite").stat().st_size, "rows": rows,
                     "us_per_step": per_step}
    return out


def print_conversation(steps: int, c: dict) -> None:
    rows = []
    for path, label in (("client", "Client.complete (cache on)"), ("plain", "run.effect")):
        v = c[path]
        rows.append([label, v["finished"] / 1e6, v["wal_finished"] / 1e6, v["closed"] / 1e6,
                     v["index"] / 1e6, v["rows"], v["us_per_step"]])
    ratio_finished = c["client"]["finished"] / c["plain"]["finished"]
    ratio_closed = c["client"]["closed"] / c["plain"]["closed"]
    rows.append(["client / plain", f"{ratio_finished:.2f}x", "-", f"{ratio_closed:.2f}x", "-",
                 "-", "-"])
    print(table(["(c) path", "store MB, run finished", "of it index WAL MB", "store MB, closed",
                 "index.sqlite MB", "cache rows", "µs/step"], rows,
                title=f"\n(c) a {steps}-step conversation (durable runs): the client path's "
                      "store vs the plain path's"))
    _common.summary(
        f"client-path store, {steps} steps (vs run.effect)", f"{ratio_finished:.2f}x",
        f"plain {c['plain']['finished'] / 1e6:.2f} MB, "
        f"client {c['client']['finished'] / 1e6:.2f} MB",
        "<= 2x", ratio_finished <= 2.0,
    )


def _stats(prof: cProfile.Profile, title: str) -> str:
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(10)
    return f"cProfile, {title} (top 10 by own time):\n{out.getvalue()}"


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [
            ("--fill", {"choices": ["replicate", "real"], "default": "replicate",
                        "help": "how to fill the store (default: replicate real rows)"}),
            ("--profile", {"action": "store_true", "help": "also print cProfile top costs"}),
            ("--only", {"choices": ["conversation"], "default": None,
                        "help": "run only (c), the client path's store vs the plain path's"}),
            ("--steps", {"type": int, "default": 200, "help": "steps of (c) (default 200)"}),
        ],
    )
    total, real, hits, reps = (10_000, 1_000, 300, 30) if args.quick else (
        100_000, 5_000, 2_000, 200)
    if args.fill == "real":
        real = total
    rng = random.Random(11)
    prompts = [text(rng, 190) for _ in range(POOL)]
    answers = [text(rng, 1000) for _ in range(POOL)]
    replies = [text(rng, 1000) for _ in range(POOL)]
    if args.only == "conversation":
        with temp_dir("client-conversation") as tmp:
            conv = conversation_bytes(tmp, args.steps, prompts, replies)
        print_conversation(args.steps, conv)
        return
    with temp_dir("client-cache") as tmp:
        info = fill(tmp / "store", real, total, prompts, answers)
        rar_bytes = _common.dir_size(tmp / "store")
        m = measure_hits(tmp / "store", real, hits, prompts)
        peer = inspect_peer(tmp / "inspect", total, hits, prompts, answers)
        store = Store(tmp / "store")
        k = measure_keying(store, reps, 400, prompts, replies)
        profiles = []
        if args.profile:
            profiles.append(profile_hits(tmp / "store", real, prompts))
            profiles.append(profile_keying(store, 400, prompts, replies))
        store.close()
        conv = conversation_bytes(tmp / "conversation", args.steps, prompts, replies)

    how = ("all rows recorded for real" if real == total else
           f"{real:,} recorded for real, replicated to {info['rows']:,} rows with synthetic "
           "keys pointing at the real result blobs")
    print(f"store: {info['rows']:,} llm_cache rows ({how}); {info['blobs']:,} blobs indexed; "
          f"recording took {info['record_s']:.1f} s, replication {info['replicate_s']:.1f} s")
    rows = []

    def hit_row(name: str, values: list[float], goal: bool) -> None:
        p50, p90 = median(values), percentile(values, 0.9)
        rows.append([name, p50, p90, statistics.fmean(values), len(values),
                     f"<= {HIT_GOAL_US:.0f}" if goal else "-",
                     _common.verdict(p50 <= HIT_GOAL_US) if goal else "-"])

    hit_row("Client.complete, hit (run=None)", m["complete"], True)
    hit_row("payload + key + get (by hand)", m["sum"], True)
    hit_row("  payload (Request + request.payload())", m["payload"], False)
    hit_row("  ResponseCache.key(payload)", m["key"], False)
    hit_row("  ResponseCache.get(key)", m["get"], False)
    if peer is not None:
        hit_row("peer: Inspect AI cache_fetch (this run)", peer[0], False)
    else:
        rows.append(["peer: Inspect AI cache hit (FACTS.md, NOT measured in this run)",
                     HIT_PEER_US, "-", "-", "-", "-", "-"])
    print(table(["(a) cache hit", "p50 µs", "p90 µs", "mean µs", "calls", "goal µs", "met"],
                rows, title=f"\n(a) cache hits from a {info['rows']:,}-entry store "
                            "(distinct prompts, each asked once, shuffled)"))

    sizes = [["RAR store (logs, packs, index.sqlite and its WAL)", rar_bytes / 1e6]]
    if peer is not None:
        sizes.append(["Inspect AI cache directory (this run)", peer[1] / 1e6])
        sizes.append(["RAR / Inspect AI", f"{rar_bytes / peer[1]:.2f}x"])
    else:
        sizes.append(["Inspect AI (FACTS.md, 100k entries, NOT measured in this run)", 177.0])
    print(table(["store size", "MB"], sizes,
                title=f"\nbytes on disk for {info['rows']:,} cached answers "
                      f"({'replicated rows share blobs' if real != total else 'all real'})"))
    hit_p50 = median(m["complete"])
    peer_p50 = median(peer[0]) if peer is not None else HIT_PEER_US
    _common.summary(
        "cache hit p50 (Client.complete)", f"{hit_p50:,.0f} µs",
        f"Inspect AI {peer_p50:,.0f} µs"
        + ("" if peer is not None else " (FACTS.md, not measured)"),
        f"<= {HIT_GOAL_US:.0f} µs", hit_p50 <= HIT_GOAL_US,
    )

    rows = []
    for case, prefix, goal in (("extend 398 -> 400 (+2 msgs)", "ext", True),
                               ("cold: 400 fresh messages, fresh cache", "cold", False)):
        p50 = median(k[f"{prefix}_payload"])
        rows.append([case, median(k[f"{prefix}_key"]), p50, median(k[f"{prefix}_all"]),
                     percentile(k[f"{prefix}_payload"], 0.9),
                     f"<= {KEY_GOAL_US:.0f}" if goal else "-",
                     _common.verdict(p50 <= KEY_GOAL_US) if goal else "-"])
    rows.append(["peer: Inspect AI, 400 messages", "-", KEY_PEER_US, "-", "-", "-", "-"])
    print(table(
        ["(b) keying", "key(payload) µs", "payload+key µs", "Request+payload+key µs",
         "payload+key p90", "goal µs", "met"],
        rows,
        title=f"\n(b) ResponseCache.key of a 400-message conversation (~200 B user / ~1 KB "
              f"assistant), median of {reps}; the goal applies to payload+key (what the client "
              "does per call); Request = Request.extend(...) or Request(...)",
    ))
    print_conversation(args.steps, conv)
    for text_ in profiles:
        print()
        print(text_)


if __name__ == "__main__":
    main()
