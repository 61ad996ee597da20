"""The flow engine: agent types, splits, merges, handlers with repair, graph, record, replay."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

import rar
from rar.flow import (
    END,
    Agent,
    AgentType,
    BaseAgent,
    Flow,
    FlowContext,
    FlowError,
    JsonHandler,
    Next,
    TextHandler,
    merge_keys,
)
from rar.flow.handlers import AccumulateHandler, HandlerError, flatten_json, parse_json_object
from rar.llm.profiles import Profiles
from rar.llm.providers.scripted import ScriptedModel
from rar.llm.types import Request, Response, StreamChunk
from rar.replay.engine import execute, replay
from rar.store.store import Store


def last_user(request: Request) -> str:
    return next(m.content or "" for m in reversed(request.messages) if m.role == "user")


def echo_model(request: Request) -> str:
    return f"answer to: {last_user(request)}"


def llm_requests(store: Store, run_id: str, span_prefix: str = "") -> list[dict[str, Any]]:
    out = []
    for event in store.events(run_id):
        llm = event["type"] == "effect" and event["kind"] == "llm"
        if llm and event["span"].startswith(span_prefix):
            out.append({"span": event["span"], **store.resolve_payload(event["request"])})
    return out


def events_of(store: Store, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in store.events(run_id) if e["type"] == kind]


def scripted(function: Any = echo_model) -> ScriptedModel:
    return ScriptedModel(function, model="flow-test")


def walk(store: Store, agents: list[Any], start: str, values: dict[str, Any], **flow: Any) -> Any:
    with rar.record("flow test", store=store, seed=1) as run:
        result = Flow(
            agents, model=scripted(flow.pop("script", echo_model)), profiles=Profiles(), **flow
        ).walk(start, values, run=run)
    return run, result


# --- the demo -------------------------------------------------------------------------------


def test_demo_prints_the_graph_and_eight_requests_offline(store_path: Path) -> None:
    from click.testing import CliRunner

    from rar.cli import cli
    from rar.flow.demo import EXPECTED_GRAPH

    runner = CliRunner()
    shown = runner.invoke(cli, ["--store", str(store_path), "flow", "demo"])
    assert shown.exit_code == 0, shown.output
    assert EXPECTED_GRAPH in shown.output.replace("\n", " ") or EXPECTED_GRAPH in shown.output
    assert "Introducing" in shown.output
    as_json = runner.invoke(cli, ["--store", str(store_path), "flow", "demo", "--json"])
    data = json.loads(as_json.output)
    assert set(data) == {"run_id", "graph", "statistics", "contexts"}
    assert data["graph"] == EXPECTED_GRAPH
    assert data["statistics"]["requests"] == 8
    assert data["statistics"]["cached"] == 8  # the second demo is served by the response cache
    assert len(data["contexts"]) == 1
    context = data["contexts"][0]["values"]
    assert len(context["feature"]) == 5 and len(context["analysis"]) == 5
    assert context["answer"].startswith("## Introducing")


def test_demo_replays_reproducible_and_branches_at_a_step(store: Store) -> None:
    from rar.flow.demo import GOAL, run_flow_demo

    run = execute(run_flow_demo, inputs={"model": None}, goal=GOAL, store=store, seed=7)
    report = replay(run.id, store=store)
    assert report.replay_status == "reproducible", report.as_dict()
    assert (report.served, report.live, report.mismatched) == (8, 0, 0)
    # branch after the identifier's step: the analyses and the answer are made again, live
    step = next(
        e for e in events_of(store, run.id, "flow.step") if e["agent"] == "FeatureIdentifier"
    )
    fork = replay(run.id, store=store, mode="fork", at=step["seq"])
    assert fork.served == 2 and fork.live == 6, fork.as_dict()
    assert fork.replay_run is not None
    branch = store.resolve_payload(store.events(fork.replay_run)[-1]["result"])
    assert branch["graph"] == run_summary(store, run.id)["graph"]


def run_summary(store: Store, run_id: str) -> dict[str, Any]:
    return store.resolve_payload(store.events(run_id)[-1]["result"])


# --- agent types and the conversation --------------------------------------------------------


def test_agent_types_build_the_conversation_as_lm_lib_does(store: Store) -> None:
    agents = [
        Agent(
            "A",
            AgentType.START_CONVERSATION_WITH_SYSTEM_PROMPT,
            system_prompt="sys A",
            template="first",
            choose_next="B",
        ),
        Agent("B", AgentType.CONVERSATION, template="second", choose_next="C"),
        Agent(
            "C",
            AgentType.CONVERSATION_WITH_SYSTEM_PROMPT,
            system_prompt="sys C",
            template="third",
            choose_next="D",
        ),
        Agent("D", AgentType.COMPLETION, system_prompt="sys D", template="fourth", choose_next="E"),
        Agent("E", AgentType.START_CONVERSATION, system_prompt="sys E", template="fifth"),
    ]
    run, result = walk(store, agents, "A", {})
    requests = {
        r["span"].rsplit("/", 1)[-1]: r["request"]["messages"] for r in llm_requests(store, run.id)
    }
    roles = {k: [(m["role"], m["content"]) for m in v] for k, v in requests.items()}
    assert roles["A"] == [("system", "sys A"), ("user", "first")]
    assert roles["B"] == [
        ("system", "sys A"),
        ("user", "first"),
        ("assistant", "answer to: first"),
        ("user", "second"),
    ]
    assert roles["C"][0] == ("system", "sys C") and roles["C"][-1] == ("user", "third")
    assert len(roles["C"]) == 6  # the conversation kept, its system turn replaced
    assert roles["D"] == [("system", "sys D"), ("user", "fourth")]  # stateless
    assert roles["E"] == [("user", "sys E\n\nfifth")]  # fresh, user-only first turn
    assert result.graph == "M, A, ↴, M, B, ↴, M, C, →, M, D, 🗨, M, E"


def test_processing_only_and_skip_next_completion_make_no_request(store: Store) -> None:
    def skip_once(ctx: FlowContext) -> None:
        ctx.skip_next_completion = True

    agents = [
        Agent(
            "Prep",
            AgentType.PROCESSING_ONLY,
            post_process=lambda c: c.__setitem__("x", 1),
            choose_next="Skipper",
        ),
        Agent(
            "Skipper",
            AgentType.COMPLETION,
            template="skip me",
            pre_process=skip_once,
            choose_next="Asker",
        ),
        Agent("Asker", AgentType.COMPLETION, template="ask {{x}}"),
    ]
    run, result = walk(store, agents, "Prep", {})
    assert result.graph == "○, Prep, →, ○, Skipper, →, M, Asker"
    assert [r["span"] for r in llm_requests(store, run.id)] == ["run/flow/Asker"]
    assert result.contexts[0]["response"] == "answer to: ask 1"
    assert result.contexts[0].skip_next_completion is False  # it reset itself
    statuses = [e["status"] for e in events_of(store, run.id, "flow.step")]
    assert statuses == ["skipped", "skipped", "ok"]


def test_a_class_agent_with_hooks(store: Store) -> None:
    class Upper(BaseAgent):
        name = "Upper"
        agent_type = AgentType.COMPLETION
        template = "say {{word}}"

        def response_handler(self, context: FlowContext) -> TextHandler:
            return TextHandler("said", transform=str.upper)

        def post_process(self, context: FlowContext) -> None:
            context["length"] = len(context["said"])

        def choose_next(self, context: FlowContext) -> Next:
            return END

    _, result = walk(store, [Upper()], "Upper", {"word": ["hi"]})
    assert result.contexts[0]["said"] == "ANSWER TO: SAY HI"
    assert result.contexts[0]["length"] == len("ANSWER TO: SAY HI")


# --- splits, merges, errors ----------------------------------------------------------------


def analyst_script(request: Request) -> str:
    prompt = last_user(request)
    if "bad" in prompt:
        return "no json here"
    if "Item: " not in prompt:
        return f"written from {prompt}"
    item = prompt.split("Item: ", 1)[1].split("\n", 1)[0]
    return json.dumps({"score": len(item), "note": f"about {item}"})


def test_a_failing_json_handler_shows_a_warning_then_fatal_and_keeps_the_other_splits(
    store: Store,
) -> None:
    agents = [
        Agent(
            "Analyst",
            AgentType.COMPLETION,
            template="Item: [[item]]",
            handler=JsonHandler("a_"),
            merge=merge_keys(["a_score", "item"]),
            choose_next="Writer",
        ),
        Agent("Writer", AgentType.COMPLETION, template="scores {{a_score}}"),
    ]
    items = ["one", "three", "bad", "seven", "eleven"]
    run, result = walk(store, agents, "Analyst", {"item": items}, script=analyst_script)
    ok, failed = result.ok, result.failed
    assert len(ok) == 1 and len(failed) == 1
    assert result.contexts[-1] is failed[0]  # errored contexts come after the successful ones
    assert failed[0].graph_text == "⇉ 3/5, M, Analyst, ⚠, ☢"
    assert "after 2 attempts" in failed[0].error["message"]
    assert ok[0]["a_score"] == [3, 5, 5, 6]  # the failed split is not merged
    assert ok[0]["item"] == ["one", "three", "seven", "eleven"]
    assert ok[0].graph_text == "⇉ 1/5, M, Analyst, 4↣1, →, M, Writer"
    # both attempts of the bad split are in the record, the second with the repair prompt
    bad = llm_requests(store, run.id, "run/flow/Analyst#3")
    assert len(bad) == 2
    assert "not a valid JSON object" in bad[1]["request"]["messages"][-1]["content"]
    merge = events_of(store, run.id, "flow.merge")[0]
    assert (merge["inputs"], merge["outputs"], merge["errored"]) == (4, 1, 1)
    step = next(e for e in events_of(store, run.id, "flow.step") if e["node"].endswith("#3"))
    assert step["status"] == "error" and step["attempts"] == 2
    assert step["symbols"] == ["⇉ 3/5", "M", "Analyst", "⚠", "☢"]
    assert run.store.manifest(run.id).status.value == "completed"


def test_a_handler_that_refuses_once_is_repaired(store: Store) -> None:
    calls = []

    def picky(ctx: FlowContext, response: Response) -> bool:
        calls.append(response.content)
        return len(calls) > 1

    class Picky:
        handle = staticmethod(picky)

        def repair_instruction(self, problem: str) -> str:
            return f"PLEASE AGAIN ({problem})"

    run, result = walk(
        store, [Agent("P", AgentType.COMPLETION, template="q", handler=Picky())], "P", {}
    )
    assert result.graph == "M, P, ⚠"
    assert not result.failed
    requests = llm_requests(store, run.id)
    assert len(requests) == 2
    assert requests[1]["request"]["messages"][-1]["content"].startswith("q\n\nPLEASE AGAIN")


def test_no_merge_keeps_the_splits_which_continue_in_their_own_spans(store: Store) -> None:
    agents = [
        Agent("Fan", AgentType.COMPLETION, template="[[x]]", choose_next="After"),
        Agent("After", AgentType.COMPLETION, template="after {{response}}"),
    ]
    run, result = walk(store, agents, "Fan", {"x": ["a", "b", "c"]})
    assert [c.graph_text for c in result.contexts] == [
        f"⇉ {i}/3, M, Fan, →, M, After" for i in (1, 2, 3)
    ]
    spans = [r["span"] for r in llm_requests(store, run.id, "run/flow/Fan")]
    assert sorted(spans) == sorted(
        [
            "run/flow/Fan",
            "run/flow/Fan/After",
            "run/flow/Fan#2",
            "run/flow/Fan#2/After",
            "run/flow/Fan#3",
            "run/flow/Fan#3/After",
        ]
    )
    assert [c["x"] for c in result.contexts] == [["a"], ["b"], ["c"]]


def test_one_to_many_merge_continues_in_branches(store: Store) -> None:
    def explode(contexts: list[FlowContext]) -> list[dict[str, Any]]:
        return [
            {"pair": [a.first("x"), b.first("x")]}
            for a in contexts
            for b in contexts
            if a.first("x") < b.first("x")
        ]

    agents = [
        Agent("Fan", AgentType.COMPLETION, template="[[x]]", merge=explode, choose_next="Pair"),
        Agent("Pair", AgentType.COMPLETION, template="pair {{{pair}}}"),
    ]
    run, result = walk(store, agents, "Fan", {"x": ["a", "b", "c"]})
    assert len(result.contexts) == 3
    assert all("3↣3" in c.graph_text for c in result.contexts)
    pair_spans = sorted(r["span"] for r in llm_requests(store, run.id) if "Pair" in r["span"])
    assert pair_spans == [
        "run/flow/branch#2/Pair",
        "run/flow/branch#3/Pair",
        "run/flow/branch/Pair",
    ]


def test_bad_placeholders_name_the_agent_and_the_key(store: Store) -> None:
    _, result = walk(store, [Agent("T", template="use {{nothing}}")], "T", {"a": 1})
    assert result.failed and "agent T" in result.failed[0].error["message"]
    assert "{{nothing}}" in result.failed[0].error["message"]
    assert result.graph == "T, ☢"
    _, result = walk(store, [Agent("T", template="[[a]]")], "T", {"a": 1})
    assert "must be a list" in result.failed[0].error["message"]


def test_an_unknown_next_agent_is_fatal_and_named(store: Store) -> None:
    _, result = walk(store, [Agent("A", template="hi", choose_next="Nobody")], "A", {})
    assert result.graph == "M, A, ☢"
    assert "'Nobody'" in result.failed[0].error["message"]


def test_flow_definition_errors_are_clear() -> None:
    with pytest.raises(FlowError, match="unique"):
        Flow([Agent("A"), Agent("A")])
    with pytest.raises(FlowError, match="must start with a letter"):
        Flow([Agent("a/b")])
    with pytest.raises(FlowError, match="no agent named 'B'"):
        Flow([Agent("A")], model=scripted()).walk("B", {})


def test_walking_a_context_with_a_graph_marks_the_continuation(store: Store) -> None:
    agents = [Agent("A", AgentType.COMPLETION, template="hi")]
    with rar.record("twice", store=store) as run:
        flow = Flow(agents, model=scripted(), profiles=Profiles())
        first = flow.walk("A", {}, run=run)
        second = flow.walk("A", first.contexts[0], run=run)
    assert second.graph == "M, A, ‖, M, A"
    assert store.manifest(run.id).stats["flow"]["flows"] == 2


def test_a_loop_is_stopped_by_max_steps(store: Store) -> None:
    agents = [Agent("Loop", AgentType.PROCESSING_ONLY, choose_next="Loop")]
    _, result = walk(store, agents, "Loop", {}, max_steps=5)
    assert "more than 5 steps" in result.failed[0].error["message"]


# --- concurrency, statistics, streaming -----------------------------------------------------


class SlowAsyncModel:
    """An async provider that counts how many calls are in flight."""

    name = "scripted"
    base_url = None
    model = "slow"

    def __init__(self, delay: float = 0.05, jitter: float = 0.0, seed: int = 0) -> None:
        self.delay, self.jitter = delay, jitter
        self.random = random.Random(seed)
        self.in_flight = self.most = 0
        self.order: list[str] = []

    def complete(self, request: Request) -> Response:  # pragma: no cover - the async path runs
        raise AssertionError("the flow calls acomplete")

    async def acomplete(self, request: Request) -> Response:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(self.delay + self.random.random() * self.jitter)
        self.in_flight -= 1
        prompt = last_user(request)
        self.order.append(prompt)
        return ScriptedModel(echo_model, model="slow").complete(request)


def fan_flow(run: rar.Run, model: Any, items: int, limit: int) -> dict[str, Any]:
    flow = Flow(
        [
            Agent(
                "Fan",
                AgentType.COMPLETION,
                template="Item: [[item]]",
                merge=merge_keys(["response"]),
            )
        ],
        model=model,
        profiles=Profiles(),
        concurrency=limit,
    )
    result = flow.walk("Fan", {"item": [f"i{n}" for n in range(items)]}, run=run)
    return {"responses": result.contexts[0]["response"], "graph": result.graph}


_MODELS: dict[str, SlowAsyncModel] = {}


def fan_entry(run: rar.Run, seed: int) -> dict[str, Any]:
    model = _MODELS.setdefault(f"m{seed}", SlowAsyncModel(0.01, 0.05, seed))
    return fan_flow(run, model, 8, 8)


def test_splits_run_concurrently_under_the_limit(store: Store) -> None:
    model = SlowAsyncModel(0.05)
    with rar.record("limit", store=store) as run:
        out = fan_flow(run, model, 12, 4)
    assert model.most == 4
    assert out["graph"] == "⇉ 1/12, M, Fan, 12↣1"
    assert out["responses"] == [f"answer to: Item: i{n}" for n in range(12)]  # split order
    stats = store.manifest(run.id).stats["flow"]
    assert stats["requests"] == 12
    # 12 calls of 50 ms, 4 at a time: about 150 ms of effective time for 600 ms of requests
    assert stats["effective_duration_us"] < stats["request_duration_us"] / 2
    end = events_of(store, run.id, "flow.end")[0]
    report = store.resolve_payload(end["report"])
    assert report["requests"] == 12 and report["output_tps"] > 0


def test_replay_is_reproducible_although_the_splits_interleave_differently(store: Store) -> None:
    _MODELS.clear()
    run = execute(fan_entry, inputs={"seed": 1}, store=store, seed=3)
    recorded_order = list(_MODELS["m1"].order)
    assert recorded_order != sorted(recorded_order, key=lambda p: int(p.split("i")[-1]))
    report = replay(run.id, store=store)
    assert report.replay_status == "reproducible", report.as_dict()
    assert report.served == 8
    # a fresh recording with other delays interleaves otherwise and gives the same result
    _MODELS["m1"] = SlowAsyncModel(0.01, 0.05, 99)
    again = execute(fan_entry, inputs={"seed": 1}, store=store, seed=3)
    assert run_summary(store, again.id) == run_summary(store, run.id)


def test_streaming_fills_the_key_and_its_reasoning_chunk_by_chunk(store: Store) -> None:
    class Streamer:
        name = "scripted"
        base_url = None
        model = "streamer"

        def complete(self, request: Request) -> Response:
            return Response(content="hello world", reasoning="thinking")

        def stream(self, request: Request, on_chunk: Any) -> Response:
            on_chunk(StreamChunk(kind="reasoning", text="think"))
            on_chunk(StreamChunk(kind="reasoning", text="ing"))
            on_chunk(StreamChunk(kind="content", text="hello "))
            on_chunk(StreamChunk(kind="content", text="world"))
            return Response(content="hello world", reasoning="thinking")

    seen: list[str] = []
    handler = TextHandler("text", on_update=lambda ctx, chunk: seen.append(ctx["text"]))
    with rar.record("stream", store=store) as run:
        flow = Flow(
            [Agent("S", AgentType.COMPLETION, template="hi", handler=handler)],
            model=Streamer(),
            profiles=Profiles(),
            streaming=True,
        )
        result = flow.walk("S", {}, run=run)
    assert seen == ["", "", "hello ", "hello world"]
    assert result.contexts[0]["text"] == "hello world"
    assert result.contexts[0]["text_reasoning"] == "thinking"


# --- handlers ------------------------------------------------------------------------------


def test_lenient_json_is_parsed_between_the_first_and_last_brace() -> None:
    text = "Sure! ```json\n{name: 'x', // a comment\n 'tags': ['a', 'b',],}\n``` done"
    assert parse_json_object(text) == {"name": "x", "tags": ["a", "b"]}
    with pytest.raises(HandlerError, match="no"):
        parse_json_object("no braces")


def test_json_is_flattened_into_list_valued_keys() -> None:
    flat = flatten_json(
        {
            "title": "T",
            "scores": [1, 2],
            "items": [{"name": "a", "n": 1}, {"name": "b", "n": 2}],
            "meta": {"x": "1", "y": {"z": True}},
        }
    )
    assert flat == {
        "title": ["T"],
        "scores": [1, 2],
        "name": ["a", "b"],
        "n": [1, 2],
        "meta": ["1", True],
    }


def test_accumulate_handler_collects_every_answer(store: Store) -> None:
    agents = [
        Agent(
            "A",
            AgentType.COMPLETION,
            template="[[q]]",
            handler=AccumulateHandler("all"),
            merge=merge_keys(["all"]),
        )
    ]
    _, result = walk(store, agents, "A", {"q": ["x", "y"]})
    assert result.contexts[0]["all"] == ["answer to: x", "answer to: y"]


def variant_entry(run: rar.Run, changed: str, seed: int) -> dict[str, Any]:
    def script(request: Request) -> str:
        prompt = last_user(request)
        return f"changed {prompt}" if prompt.endswith(changed) else f"answer to: {prompt}"

    class Model(SlowAsyncModel):
        async def acomplete(self, request: Request) -> Response:
            await asyncio.sleep(self.random.random() * 0.03)
            return ScriptedModel(script, model="slow").complete(request)

    from rar.llm.client import Client

    client = Client(Model(seed=seed), run=run, cache=False, profiles=Profiles())
    return fan_flow(run, client, 5, 5)


def test_two_walks_diff_split_by_split(store: Store) -> None:
    from rar.replay.diff import diff_runs

    a = execute(variant_entry, inputs={"changed": "none", "seed": 1}, store=store, seed=3)
    b = execute(variant_entry, inputs={"changed": "none", "seed": 2}, store=store, seed=3)
    c = execute(variant_entry, inputs={"changed": "i2", "seed": 3}, store=store, seed=3)
    order = [[e["span"] for e in store.events(run.id) if e["type"] == "effect"] for run in (a, b)]
    assert order[0] != order[1]  # the splits finished in another order
    assert diff_runs(store, a.id, b.id).equivalent
    changed = diff_runs(store, a.id, c.id)
    different = [s for s in changed.steps if s.status != "same"]
    assert [(s.status, s.step.span) for s in different] == [
        ("different-response", "run/flow/Fan#3")
    ]
