"""`rar diff` of flows whose parallel splits run concurrently: the steps are compared split by
split (the canonical order of `rar.replay.diff`), whatever order the splits' model calls finished
in; strict replay of such a run is reproducible when the replay interleaves differently."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

import rar
from rar.cli import cli
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.replay.diff import align, canonical_order, diff_runs, steps_of
from rar.replay.diff_report import diff_markdown
from rar.runtime.run import Run
from rar.store.store import Store

QUIET = Redactor(env={})
SPLITS = ("run/flow/FeatureAnalyzer", "run/flow/FeatureAnalyzer#2", "run/flow/FeatureAnalyzer#3")
ANSWERS = ("the slope", "the intercept", "the residuals")


def split_flow(run: Run, delays: Sequence[float], answers: Sequence[str] = ANSWERS) -> list[str]:
    """A flow-like function: a planning call, then one span per split opened concurrently under
    ``asyncio.gather``, each making two model calls (the first after ``delays[i]`` seconds), then
    a closing tool call in the root span."""
    run.effect("llm", {"prompt": "plan the analysis"}, lambda: {"text": "three features"})

    async def split(i: int) -> str:
        with run.span("FeatureAnalyzer", agent="analyzer"):

            async def look() -> dict[str, str]:
                await asyncio.sleep(delays[i])
                return {"text": answers[i]}

            async def judge() -> dict[str, str]:
                await asyncio.sleep(0.001)
                return {"text": "fine"}

            found = await run.aeffect("llm", {"prompt": f"analyze feature {i}"}, look)
            await run.aeffect("llm", {"prompt": f"check feature {i}"}, judge)
            return found["text"]

    async def main() -> list[str]:
        with run.span("flow"):
            return list(await asyncio.gather(*(split(i) for i in range(len(delays)))))

    texts = asyncio.run(main())
    run.effect("tool", {"name": "merge", "parts": len(texts)}, lambda: {"ok": True})
    return texts


def record_flow(
    store: Store, delays: Sequence[float], answers: Sequence[str] = ANSWERS, answer: str = "done"
) -> str:
    run = rar.record("flow", store=store, seed=3, durable=False, redactor=QUIET)
    with run:
        split_flow(run, delays, answers)
        run.finish(result={"answer": answer})
    return run.id


def finishing_order(store: Store, run_id: str) -> list[str]:
    """The splits' spans in the order their first model call was logged."""
    found = [e["span"] for e in store.events(run_id) if e["type"] == "effect"]
    return [span for span in dict.fromkeys(found) if span in SPLITS]


def rar_cli(store_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", str(store_path), *args], catch_exceptions=False)
    return result.exit_code, result.stdout


def test_splits_that_interleave_differently_are_equivalent_and_pair_split_by_split(
    store: Store, store_path: Path
) -> None:
    a = record_flow(store, [0.0, 0.04, 0.08])
    b = record_flow(store, [0.08, 0.04, 0.0])
    assert finishing_order(store, a) == list(SPLITS)
    assert finishing_order(store, b) == list(SPLITS[::-1])  # split 3 answered first in B
    # in log order the splits' steps would not line up
    logged = align(steps_of(store.events(a)), steps_of(store.events(b)))
    assert any(x is None or y is None for x, y in logged)

    diff = diff_runs(store, a, b)
    assert diff.equivalent and diff.first_divergence is None
    assert [s.status for s in diff.steps] == ["same"] * 8
    spans = ["run", *(span for span in SPLITS for _ in range(2)), "run"]
    assert [s.step.span for s in diff.steps] == spans
    for aligned in diff.steps:
        assert aligned.a is not None and aligned.b is not None
        assert (aligned.a.span, aligned.a.kind, aligned.a.ordinal) == (
            aligned.b.span,
            aligned.b.kind,
            aligned.b.ordinal,
        )
    assert [s.step.ordinal for s in diff.steps[1:7]] == [0, 1] * 3
    assert diff.concurrent == (SPLITS,)
    assert [(s.span, s.first, s.describe()) for s in diff.spans] == [
        ("run", 0, "2 same"),
        (SPLITS[0], 1, "2 same"),
        (SPLITS[1], 3, "2 same"),
        (SPLITS[2], 5, "2 same"),
    ]

    code, out = rar_cli(store_path, "diff", a, b)
    assert code == 0 and "equivalent" in out and "8 same" in out
    code, out = rar_cli(store_path, "diff", a, b, "--json")
    data = orjson.loads(out)
    assert code == 0 and data["equivalent"] is True
    assert [step["span"] for step in data["steps"]] == spans
    assert [step["index"] for step in data["steps"]] == list(range(8))
    b_seqs = [step["b"]["seq"] for step in data["steps"]]
    assert b_seqs != sorted(b_seqs)  # seq is still each step's place in B's log

    text = diff_markdown(diff)
    assert "**equivalent**" in text and "## Steps by span" in text
    assert f"`{SPLITS[0]}`, `{SPLITS[1]}`, `{SPLITS[2]}`" in text
    assert f"| 4 | {SPLITS[1]} | 2 | same |" in text


def test_one_split_answering_differently_is_one_different_response_on_its_span(
    store: Store, store_path: Path
) -> None:
    a = record_flow(store, [0.0, 0.04, 0.08])
    changed = (ANSWERS[0], "the intercept, roughly", ANSWERS[2])
    b = record_flow(store, [0.08, 0.0, 0.04], changed)
    assert finishing_order(store, a) != finishing_order(store, b)

    diff = diff_runs(store, a, b)
    assert not diff.equivalent and diff.answer.equal
    differ = [(i, s) for i, s in enumerate(diff.steps) if s.status != "same"]
    assert [(i, s.status, s.step.span, s.step.ordinal) for i, s in differ] == [
        (3, "different-response", SPLITS[1], 0)
    ]
    assert diff.counts["same"] == 7 and sum(diff.counts.values()) == 8
    first = diff.first_divergence
    assert first is not None and first.index == 3 and first.compared == "result"
    assert [(f.path, f.a, f.b) for f in first.fields] == [
        ("text", "the intercept", "the intercept, roughly")
    ]
    assert [s.describe() for s in diff.spans] == [
        "2 same",
        "2 same",
        "1 same, 1 different-response",
        "2 same",
    ]

    code, out = rar_cli(store_path, "diff", a, b)
    assert code == 1
    assert "first divergence at step 4 of 8: different-response" in out
    assert f"where  {SPLITS[1]} · llm" in out and "7 same not shown" in out
    code, out = rar_cli(store_path, "diff", a, b, "--json")
    data = orjson.loads(out)
    assert [(s["index"], s["span"]) for s in data["steps"] if s["status"] != "same"] == [
        (3, SPLITS[1])
    ]
    text = diff_markdown(diff)
    assert f"| 4 | different-response | {SPLITS[1]} | llm |" in text
    assert f"| 4 | {SPLITS[1]} | 2 | 1 same, 1 different-response |" in text


# --- the order itself, on hand-made logs -------------------------------------------------------


def events_of(*items: tuple[Any, ...]) -> list[dict[str, Any]]:
    """A log from ``("start", span)``, ``("end", span)`` and ``("llm", span, ordinal)``."""
    events: list[dict[str, Any]] = []
    for seq, item in enumerate(items, 1):
        if item[0] in ("start", "end"):
            events.append({"seq": seq, "type": f"span.{item[0]}", "span": item[1]})
        else:
            digest = {"digest": f"sha256:{item[1]}:{item[2]}"}
            events.append(
                {
                    "seq": seq,
                    "type": "effect",
                    "span": item[1],
                    "kind": item[0],
                    "ordinal": item[2],
                    "request": digest,
                    "result": digest,
                }
            )
    return events


def order(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(s.span, s.ordinal) for s in canonical_order(steps_of(events), events)]


def test_sequential_siblings_keep_the_log_order() -> None:
    events = events_of(
        ("llm", "run", 0),
        ("start", "run/x"),
        ("llm", "run/x", 0),
        ("end", "run/x"),
        ("llm", "run", 1),  # between the siblings: stays there
        ("start", "run/y"),
        ("llm", "run/y", 0),
        ("end", "run/y"),
        ("start", "run/x#2"),
        ("llm", "run/x#2", 0),
        ("end", "run/x#2"),
    )
    steps = steps_of(events)
    assert canonical_order(steps, events) == steps


def test_overlapping_siblings_form_one_block_sibling_by_sibling() -> None:
    events = events_of(
        ("llm", "run", 0),
        ("start", "run/p"),
        ("start", "run/p/a"),
        ("start", "run/p/b"),
        ("llm", "run/p/b", 0),
        ("llm", "run/p", 0),  # the parent, while its children run: after the block
        ("start", "run/p/c"),  # opened while a and b are open
        ("llm", "run/p/c", 0),
        ("end", "run/p/c"),
        ("llm", "run/p/a", 0),
        ("end", "run/p/b"),
        ("llm", "run/p/a", 1),
        ("end", "run/p/a"),
        ("start", "run/p/d"),  # opened after the others ended: not in the group
        ("llm", "run/p/d", 0),
        ("end", "run/p/d"),
        ("end", "run/p"),
    )
    assert order(events) == [
        ("run", 0),
        ("run/p/a", 0),
        ("run/p/a", 1),
        ("run/p/b", 0),
        ("run/p/c", 0),
        ("run/p", 0),
        ("run/p/d", 0),
    ]


def test_nested_groups_a_span_never_closed_and_effects_out_of_ordinal_order() -> None:
    events = events_of(
        ("start", "run/s"),
        ("start", "run/s#2"),  # run/s is never closed: everything after it overlaps it
        ("start", "run/s#2/t"),
        ("start", "run/s#2/t#2"),
        ("llm", "run/s#2/t#2", 0),
        ("llm", "run/s#2/t", 0),
        ("end", "run/s#2/t"),
        ("end", "run/s#2/t#2"),
        ("llm", "run/s#2", 1),  # two concurrent calls in one span, finished out of order
        ("llm", "run/s", 0),
        ("llm", "run/s#2", 0),
        ("end", "run/s#2"),
        ("start", "run/s#3"),
        ("llm", "run/s#3", 0),
    )
    assert order(events) == [
        ("run/s", 0),
        ("run/s#2/t", 0),
        ("run/s#2/t#2", 0),
        ("run/s#2", 0),
        ("run/s#2", 1),
        ("run/s#3", 0),
    ]


# --- strict replay with another interleaving ---------------------------------------------------

_TURNS = itertools.count()  # one turn per call of concurrent_splits: recording, replay, ...


def concurrent_splits(run: Run, n: int) -> list[str]:
    """Splits that wait before their model call, longest first on even turns and shortest first
    on odd ones: a strict replay (which serves the calls at once) interleaves them otherwise."""
    turn = next(_TURNS)

    async def split(i: int) -> str:
        with run.span("FeatureAnalyzer"):
            await asyncio.sleep(0.03 * (n - 1 - i if turn % 2 == 0 else i))

            async def call() -> str:
                return f"feature {i}"

            return await run.aeffect("llm", {"prompt": f"analyze feature {i}"}, call)

    async def main() -> list[str]:
        with run.span("flow"):
            return list(await asyncio.gather(*(split(i) for i in range(n))))

    return asyncio.run(main())


def test_strict_replay_of_concurrent_splits_is_reproducible_when_they_interleave_otherwise(
    store: Store,
) -> None:
    run = execute(concurrent_splits, inputs={"n": 3}, store=store, redactor=QUIET)
    assert store.manifest(run.id).entrypoint == "test_diff_splits:concurrent_splits"
    report = replay(run.id, store=store, redactor=QUIET)  # the entrypoint, imported by name
    assert report.replay_status == "reproducible" and report.reproducible
    assert report.served == 3 and report.mismatched == 0 and report.result_equal
    recorded, replayed = finishing_order(store, run.id), finishing_order(store, report.replay_run)
    assert sorted(recorded) == sorted(replayed) == sorted(SPLITS)
    assert recorded == replayed[::-1]  # the replay's splits took their turns the other way round
    assert diff_runs(store, run.id, report.replay_run).equivalent
