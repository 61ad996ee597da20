"""Live OpenTelemetry spans of a run, following the GenAI semantic conventions.

::

    from opentelemetry.sdk.trace import TracerProvider
    from rar.interop.otel import instrument

    with rar.record("What is (17 + 25) * 3?") as run:
        instrument(run, provider, attributes={"tenant.id": "tenant-a"})
        Agent(...).run("What is (17 + 25) * 3?", run=run)

    # or: rar.record(..., telemetry=True), or RAR_OTEL=1 in the environment

One run gives this tree (the agent loop with one calculator call)::

    invoke_agent <name>          INTERNAL  gen_ai.usage.* summed over the chat spans below
    ├── chat <model>             CLIENT    gen_ai.request.model, gen_ai.response.model,
    │                                      gen_ai.usage.*, gen_ai.response.finish_reasons
    ├── execute_tool calculator  INTERNAL  gen_ai.tool.name, gen_ai.tool.call.id
    └── chat <model>             CLIENT

Spans opened with ``agent=`` become ``invoke_agent <agent>`` (the science runtime's planner,
researcher, executor and auditor; a flow's steps), Contract Net rounds ``contract_net <task>``
and flows ``invoke_workflow <flow>``; :mod:`rar.interop._otel_mapping` has the whole mapping,
which ``rar export --format otlp`` shares. Prompts and completions are never recorded on a
span; tool arguments and results only with ``capture_tool_content=True``.

This module is the only one that imports OpenTelemetry, and it is imported only when telemetry
is asked for: the run's observer hook (:meth:`rar.runtime.run.Run.observe`) feeds it, and RAR's
core knows nothing of it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rar.errors import ConfigError
from rar.interop._otel_mapping import (
    KIND_CLIENT,
    MappingOptions,
    PlannedSpan,
    SpanMapper,
    check_attributes,
    linked_payload,
)
from rar.runtime.run import RunObserver

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the otel extra is in the test extra
    raise ConfigError(
        "live OpenTelemetry spans need OpenTelemetry: pip install 'rar[otel]'"
    ) from exc

if TYPE_CHECKING:
    from rar.runtime.run import Run

__all__ = ["OtelObserver", "Telemetry", "instrument"]


@dataclass(frozen=True)
class Telemetry:
    """Options of live spans, for ``rar.record(..., telemetry=Telemetry(...))``; the fields are
    :func:`instrument`'s arguments."""

    tracer_provider: Any = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    capture_tool_content: bool = False
    all_spans: bool = False
    agent_name: str | None = None
    set_current: bool = True


def instrument(
    run: Run,
    tracer_provider: Any = None,
    *,
    attributes: Mapping[str, Any] | None = None,
    capture_tool_content: bool = False,
    all_spans: bool = False,
    agent_name: str | None = None,
    set_current: bool = True,
) -> OtelObserver:
    """Send live spans of ``run`` from now on; return the observer (``run.unobserve`` it to
    stop).

    ``tracer_provider``: where spans go (default: the global one, or, when none is set, one
    made from the ``OTEL_EXPORTER_OTLP_*`` environment, see :func:`environment_provider`).
    ``attributes`` are copied onto every span (e.g. ``{"tenant.id": "a"}`` for cost
    attribution). ``capture_tool_content`` adds tool arguments and results
    (``gen_ai.tool.call.arguments`` / ``.result``, redacted as recorded). ``all_spans`` also
    makes RAR's other spans (``step``, ``tool-0``, ...) spans of their own. ``agent_name`` names
    the root ``invoke_agent`` span (default: the run's tag ``agent`` or ``kind``, else ``run``).
    ``set_current`` makes each agent span the current OpenTelemetry span while it is open, so
    that other instrumentation (HTTP clients, SDKs) nests under it.
    """
    try:
        checked = check_attributes(attributes)
    except ValueError as exc:
        raise ConfigError(f"telemetry attributes: {exc}") from None
    provider = tracer_provider if tracer_provider is not None else default_provider()
    from rar import __version__

    tracer = provider.get_tracer("rar", __version__)
    options = MappingOptions(
        attributes=checked,
        capture_tool_content=capture_tool_content,
        all_spans=all_spans,
        agent_name=agent_name,
    )
    observer = OtelObserver(run, tracer, options, set_current=set_current)
    run.observe(observer)
    return observer


_KINDS = {KIND_CLIENT: SpanKind.CLIENT}


class _LiveSink:
    """Planned spans as SDK spans: started with their parent, ended with their status."""

    def __init__(self, tracer: Any, parent_context: Any) -> None:
        self.tracer = tracer
        self.context = parent_context
        self.spans: dict[str, Any] = {}
        self.root: Any = None  # kept after it ends: whatever comes late stays in the trace

    def start(self, planned: PlannedSpan) -> None:
        parent = None
        if planned.parent is not None:
            parent = self.spans.get(planned.parent) or self.root
        context = (
            trace.set_span_in_context(parent, self.context) if parent is not None else self.context
        )
        span = self.tracer.start_span(
            planned.name,
            context=context,
            kind=_KINDS.get(planned.kind, SpanKind.INTERNAL),
            attributes=planned.attributes,
            start_time=planned.start_ns,
        )
        self.spans[planned.key] = span
        if planned.parent is None and self.root is None:
            self.root = span

    def end(self, planned: PlannedSpan) -> None:
        span = self.spans.pop(planned.key, None)
        if span is None:
            return
        if planned.late:  # known only now: usage sums, counts, status
            span.set_attributes(planned.late)
        if planned.error_type:
            span.set_status(Status(StatusCode.ERROR, planned.error_type))
        span.end(end_time=planned.end_ns)


class OtelObserver(RunObserver):
    """The run observer that turns a run's events into live spans."""

    def __init__(
        self, run: Run, tracer: Any, options: MappingOptions, *, set_current: bool = True
    ) -> None:
        self.sink = _LiveSink(tracer, otel_context.get_current())
        store = run.store
        self.mapper = SpanMapper(
            self.sink,
            run_id=run.id,
            tags=run.manifest.tags,
            options=options,
            read_request=lambda ref: linked_payload(ref, store.get_blob),
            redact=run.redactor.redact,
        )
        self.set_current = set_current
        self._tokens: dict[str, Any] = {}
        self.mapper.begin_run(time.time_ns())

    def on_span_start(self, run: Run, event: dict[str, Any]) -> None:
        self.mapper.span_start(event, time.time_ns())
        if self.set_current:
            path = str(event.get("span"))
            key = self.mapper.own_key(path)
            span = self.sink.spans.get(key) if key is not None else None
            if span is not None:
                self._tokens[path] = otel_context.attach(trace.set_span_in_context(span))

    def on_span_end(self, run: Run, event: dict[str, Any]) -> None:
        token = self._tokens.pop(str(event.get("span")), None)
        if token is not None:
            otel_context.detach(token)
        self.mapper.span_end(event, time.time_ns())

    def on_effect(self, run: Run, event: dict[str, Any], request: Any, result: Any) -> None:
        self.mapper.effect(event, result, time.time_ns(), request)

    def on_event(self, run: Run, event: dict[str, Any]) -> None:
        if event.get("type") == "message":
            self.mapper.message(event)

    def on_finish(self, run: Run, event: dict[str, Any]) -> None:
        self.mapper.finish_run(event, time.time_ns())


# --- where spans go by default -------------------------------------------------------------------

_provider: Any = None


def default_provider() -> Any:
    """The global tracer provider when the application set one; else RAR's own, made once per
    process from the environment (:func:`environment_provider`)."""
    global _provider
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return current
    if _provider is None:
        _provider = environment_provider()
    return _provider


def environment_provider() -> Any:
    """A TracerProvider sending spans in batches to the OTLP/HTTP endpoint the standard variables
    name (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` +
    ``/v1/traces``, default ``http://localhost:4318/v1/traces``; ``OTEL_EXPORTER_OTLP_HEADERS``;
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` ``http/protobuf``, the default, or ``http/json``), or to
    standard error with ``RAR_OTEL=console``. ``OTEL_SERVICE_NAME`` names the service (default
    ``rar``)."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError as exc:
        raise ConfigError(
            "live spans without a tracer provider of your own need the OpenTelemetry SDK: "
            "pip install 'rar[otel]'"
        ) from exc

    from rar.interop._otel_exporter import OtlpHttpSpanExporter

    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": "rar"}))
    if os.environ.get("RAR_OTEL", "").strip().lower() == "console":
        import sys

        exporter: Any = ConsoleSpanExporter(out=sys.stderr)
    else:
        exporter = OtlpHttpSpanExporter.from_environment()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _from_record(run: Run, telemetry: Any) -> OtelObserver | None:
    """``rar.record(telemetry=...)``: ``True``, a TracerProvider, a :class:`Telemetry`, or
    ``"env"`` (``RAR_OTEL`` is set; ``rar.runtime.start`` turns a ConfigError into a warning)."""
    if isinstance(telemetry, Telemetry):
        return instrument(
            run,
            telemetry.tracer_provider,
            attributes=telemetry.attributes,
            capture_tool_content=telemetry.capture_tool_content,
            all_spans=telemetry.all_spans,
            agent_name=telemetry.agent_name,
            set_current=telemetry.set_current,
        )
    if telemetry is True or telemetry == "env":
        return instrument(run)
    if hasattr(telemetry, "get_tracer"):
        return instrument(run, telemetry)
    raise ConfigError(
        f"telemetry={telemetry!r}: give True, a TracerProvider or rar.interop.otel.Telemetry(...)"
    )
