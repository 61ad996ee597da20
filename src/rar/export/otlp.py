"""``rar export RUN --format otlp``: a recorded run as OTLP/JSON trace data.

The document is an ``ExportTraceServiceRequest`` in the OTLP/JSON encoding
(``resourceSpans`` → ``scopeSpans`` → ``spans``), built from the record alone — not from live
spans — with the same span names and attributes as the live spans of
:mod:`rar.interop.otel` (both use :mod:`rar.interop._otel_mapping`):

* the trace id is derived from the run id (16 bytes), each span id from the span's identity in
  the record (8 bytes: its span path, or span path and ordinal for a model or tool call), and
  ``parentSpanId`` links follow the span paths; ids are lowercase **hex**, as OTLP/JSON wants
  (protobuf's ``json_format`` would write base64, so it is not used for writing);
* times come from the events' ``ts`` (``startTimeUnixNano`` / ``endTimeUnixNano``, int64 as
  strings), ``kind`` and ``status.code`` are integers, attributes are ``AnyValue`` objects
  (``stringValue``, ``intValue`` as a string, ``boolValue``, ``doubleValue``, ``arrayValue``);
* the output is deterministic: the same run gives the same bytes.

:func:`send` POSTs a document to an OTLP/HTTP endpoint (``{endpoint}/v1/traces``), as JSON
(``Content-Type: application/json``, needs nothing more) or protobuf (needs
``opentelemetry-proto``, in the ``otel`` extra).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from rar.errors import BlobMissingError, CorruptionError, RarError
from rar.interop._otel_mapping import (
    ROOT,
    STATUS_ERROR,
    STATUS_UNSET,
    MappingOptions,
    PlannedSpan,
    SpanMapper,
    linked_payload,
)

SCOPE_NAME = "rar"
SERVICE_NAME = "rar"
JSON_TYPE = "application/json"
PROTOBUF_TYPE = "application/x-protobuf"


class OtlpSendError(RarError):
    """The OTLP endpoint refused the document or could not be reached."""

    exit_code = 3


# --- ids ---------------------------------------------------------------------------------------


def trace_id(run_id: str) -> str:
    """The run's trace id: 16 bytes derived from its run id, as 32 lowercase hex digits."""
    return _nonzero(hashlib.sha256(f"rar.trace/1\x00{run_id}".encode()).digest()[:16]).hex()


def span_id(run_id: str, key: str) -> str:
    """A span's id: 8 bytes derived from the run id and the span's identity, as 16 hex digits."""
    return _nonzero(hashlib.sha256(f"rar.span/1\x00{run_id}\x00{key}".encode()).digest()[:8]).hex()


def _nonzero(raw: bytes) -> bytes:
    return raw if any(raw) else raw[:-1] + b"\x01"  # an all-zero id is invalid in OTLP


# --- OTLP/JSON values -----------------------------------------------------------------------


def any_value(value: Any) -> dict[str, Any]:
    """``value`` as an OTLP ``AnyValue`` in the JSON encoding."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isnan(value):
            return {"doubleValue": "NaN"}
        if math.isinf(value):
            return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [any_value(item) for item in value]}}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": key_values(value)}}
    if value is None:
        return {}
    return {"stringValue": str(value)}


def key_values(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Attributes as a list of OTLP ``KeyValue`` objects, sorted by key."""
    return [{"key": str(key), "value": any_value(attributes[key])} for key in sorted(attributes)]


def span_json(
    *,
    trace: str,
    span: str,
    parent: str | None,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, Any],
    status_code: int = STATUS_UNSET,
    status_message: str = "",
) -> dict[str, Any]:
    """One OTLP/JSON span."""
    out: dict[str, Any] = {"traceId": trace, "spanId": span}
    if parent:
        out["parentSpanId"] = parent
    out.update(
        {
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(max(end_ns, start_ns)),
            "attributes": key_values(attributes),
        }
    )
    status: dict[str, Any] = {}
    if status_code != STATUS_UNSET:
        status["code"] = status_code
        if status_message:
            status["message"] = status_message
    out["status"] = status
    return out


def document(
    resource: Mapping[str, Any], scopes: Iterable[tuple[str, str | None, list[dict[str, Any]]]]
) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest``: one resource, its scopes ``(name, version, spans)``."""
    scope_spans = []
    for name, version, spans in scopes:
        scope: dict[str, Any] = {"name": name}
        if version:
            scope["version"] = version
        scope_spans.append({"scope": scope, "spans": spans})
    return {
        "resourceSpans": [{"resource": {"attributes": key_values(resource)},
                           "scopeSpans": scope_spans}]
    }


def dumps(doc: Mapping[str, Any]) -> str:
    """The document as one line of compact JSON and a newline (the form of an OTLP JSON file:
    one request per line), keys in a fixed order."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n"


# --- from a record -------------------------------------------------------------------------------


def ts_ns(text: Any) -> int | None:
    """An event's ``ts`` (ISO 8601, UTC, microseconds) in nanoseconds since the epoch."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    seconds = int(moment.timestamp())
    return seconds * 1_000_000_000 + moment.microsecond * 1000


class _Collect:
    def __init__(self) -> None:
        self.spans: list[PlannedSpan] = []

    def start(self, span: PlannedSpan) -> None:
        self.spans.append(span)

    def end(self, span: PlannedSpan) -> None:
        pass


def export_otlp(
    store: Any,
    run_id: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    capture_tool_content: bool = False,
    all_spans: bool = False,
    agent_name: str | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The run's spans as an OTLP/JSON ``ExportTraceServiceRequest`` (a dict).

    ``attributes`` are copied onto every span (as the live spans' ``attributes=...`` are);
    problems reading a payload are appended to ``warnings`` (the span is kept, without what the
    payload would have told).
    """
    from rar import __version__
    from rar.interop._otel_mapping import check_attributes

    manifest = store.manifest(run_id)
    events = store.events(run_id)
    sink = _Collect()
    options = MappingOptions(
        attributes=check_attributes(attributes),
        capture_tool_content=capture_tool_content,
        all_spans=all_spans,
        agent_name=agent_name,
    )
    problems = warnings if warnings is not None else []

    def read_request(ref: dict[str, Any]) -> Any:
        try:
            return linked_payload(ref, store.get_blob)
        except (BlobMissingError, CorruptionError, ValueError) as exc:
            problems.append(f"a request of run {run_id} could not be read: {exc}")
            return None

    mapper = SpanMapper(sink, run_id=run_id, tags=manifest.tags, options=options,
                        read_request=read_request)
    first = next((ts_ns(e.get("ts")) for e in events if ts_ns(e.get("ts")) is not None), None)
    if first is None:
        first = ts_ns(manifest.created_at) or 0
    clock = first
    mapper.begin_run(first, seq=int(events[0]["seq"]) if events else None)
    finishes = [i for i, e in enumerate(events) if e.get("type") == "run.finished"]
    last_finish = finishes[-1] if finishes else None
    for index, event in enumerate(events):
        when = ts_ns(event.get("ts"))
        clock = max(clock, when) if when is not None else clock
        kind = event.get("type")
        if kind == "span.start":
            mapper.span_start(event, clock)
        elif kind == "span.end":
            mapper.span_end(event, clock)
        elif kind == "effect":
            result = None
            if event.get("kind") in ("llm", "tool") and "result" in event:
                try:
                    result = store.resolve_payload(event["result"])
                except (BlobMissingError, CorruptionError, ValueError) as exc:
                    problems.append(f"the result of event {event.get('seq')} could not be "
                                    f"read: {exc}")
            mapper.effect(event, result, clock)
        elif kind == "message":
            mapper.message(event)
        elif kind == "run.finished" and index == last_finish:
            mapper.finish_run(event, clock)
    if last_finish is None:  # interrupted, or still being written: end what is open, say so
        root = next((s for s in sink.spans if s.key == ROOT), None)
        if root is not None:
            root.attributes["rar.status"] = _status(manifest)
        mapper.close(clock)
    trace = trace_id(run_id)
    spans = [
        span_json(
            trace=trace,
            span=span_id(run_id, planned.key),
            parent=span_id(run_id, planned.parent) if planned.parent else None,
            name=planned.name,
            kind=planned.kind,
            start_ns=planned.start_ns,
            end_ns=planned.end_ns if planned.end_ns is not None else clock,
            attributes=planned.attributes,
            status_code=STATUS_ERROR if planned.error_type else STATUS_UNSET,
            status_message=planned.error_type or "",
        )
        for planned in sink.spans
    ]
    return document({"service.name": SERVICE_NAME}, [(SCOPE_NAME, __version__, spans)])


def _status(manifest: Any) -> str:
    status = getattr(manifest, "status", None)
    return str(getattr(status, "value", status) or "running")


# --- sending ---------------------------------------------------------------------------------


def traces_url(endpoint: str) -> str:
    """``{endpoint}/v1/traces`` (an endpoint that already ends so is used as it is)."""
    base = endpoint.strip()
    if base.rstrip("/").endswith("/v1/traces"):
        return base
    return base.rstrip("/") + "/v1/traces"


def parse_headers(text: str) -> dict[str, str]:
    """Headers as ``OTEL_EXPORTER_OTLP_HEADERS`` writes them: ``key=value,key2=value2``, values
    URL-encoded (e.g. ``Authorization=Basic%20...`` for Langfuse)."""
    headers: dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            headers[unquote(name.strip())] = unquote(value.strip())
    return headers


def hex_ids_to_base64(doc: Any) -> Any:
    """A copy of an OTLP/JSON document with trace and span ids in base64, the form protobuf's
    ``json_format`` reads (OTLP/JSON writes them as hex)."""
    if isinstance(doc, list):
        return [hex_ids_to_base64(item) for item in doc]
    if not isinstance(doc, dict):
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
            out[key] = base64.b64encode(bytes.fromhex(value)).decode() if value else value
        else:
            out[key] = hex_ids_to_base64(value)
    return out


def to_protobuf(doc: Mapping[str, Any]) -> bytes:
    """The document as a serialized protobuf ``ExportTraceServiceRequest`` (needs
    ``opentelemetry-proto``)."""
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError as exc:
        from rar.errors import ConfigError

        raise ConfigError(
            "sending OTLP as protobuf needs opentelemetry-proto: pip install 'rar[otel]' "
            "(or send JSON: --protocol json)"
        ) from exc
    message = ExportTraceServiceRequest()
    json_format.ParseDict(hex_ids_to_base64(doc), message)
    return message.SerializeToString()  # type: ignore[no-any-return]


def send(
    doc: Mapping[str, Any],
    endpoint: str,
    *,
    protocol: str = "json",
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> int:
    """POST the document to ``{endpoint}/v1/traces``; return the HTTP status. A refused or
    failed request raises :class:`OtlpSendError` saying what the endpoint answered."""
    if protocol == "protobuf":
        body, content_type = to_protobuf(doc), PROTOBUF_TYPE
    elif protocol == "json":
        body, content_type = json.dumps(doc, separators=(",", ":")).encode(), JSON_TYPE
    else:
        raise ValueError(f"protocol must be 'json' or 'protobuf', not {protocol!r}")
    return post(traces_url(endpoint), body, content_type, headers=headers, timeout=timeout)


def post(
    url: str,
    body: bytes,
    content_type: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> int:
    """POST ``body``; the status on 2xx, else :class:`OtlpSendError`."""
    if not url.startswith(("http://", "https://")):
        raise OtlpSendError(f"the OTLP endpoint {url!r} is not an http:// or https:// URL")
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", content_type)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = int(response.status)
            response.read()
    except urllib.error.HTTPError as exc:
        detail = _body_text(exc)
        raise OtlpSendError(
            f"the OTLP endpoint {url} answered HTTP {exc.code} {exc.reason}"
            + (f": {detail}" if detail else ""),
            status=exc.code,
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OtlpSendError(
            f"cannot send to the OTLP endpoint {url}: {reason} (is the collector running, and "
            "is the URL its OTLP/HTTP address, e.g. http://localhost:4318?)"
        ) from None
    if not 200 <= status < 300:
        raise OtlpSendError(f"the OTLP endpoint {url} answered HTTP {status}", status=status)
    return status


def _body_text(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(2000).decode("utf-8", "replace").strip()
    except Exception:
        return ""
    return " ".join(text.split())[:300]
