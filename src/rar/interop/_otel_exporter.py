"""RAR's OTLP/HTTP span exporter: SDK spans as OTLP (protobuf or JSON), POSTed with urllib.

It serves ``RAR_OTEL=1`` when the application set no tracer provider of its own, so live spans
reach a collector (Jaeger, Phoenix, Langfuse, an OpenTelemetry Collector) with nothing more
installed than the ``otel`` extra. It encodes with :mod:`rar.export.otlp`, the code that writes
``rar export --format otlp``, and sends with the same POST. A failed export is logged once (logger
``rar.interop.otel``) and never reaches the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from rar.export.otlp import (
    JSON_TYPE,
    PROTOBUF_TYPE,
    OtlpSendError,
    any_value,
    document,
    key_values,
    parse_headers,
    post,
    span_json,
    to_protobuf,
)

_log = logging.getLogger("rar.interop.otel")
DEFAULT_ENDPOINT = "http://localhost:4318"


def encode_spans(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Finished SDK spans as one OTLP/JSON ``ExportTraceServiceRequest`` (hex ids)."""
    by_resource: dict[int, tuple[Any, dict[tuple[str, str | None], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        scopes = by_resource.setdefault(id(resource), (resource, {}))[1]
        scope = span.instrumentation_scope
        key = (scope.name if scope else "", scope.version if scope else None)
        scopes.setdefault(key, []).append(_span(span))
    docs = [
        document(
            dict(resource.attributes) if resource else {},
            [(name, version, items) for (name, version), items in scopes.items()],
        )
        for resource, scopes in by_resource.values()
    ]
    return {"resourceSpans": [r for doc in docs for r in doc["resourceSpans"]]}


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.context
    assert context is not None
    parent = span.parent
    out = span_json(
        trace=format(context.trace_id, "032x"),
        span=format(context.span_id, "016x"),
        parent=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        kind=span.kind.value + 1,  # the API's INTERNAL is 0, OTLP's is 1
        start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0,
        attributes=dict(span.attributes or {}),
        status_code=span.status.status_code.value,
        status_message=span.status.description or "",
    )
    if span.events:
        out["events"] = [
            {
                "timeUnixNano": str(e.timestamp),
                "name": e.name,
                "attributes": key_values(dict(e.attributes or {})),
            }
            for e in span.events
        ]
    return out


class OtlpHttpSpanExporter(SpanExporter):
    """Export spans to an OTLP/HTTP ``/v1/traces`` URL as protobuf (default) or JSON."""

    def __init__(
        self,
        url: str,
        *,
        protocol: str = "protobuf",
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.protocol = protocol
        self.headers = dict(headers or {})
        self.timeout = timeout
        self._warned = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> OtlpHttpSpanExporter:
        env = os.environ if environ is None else environ
        url = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
            (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/") + "/v1/traces"
        )
        wanted = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        ).strip()
        protocol = "json" if wanted == "http/json" else "protobuf"
        if wanted not in ("http/json", "http/protobuf"):
            _log.warning(
                "OTLP protocol %r is not spoken by RAR's exporter; using http/protobuf "
                "(for gRPC, set up a tracer provider with opentelemetry-exporter-otlp)",
                wanted,
            )
        if protocol == "protobuf":
            try:
                import opentelemetry.proto.collector.trace.v1.trace_service_pb2  # noqa: F401
            except ImportError:
                _log.warning("opentelemetry-proto is not installed: sending OTLP as JSON")
                protocol = "json"
        headers = parse_headers(
            env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            or env.get("OTEL_EXPORTER_OTLP_HEADERS")
            or ""
        )
        timeout = 10.0
        raw = env.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or env.get("OTEL_EXPORTER_OTLP_TIMEOUT")
        if raw:
            with contextlib.suppress(ValueError):  # milliseconds, per the specification
                timeout = max(0.1, float(raw) / 1000.0)
        return cls(url, protocol=protocol, headers=headers, timeout=timeout)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            doc = encode_spans(spans)
            if self.protocol == "protobuf":
                body, content_type = to_protobuf(doc), PROTOBUF_TYPE
            else:
                import json

                body, content_type = json.dumps(doc, separators=(",", ":")).encode(), JSON_TYPE
            post(self.url, body, content_type, headers=self.headers, timeout=self.timeout)
        except (OtlpSendError, Exception) as exc:
            if not self._warned:
                self._warned = True
                _log.warning(
                    "could not export spans to %s: %s (further failures are not reported)",
                    self.url,
                    getattr(exc, "message", exc),
                )
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


__all__ = ["OtlpHttpSpanExporter", "any_value", "encode_spans", "parse_headers"]
