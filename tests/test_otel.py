"""Live OpenTelemetry spans (GenAI conventions) of agent-loop, science and flow runs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from click.testing import CliRunner
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import rar.interop.otel as otel
from rar.cli import cli
from rar.errors import ProviderUnavailableError
from rar.interop import _otel_mapping as mapping
from rar.interop.otel import Telemetry, instrument
from rar.llm import Message, Request, Response, ScriptedModel, tool_call
from rar.llm.client import Client, RetryPolicy
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.redaction import Redactor
from rar.runtime.run import RunObserver
from rar.runtime.start import record
from rar.store.store import Store
from rar.tools import default_tools, tool

NO_PROFILES = Profiles()
PROMPT = "PROMPT-TEXT-7f3a: what is (17 + 25) * 3?"
SYSTEM = "SYSTEM-TEXT-c41d: be careful with numbers."
ANSWER = "COMPLETION-TEXT-91b2: it is 126."
SECRET_TEXTS = (PROMPT, SYSTEM, ANSWER, "PROMPT-TEXT", "SYSTEM-TEXT", "COMPLETION-TEXT")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p


@pytest.fixture
def env_telemetry(
    monkeypatch: pytest.MonkeyPatch, provider: TracerProvider
) -> Iterator[TracerProvider]:
    """RAR_OTEL=1 with RAR's default provider replaced by the in-memory one."""
    monkeypatch.setattr(otel, "_provider", provider)
    monkeypatch.setenv("RAR_OTEL", "1")
    yield provider


def _script() -> list[Any]:
    return [Message.assistant(tool_calls=[tool_call("calculator", "call-1",
                                                    expression="(17 + 25) * 3")]), ANSWER]


def _loop_run(store: Store, telemetry: Any, script: Any = None, tools: Any = None) -> Any:
    with record("loop", store=store, redactor=Redactor(env={}), telemetry=telemetry,
                tags={"agent": "math-helper"}) as run:
        client = Client(ScriptedModel(script or _script()), run=run, profiles=NO_PROFILES,
                        cache=False)
        Agent(client, tools if tools is not None else default_tools(),
              system_prompt=SYSTEM).run(PROMPT, run=run)
    return run


def _tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, str]]:
    by_id = {s.context.span_id: s for s in spans}

    def depth(span: ReadableSpan) -> int:
        d = 0
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            d += 1
        return d

    ordered = sorted(spans, key=lambda s: (s.start_time, depth(s)))
    return [(depth(s), s.name) for s in ordered]


def _all_attribute_text(spans: Any) -> str:
    return json.dumps([dict(s.attributes) for s in spans], default=str)


# --- the attribute names are the semantic conventions' -----------------------------------------


def test_every_attribute_name_is_the_installed_semconv_constant() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
    from opentelemetry.semconv.attributes import error_attributes, server_attributes

    modules = (gen_ai_attributes, error_attributes, server_attributes)
    for literal, constant in mapping.SEMCONV_NAMES.items():
        values = [getattr(m, constant) for m in modules if hasattr(m, constant)]
        assert values == [literal], (literal, constant)
    values = {v.value for v in gen_ai_attributes.GenAiOperationNameValues}
    assert {"chat", "invoke_agent", "execute_tool", "invoke_workflow"} <= values


# --- the agent loop ----------------------------------------------------------------------------


def test_an_agent_loop_run_gives_the_invoke_agent_chat_execute_tool_tree(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    run = _loop_run(store, Telemetry(provider, attributes={"tenant.id": "tenant-a"}))
    spans = exporter.get_finished_spans()
    assert _tree(spans) == [
        (0, "invoke_agent math-helper"),
        (1, "chat scripted"),
        (1, "execute_tool calculator"),
        (1, "chat scripted"),
    ]
    root = next(s for s in spans if s.parent is None)
    children = [s for s in spans if s is not root]
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id
               for s in children)
    assert len({s.context.trace_id for s in spans}) == 1
    assert root.kind == SpanKind.INTERNAL
    chat = [s for s in spans if s.name.startswith("chat")]
    assert all(s.kind == SpanKind.CLIENT for s in chat)
    first, second = sorted(chat, key=lambda s: s.start_time)
    a = first.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "scripted"
    assert a["gen_ai.request.model"] == "scripted" and a["gen_ai.response.model"] == "scripted"
    assert a["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    for name in ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.reasoning.output_tokens"):
        assert a[name] == 0
    assert a["gen_ai.agent.name"] == "math-helper"
    # the agent span carries the usage summed over its chat spans
    for name in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        assert root.attributes[name] == sum(s.attributes[name] for s in chat)
    stats = run.manifest.stats["llm"]
    assert root.attributes["gen_ai.usage.input_tokens"] == stats["input_tokens"]
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "math-helper"
    assert root.attributes["rar.status"] == "completed"
    tool_span = next(s for s in spans if s.name.startswith("execute_tool"))
    assert tool_span.kind == SpanKind.INTERNAL
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "calculator"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call-1"
    assert "gen_ai.tool.call.arguments" not in tool_span.attributes
    assert "gen_ai.tool.call.result" not in tool_span.attributes
    # RAR's own attributes and the user's, on every span
    events = {e["seq"]: e for e in store.events(run.id)}
    for span in spans:
        attrs = span.attributes
        assert attrs["rar.run_id"] == run.id and attrs["tenant.id"] == "tenant-a"
        assert events[attrs["rar.seq"]]["span"] == attrs["rar.span"]
        assert span.status.status_code == StatusCode.UNSET
        assert "rar.replayed" not in attrs
    assert tool_span.attributes["rar.span"] == "run/step/tool-0"
    assert events[tool_span.attributes["rar.seq"]]["kind"] == "tool"
    # chat and tool spans lie within their parent, in the order of the record
    for span in children:
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    ordered = sorted(children, key=lambda s: s.start_time)
    assert [s.attributes["rar.seq"] for s in ordered] == sorted(
        s.attributes["rar.seq"] for s in children
    )


def test_no_prompt_completion_or_tool_content_is_in_any_attribute(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    _loop_run(store, Telemetry(provider))
    text = _all_attribute_text(exporter.get_finished_spans())
    for secret in SECRET_TEXTS:
        assert secret not in text
    assert "(17 + 25) * 3" not in text and "126" not in text  # tool arguments and result
    for span in exporter.get_finished_spans():
        assert not span.events  # no prompt or completion events either


def test_tool_content_is_recorded_only_when_asked(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    _loop_run(store, Telemetry(provider, capture_tool_content=True))
    span = next(s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool"))
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {
        "expression": "(17 + 25) * 3"
    }
    assert json.loads(span.attributes["gen_ai.tool.call.result"])["value"] == 126
    text = _all_attribute_text(exporter.get_finished_spans())
    assert PROMPT not in text and ANSWER not in text and SYSTEM not in text


@tool
def remember(note: str) -> str:
    """Keeps a note.

    Args:
        note: the note.
    """
    return f"kept {note}"


def test_captured_tool_content_is_redacted_as_the_record_holds_it(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from rar.export.otlp import export_otlp

    secret = "hunter2-very-secret-token"
    script = [Message.assistant(tool_calls=[tool_call("remember", "c1", note=secret)]), "ok"]
    with record("x", store=store, redactor=Redactor(env={}, extra_secrets=[secret]),
                telemetry=Telemetry(provider, capture_tool_content=True)) as run:
        client = Client(ScriptedModel(script), run=run, profiles=NO_PROFILES, cache=False)
        Agent(client, [remember]).run("note it", run=run)
    live = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool remember")
    assert secret not in _all_attribute_text(exporter.get_finished_spans())
    doc = export_otlp(store, run.id, capture_tool_content=True)
    exported = next(s for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    if s["name"] == "execute_tool remember")
    values = {kv["key"]: kv["value"].get("stringValue") for kv in exported["attributes"]}
    for name in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
        assert live.attributes[name] == values[name]
    assert "note" in live.attributes["gen_ai.tool.call.arguments"]


@tool
def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: why.
    """
    raise RuntimeError(reason)


def test_a_failing_tool_gives_error_type_and_status_error(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    script = [
        Message.assistant(tool_calls=[tool_call("explode", "c1", reason="boom"),
                                      tool_call("no_such_tool", "c2")]),
        "gave up",
    ]
    _loop_run(store, Telemetry(provider), script=script, tools=[explode])
    spans = {s.attributes.get("gen_ai.tool.call.id"): s for s in exporter.get_finished_spans()
             if s.name.startswith("execute_tool")}
    assert spans["c1"].name == "execute_tool explode"
    assert spans["c1"].attributes["error.type"] == "RuntimeError"
    assert spans["c1"].status.status_code == StatusCode.ERROR
    assert spans["c2"].name == "execute_tool no_such_tool"
    assert spans["c2"].attributes["error.type"] == "UnknownToolError"
    assert spans["c2"].status.status_code == StatusCode.ERROR
    assert "boom" not in _all_attribute_text(exporter.get_finished_spans())


def test_a_failing_model_call_gives_error_type_on_chat_and_the_run(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    class Down:
        name = "openai"
        base_url = "https://models.example.invalid:8443/v1"
        model = "gpt-down"

        def complete(self, request: Request) -> Response:
            raise ProviderUnavailableError("gateway timeout", provider="openai", status=504)

    with (
        pytest.raises(ProviderUnavailableError),
        record("down", store=store, redactor=Redactor(env={}),
               telemetry=Telemetry(provider)) as run,
    ):
        client = Client(Down(), run=run, profiles=NO_PROFILES, cache=False,
                        retry=RetryPolicy(max_attempts=1))
        with run.span("call", agent="caller"):
            client.complete(messages=[Message.user(PROMPT)])
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat = spans["chat gpt-down"]
    assert chat.attributes["error.type"] == "ProviderUnavailableError"
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["server.address"] == "models.example.invalid"
    assert chat.attributes["server.port"] == 8443
    assert "gen_ai.response.model" not in chat.attributes
    agent = spans["invoke_agent caller"]
    assert agent.attributes["error.type"] == "ProviderUnavailableError"
    assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
    root = spans["invoke_agent run"]
    assert root.status.status_code == StatusCode.ERROR
    assert root.attributes["rar.status"] == "failed"
    assert "gateway timeout" not in _all_attribute_text(spans.values())


def test_all_spans_also_gives_rars_other_spans(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    _loop_run(store, Telemetry(provider, all_spans=True))
    assert _tree(exporter.get_finished_spans()) == [
        (0, "invoke_agent math-helper"),
        (1, "step"),
        (2, "chat scripted"),
        (2, "tool-0"),
        (3, "execute_tool calculator"),
        (1, "step"),
        (2, "chat scripted"),
    ]
    tool_span = next(s for s in exporter.get_finished_spans() if s.name == "tool-0")
    assert tool_span.attributes["rar.attr.tool"] == "calculator"


def test_instrument_after_record_and_the_current_span_inside_an_agent_span(
    store: Store, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with record("x", store=store, redactor=Redactor(env={})) as run:
        instrument(run, provider, agent_name="outer")
        with run.span("work", agent="worker", split=[1, 2]):
            inner = trace.get_current_span()
            assert inner.is_recording()
            assert inner.name == "invoke_agent worker"  # type: ignore[attr-defined]
        assert not trace.get_current_span().is_recording()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent outer", "invoke_agent worker"}
    assert spans["invoke_agent worker"].attributes["rar.attr.split"] == (1, 2)


def test_bad_user_attributes_are_refused_before_the_run_starts(
    store: Store, provider: TracerProvider
) -> None:
    from rar.errors import ConfigError

    with pytest.raises(ConfigError, match="tenant"):
        record("x", store=store, telemetry=Telemetry(provider, attributes={"tenant": {"a": 1}}))
    assert store.run_ids() == []  # nothing recorded


# --- observers never break a run ----------------------------------------------------------------


class Broken(RunObserver):
    calls = 0

    def on_effect(self, run: Any, event: dict[str, Any], request: Any, result: Any) -> None:
        Broken.calls += 1
        raise RuntimeError("observer bug")

    def on_span_start(self, run: Any, event: dict[str, Any]) -> None:
        raise KeyError("also broken")


def test_a_failing_observer_is_caught_and_reported_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    Broken.calls = 0
    with (
        caplog.at_level(logging.WARNING, logger="rar.runtime"),
        record("x", store=store, redactor=Redactor(env={})) as run,
    ):
        run.observe(Broken())
        with run.span("s"):
            assert run.effect("tool", {"name": "t"}, lambda: 41) == 41
        assert run.effect("tool", {"name": "t", "n": 2}, lambda: 42) == 42
    assert Broken.calls == 2
    warnings = [r for r in caplog.records if "observer Broken" in r.getMessage()]
    assert len(warnings) == 1 and "on_span_start" in warnings[0].getMessage()
    assert run.manifest.status.value == "completed"


def test_observers_do_not_change_the_record(
    store_path: Path, provider: TracerProvider
) -> None:
    def shapes(telemetry: Any) -> list[tuple[Any, ...]]:
        s = Store(store_path)
        run = _loop_run(s, telemetry)
        return [(e["type"], e["span"], e.get("kind"), e.get("request", {}).get("digest"))
                for e in s.events(run.id)]

    assert shapes(None) == shapes(Telemetry(provider))


# --- replays, science runs, flows, the CLI ------------------------------------------------------


def calc_entry(run: Any, task: str) -> dict[str, str]:
    client = Client(ScriptedModel(_script()), run=run, profiles=NO_PROFILES, cache=False)
    result = Agent(client, default_tools()).run(task, run=run)
    return {"text": result.text}


def test_spans_of_a_replay_carry_rar_replayed(
    store: Store, env_telemetry: TracerProvider, exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rar.replay.engine import execute, replay

    monkeypatch.delenv("RAR_OTEL")
    original = execute(calc_entry, inputs={"task": PROMPT}, store=store,
                       redactor=Redactor(env={}))
    assert exporter.get_finished_spans() == ()  # not enabled: nothing
    monkeypatch.setenv("RAR_OTEL", "1")
    report = replay(original.id, store=store, redactor=Redactor(env={}))
    assert report.reproducible
    spans = exporter.get_finished_spans()
    assert [name for _, name in _tree(spans)] == [
        "invoke_agent run", "chat scripted", "execute_tool calculator", "chat scripted"
    ]
    for span in spans:
        assert span.attributes["rar.replayed"] is True
        assert span.attributes["rar.replay_of"] == original.id
        assert span.attributes["rar.run_id"] == report.replay_run


def test_a_science_run_shows_its_agents_and_contract_net_rounds(
    store_path: Path, env_telemetry: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    result = CliRunner().invoke(
        cli, ["--store", str(store_path), "run", "How is activation energy determined?",
              "--json"], catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: ReadableSpan) -> str | None:
        return by_id[span.parent.span_id].name if span.parent is not None else None

    root = next(s for s in spans if s.parent is None)
    assert root.name == "invoke_agent science"
    names = [s.name for s in spans]
    assert "invoke_agent planner" in names and "invoke_agent researcher" in names
    assert "invoke_agent auditor" in names
    rounds = [s for s in spans if s.name.startswith("contract_net ")]
    assert {s.name for s in rounds} >= {"contract_net research", "contract_net audit"}
    for span in rounds:
        a = span.attributes
        assert parent(span) == "invoke_agent science"
        assert a["rar.contract_net.cfps"] == 1 and a["rar.contract_net.awards"] == 1
        assert a["rar.contract_net.bids"] >= 1 and a["rar.contract_net.reports"] == 1
        assert a["rar.contract_net.bids"] == a["rar.contract_net.awards"] + a[
            "rar.contract_net.rejects"]
        assert a["rar.contract_net.task"] == span.name.split(" ", 1)[1]
        assert a["rar.contract_net.winner"] in ("researcher", "executor", "auditor")
        assert a["gen_ai.agent.name"] == "planner" and a["rar.contract_net.task_id"]
        winners = [s for s in spans if s.parent is not None
                   and s.parent.span_id == span.context.span_id]
        assert [s.name for s in winners] == [f"invoke_agent {a['rar.contract_net.winner']}"]
    search = [s for s in spans if s.name == "execute_tool search"]
    assert search and all(parent(s) == "invoke_agent researcher" for s in search)
    assert all(s.attributes["gen_ai.agent.name"] == "researcher" for s in search)
    plans = [s for s in spans if s.name == "invoke_agent planner"]
    assert all(
        any(c.name.startswith("chat ") and c.parent.span_id == p.context.span_id  # type: ignore[union-attr]
            for c in spans)
        for p in plans
    )
    run_id = json.loads(result.output)["run_id"]
    assert {s.attributes["rar.run_id"] for s in spans} == {run_id}
    assert "activation energy" not in _all_attribute_text(spans).lower()


def test_rar_ask_and_flow_demo_take_otel(
    store_path: Path, monkeypatch: pytest.MonkeyPatch, provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    import os

    monkeypatch.setattr(otel, "_provider", provider)
    monkeypatch.delenv("RAR_OTEL", raising=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["--store", str(store_path), "ask", PROMPT, "--otel"],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "RAR_OTEL" not in os.environ  # --otel is for this command only
    names = [s.name for s in exporter.get_finished_spans()]
    assert names[-1] == "invoke_agent ask" and "chat echo" in names
    exporter.clear()
    result = runner.invoke(cli, ["--store", str(store_path), "flow", "demo", "--otel"],
                           catch_exceptions=False)
    assert result.exit_code == 0, result.output
    spans = exporter.get_finished_spans()
    workflow = [s for s in spans if s.name.startswith("invoke_workflow ")]
    assert len(workflow) == 1 and workflow[0].attributes["gen_ai.workflow.name"]
    steps = [s for s in spans if s.name.startswith("invoke_agent ")
             and s.parent is not None and s.parent.span_id == workflow[0].context.span_id]
    assert len(steps) >= 3
    assert any(s.name.startswith("chat ") for s in spans)
    # parallel splits are agent spans too, each with its split
    assert any("rar.attr.split" in s.attributes for s in spans)


def test_the_built_in_exporter_sends_otlp_to_the_environments_endpoint(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rar.export.otlp import hex_ids_to_base64
    from test_export_otlp import Receiver

    with Receiver() as receiver:
        for protocol in ("http/json", "http/protobuf"):
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k%201")
            provider = otel.environment_provider()
            _loop_run(store, Telemetry(provider))
            provider.force_flush()
            provider.shutdown()
            path, headers, body = receiver.requests[-1]
            assert path == "/v1/traces" and headers["x-api-key"] == "k 1"
            request = receiver.decode(headers, body)
            names = [s.name for r in request.resource_spans for ss in r.scope_spans
                     for s in ss.spans]
            assert sorted(names) == sorted(["invoke_agent math-helper", "chat scripted",
                                            "execute_tool calculator", "chat scripted"])
            if protocol == "http/json":
                assert headers["content-type"] == "application/json"
                doc = json.loads(body)
                span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
                assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
                assert hex_ids_to_base64(doc) != doc
            else:
                assert headers["content-type"] == "application/x-protobuf"


def test_an_unreachable_collector_never_breaks_a_run(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from test_export_otlp import free_port

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    provider = otel.environment_provider()
    with caplog.at_level(logging.WARNING, logger="rar.interop.otel"):
        run = _loop_run(store, Telemetry(provider))
        provider.force_flush()
        provider.shutdown()
    assert run.manifest.status.value == "completed"
    assert any("could not export spans" in r.getMessage() for r in caplog.records)
