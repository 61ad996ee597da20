"""``rar export RUN --format otlp``: OTLP/JSON built from the record, and sent to an endpoint.

The files are decoded with opentelemetry-proto. OTLP/JSON writes trace and span ids as hex;
protobuf's ``json_format.Parse`` reads bytes fields as base64, so the test converts the ids
(hex → base64) before parsing, and compares them as bytes afterwards.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rar.cli import cli
from rar.export.otlp import export_otlp, span_id, trace_id
from rar.llm import Message, ScriptedModel, tool_call
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store
from rar.tools import default_tools

PROMPT = "PROMPT-TEXT-7f3a: what is (17 + 25) * 3?"
ANSWER = "COMPLETION-TEXT-91b2: it is 126."
HEX32 = re.compile(r"[0-9a-f]{32}")
HEX16 = re.compile(r"[0-9a-f]{16}")


# --- a tiny OTLP/HTTP receiver on loopback (also used by tests/test_otel.py) -------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    """Records every POST (path, headers with lower-case names, body); answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.requests.append((self.path, headers, body))
                ok = 200 <= receiver.status < 300
                content_type = self.headers.get("Content-Type", "")
                answer = (b"{}" if "json" in content_type else b"") if ok else b"it went wrong"
                self.send_response(receiver.status)
                self.send_header("Content-Type", content_type if ok else "text/plain")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def decode(headers: dict[str, str], body: bytes) -> Any:
        pb = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
        if headers.get("content-type") == "application/x-protobuf":
            return pb.ExportTraceServiceRequest.FromString(body)
        return decode(json.loads(body))


def _b64_ids(value: Any) -> Any:
    """The test's own hex -> base64 conversion of trace and span ids, for json_format."""
    if isinstance(value, list):
        return [_b64_ids(v) for v in value]
    if isinstance(value, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId") else _b64_ids(v)
            for k, v in value.items()
        }
    return value


def decode(doc: dict[str, Any]) -> Any:
    pb = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    from google.protobuf import json_format

    message = pb.ExportTraceServiceRequest()
    json_format.ParseDict(_b64_ids(doc), message)
    return message


def _value(any_value: Any) -> Any:
    which = any_value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, which) if which else None


def _attrs(span: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in span.attributes}


def _spans(message: Any) -> list[Any]:
    return [s for r in message.resource_spans for ss in r.scope_spans for s in ss.spans]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The receiver is on loopback: no proxy of the environment stands in between."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    yield


# --- runs ----------------------------------------------------------------------------------------


def _loop_run(store: Store, telemetry: Any = None, script: Any = None) -> Any:
    script = script or [
        Message.assistant(tool_calls=[tool_call("calculator", "call-1",
                                                expression="(17 + 25) * 3")]),
        ANSWER,
    ]
    with record("loop", store=store, redactor=Redactor(env={}), telemetry=telemetry,
                tags={"agent": "math-helper"}) as run:
        client = Client(ScriptedModel(script), run=run, profiles=Profiles(), cache=False)
        Agent(client, default_tools()).run(PROMPT, run=run)
    return run


def _export(store_path: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", str(store_path), "export", *args],
                              catch_exceptions=False)


@pytest.fixture
def loop_run(store: Store) -> Any:
    return _loop_run(store)


# --- the document --------------------------------------------------------------------------------


def test_a_loop_run_exports_as_otlp_json_that_opentelemetry_proto_decodes(
    store: Store, store_path: Path, loop_run: Any, tmp_path: Path
) -> None:
    out = tmp_path / "trace.otlp.json"
    result = _export(store_path, loop_run.id, "--format", "otlp", "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    raw = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    # OTLP/JSON as the spec writes it: hex ids, int64 as strings, enums as integers
    for span in raw:
        assert HEX32.fullmatch(span["traceId"]) and HEX16.fullmatch(span["spanId"])
        assert "parentSpanId" not in span or HEX16.fullmatch(span["parentSpanId"])
        assert isinstance(span["kind"], int)
        assert span["startTimeUnixNano"].isdigit() and span["endTimeUnixNano"].isdigit()
        assert int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"])
        for kv in span["attributes"]:
            (kind, value), = kv["value"].items()
            assert kind in ("stringValue", "intValue", "boolValue", "doubleValue", "arrayValue")
            if kind == "intValue":
                assert isinstance(value, str) and value.lstrip("-").isdigit()
    message = decode(doc)
    (resource,) = message.resource_spans
    assert _attrs(resource.resource) == {"service.name": "rar"}
    assert resource.scope_spans[0].scope.name == "rar"
    spans = _spans(message)
    by_id = {s.span_id: s for s in spans}
    root = next(s for s in spans if not s.parent_span_id)
    assert root.name == "invoke_agent math-helper" and root.kind == 1
    children = [s for s in spans if s.parent_span_id]
    assert [s.name for s in children] == ["chat scripted", "execute_tool calculator",
                                          "chat scripted"]
    assert all(by_id[s.parent_span_id] is root for s in children)
    assert {s.trace_id for s in spans} == {bytes.fromhex(trace_id(loop_run.id))}
    assert root.span_id == bytes.fromhex(span_id(loop_run.id, "run"))
    assert len(root.trace_id) == 16 and all(len(s.span_id) == 8 for s in spans)
    assert len(set(by_id)) == 4
    chat, tool, last = children
    assert chat.kind == 3 and tool.kind == 1  # CLIENT, INTERNAL
    a = _attrs(chat)
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "scripted"
    assert a["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.agent.name"] == "math-helper"
    assert _attrs(last)["gen_ai.response.finish_reasons"] == ["stop"]
    t = _attrs(tool)
    assert t["gen_ai.tool.name"] == "calculator" and t["gen_ai.tool.call.id"] == "call-1"
    r = _attrs(root)
    assert r["gen_ai.usage.output_tokens"] == a["gen_ai.usage.output_tokens"] + _attrs(last)[
        "gen_ai.usage.output_tokens"]
    assert r["rar.run_id"] == loop_run.id and r["rar.seq"] == 1 and r["rar.span"] == "run"
    events = {e["seq"]: e for e in store.events(loop_run.id)}
    assert root.start_time_unix_nano < chat.start_time_unix_nano <= chat.end_time_unix_nano
    assert events[_attrs(tool)["rar.seq"]]["kind"] == "tool"
    text = out.read_text()
    assert PROMPT not in text and ANSWER not in text and "PROMPT-TEXT" not in text
    assert all(s.status.code == 0 for s in spans)


def test_the_export_is_deterministic(store_path: Path, loop_run: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        assert _export(store_path, loop_run.id, "--format", "otlp", "-o", str(out)).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text().count("\n") == 1  # one request per line, as OTLP JSON files hold
    other = _loop_run(Store(store_path))
    assert trace_id(other.id) != trace_id(loop_run.id)
    assert trace_id(loop_run.id) == trace_id(loop_run.id)


def test_failures_give_error_type_and_status_code_2(store: Store) -> None:
    script = [Message.assistant(tool_calls=[tool_call("no_such_tool", "c9")]), "ok"]
    run = _loop_run(store, script=script)
    doc = export_otlp(store, run.id)
    spans = {s["name"]: s for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]}
    tool = spans["execute_tool no_such_tool"]
    assert tool["status"] == {"code": 2, "message": "UnknownToolError"}
    assert {"key": "error.type", "value": {"stringValue": "UnknownToolError"}} in tool[
        "attributes"]
    assert spans["invoke_agent math-helper"]["status"] == {}


def test_attributes_given_are_on_every_span(store_path: Path, loop_run: Any) -> None:
    result = _export(store_path, loop_run.id, "--format", "otlp", "--attribute", "tenant.id=a",
                     "--attribute", "feature=calc")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        attrs = {kv["key"]: kv["value"] for kv in span["attributes"]}
        assert attrs["tenant.id"] == {"stringValue": "a"}
        assert attrs["feature"] == {"stringValue": "calc"}


def test_a_run_still_being_written_exports_what_it_has(store: Store) -> None:
    run = record("open", store=store, redactor=Redactor(env={}))
    with run.span("work", agent="worker"):
        run.effect("tool", {"name": "t", "call_id": "x"}, lambda: {"ok": True})
        doc = export_otlp(store, run.id)
    run.finish()
    spans = {s["name"]: s for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]}
    assert set(spans) == {"invoke_agent run", "invoke_agent worker", "execute_tool t"}
    root = {kv["key"]: kv["value"] for kv in spans["invoke_agent run"]["attributes"]}
    assert root["rar.status"] == {"stringValue": "running"}


# --- the same spans as live telemetry ----------------------------------------------------------


def _live_vs_export(live: Any, doc: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    exported = [
        (s["name"], s["kind"], {kv["key"]: kv["value"] for kv in s["attributes"]})
        for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    ]
    from rar.export.otlp import any_value

    seen = [
        (s.name, s.kind.value + 1,
         {k: any_value(list(v) if isinstance(v, tuple) else v) for k, v in s.attributes.items()})
        for s in live
    ]
    key = lambda item: (item[2]["rar.seq"]["intValue"], item[0])  # noqa: E731
    return sorted(seen, key=key), sorted(exported, key=key)


def test_the_export_has_the_live_spans_names_and_attributes(store: Store) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run = _loop_run(store, telemetry=provider)
    live, exported = _live_vs_export(exporter.get_finished_spans(), export_otlp(store, run.id))
    assert live == exported and len(live) == 4


def test_a_science_run_exports_the_same_agents_and_rounds_as_live(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import rar.interop.otel as otel
    from rar.science.runtime import ask_question

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(otel, "_provider", provider)
    monkeypatch.setenv("RAR_OTEL", "1")
    result = ask_question("How is activation energy determined?", store=store)
    doc = export_otlp(store, result.run_id)
    live, exported = _live_vs_export(exporter.get_finished_spans(), doc)
    assert live == exported
    names = {name for name, _, _ in exported}
    assert {"invoke_agent science", "invoke_agent planner", "invoke_agent researcher",
            "contract_net research", "execute_tool search"} <= names
    message = decode(doc)
    spans = _spans(message)
    by_id = {s.span_id: s for s in spans}
    for span in spans:
        if span.name == "invoke_agent researcher":
            assert by_id[span.parent_span_id].name == "contract_net research"
        if span.name.startswith("contract_net "):
            a = _attrs(span)
            assert a["rar.contract_net.bids"] >= 1 and a["rar.contract_net.awards"] == 1


# --- sending ---------------------------------------------------------------------------------


def test_endpoint_posts_otlp_json_to_v1_traces(store_path: Path, loop_run: Any) -> None:
    with Receiver() as receiver:
        result = _export(store_path, loop_run.id, "--format", "otlp", "--endpoint",
                         receiver.url)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""  # sent, not printed
    assert f"sent 4 spans of run {loop_run.id}" in result.stderr and "HTTP 200" in result.stderr
    ((path, headers, body),) = receiver.requests
    assert path == "/v1/traces" and headers["content-type"] == "application/json"
    names = sorted(s.name for s in _spans(Receiver.decode(headers, body)))
    assert names == sorted(["invoke_agent math-helper", "chat scripted", "chat scripted",
                            "execute_tool calculator"])
    exported = _export(store_path, loop_run.id, "--format", "otlp").stdout
    assert json.loads(body) == json.loads(exported)


def test_endpoint_with_protocol_protobuf_and_a_file_too(
    store_path: Path, loop_run: Any, tmp_path: Path
) -> None:
    pytest.importorskip("opentelemetry.proto")
    out = tmp_path / "t.json"
    with Receiver() as receiver:
        result = _export(store_path, loop_run.id, "--format", "otlp", "--endpoint",
                         receiver.url + "/v1/traces", "--protocol", "protobuf", "-o", str(out))
    assert result.exit_code == 0, result.output
    ((path, headers, body),) = receiver.requests
    assert path == "/v1/traces" and headers["content-type"] == "application/x-protobuf"
    sent = Receiver.decode(headers, body)
    assert sent == decode(json.loads(out.read_text()))


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_an_endpoint_answering_an_error_is_a_clear_error_exit_3(
    store_path: Path, loop_run: Any, status: int
) -> None:
    with Receiver(status=status) as receiver:
        result = _export(store_path, loop_run.id, "--format", "otlp", "--endpoint",
                         receiver.url)
    assert result.exit_code == 3
    assert f"answered HTTP {status}" in result.stderr and "it went wrong" in result.stderr
    assert result.stderr.startswith("error: ")


def test_a_refused_connection_is_a_clear_error_exit_3(store_path: Path, loop_run: Any) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = _export(store_path, loop_run.id, "--format", "otlp", "--endpoint", url)
    assert result.exit_code == 3
    assert "cannot send to the OTLP endpoint" in result.stderr and url in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "trajectory", "--endpoint", "http://127.0.0.1:1"], "--format otlp only"),
        (["--format", "otlp", "--protocol", "json"], "--endpoint only"),
        (["--format", "otlp", "--attribute", "novalue"], "KEY=VALUE"),
        (["--format", "otlp", "--endpoint", "ftp://example.invalid"], "not an http"),
    ],
)
def test_bad_options_are_refused(
    store_path: Path, loop_run: Any, args: list[str], message: str
) -> None:
    result = _export(store_path, loop_run.id, *args)
    assert result.exit_code in (2, 3) and message in result.output
