"""Which OpenTelemetry span each part of a RAR record becomes (GenAI semantic conventions).

One mapping, two consumers: live spans (:mod:`rar.interop.otel`, fed by a run's observer hook)
and the OTLP/JSON export built from a finished record (:mod:`rar.export.otlp`, fed by the
events of the log). Both feed the same events in the same order into a :class:`SpanMapper`,
which hands :class:`PlannedSpan` objects to a sink; the sinks differ only in what a span becomes
(an SDK span, or a JSON object) and where its times come from.

===================================  ==========  ============================================
RAR                                  OTel kind   span name
===================================  ==========  ============================================
the run (root span ``run``)          INTERNAL    ``invoke_agent <name>`` (tags ``agent`` or
                                                 ``kind``, else ``run``)
a span opened with ``agent=``        INTERNAL    ``invoke_agent <agent>``
a Contract Net round (a span with    INTERNAL    ``contract_net <span name>``
``protocol="fipa-contract-net"``)
a flow walk (a span with ``flow=``)  INTERNAL    ``invoke_workflow <flow>``
an ``llm`` effect                    CLIENT      ``chat <request model>``
a ``tool`` effect                    INTERNAL    ``execute_tool <tool name>``
any other span                       (none)      its children go to its parent, unless
                                                 ``all_spans=True`` (INTERNAL, its name)
===================================  ==========  ============================================

What is read: span events, the linked form of effect requests (message lists are digests
there: a prompt is never even loaded), model names, parameters, usage, finish reasons, tool
names and call ids, error types, Contract Net message performatives. Prompts, completions and
reasoning are never put in an attribute; tool arguments and results only with
``capture_tool_content=True`` (and redacted, as recorded).

Nothing here imports OpenTelemetry: the export works without it. The attribute names are the
semantic conventions' (``opentelemetry.semconv._incubating.attributes.gen_ai_attributes`` in
semantic-conventions 0.66b2 / OpenTelemetry 1.45, where every name used here exists); they are
written out as literals so that this module needs no OpenTelemetry, and a test pins each one to
the installed constant.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

# --- attribute names (GenAI semantic conventions; pinned to the semconv constants by a test) ---

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"  # semconv 0.66b2: replaces gen_ai.system
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_WORKFLOW_NAME = "gen_ai.workflow.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_SEED = "gen_ai.request.seed"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

SEMCONV_NAMES = {  # literal -> the name of its constant in gen_ai_attributes (or another module)
    GEN_AI_OPERATION_NAME: "GEN_AI_OPERATION_NAME",
    GEN_AI_PROVIDER_NAME: "GEN_AI_PROVIDER_NAME",
    GEN_AI_AGENT_NAME: "GEN_AI_AGENT_NAME",
    GEN_AI_WORKFLOW_NAME: "GEN_AI_WORKFLOW_NAME",
    GEN_AI_REQUEST_MODEL: "GEN_AI_REQUEST_MODEL",
    GEN_AI_REQUEST_TEMPERATURE: "GEN_AI_REQUEST_TEMPERATURE",
    GEN_AI_REQUEST_TOP_P: "GEN_AI_REQUEST_TOP_P",
    GEN_AI_REQUEST_MAX_TOKENS: "GEN_AI_REQUEST_MAX_TOKENS",
    GEN_AI_REQUEST_SEED: "GEN_AI_REQUEST_SEED",
    GEN_AI_RESPONSE_MODEL: "GEN_AI_RESPONSE_MODEL",
    GEN_AI_RESPONSE_FINISH_REASONS: "GEN_AI_RESPONSE_FINISH_REASONS",
    GEN_AI_USAGE_INPUT_TOKENS: "GEN_AI_USAGE_INPUT_TOKENS",
    GEN_AI_USAGE_OUTPUT_TOKENS: "GEN_AI_USAGE_OUTPUT_TOKENS",
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS",
    GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: "GEN_AI_USAGE_REASONING_OUTPUT_TOKENS",
    GEN_AI_TOOL_NAME: "GEN_AI_TOOL_NAME",
    GEN_AI_TOOL_CALL_ID: "GEN_AI_TOOL_CALL_ID",
    GEN_AI_TOOL_TYPE: "GEN_AI_TOOL_TYPE",
    GEN_AI_TOOL_CALL_ARGUMENTS: "GEN_AI_TOOL_CALL_ARGUMENTS",
    GEN_AI_TOOL_CALL_RESULT: "GEN_AI_TOOL_CALL_RESULT",
    ERROR_TYPE: "ERROR_TYPE",  # opentelemetry.semconv.attributes.error_attributes
    SERVER_ADDRESS: "SERVER_ADDRESS",  # opentelemetry.semconv.attributes.server_attributes
    SERVER_PORT: "SERVER_PORT",
}

# RAR's own attributes
RAR_RUN_ID = "rar.run_id"
RAR_SPAN = "rar.span"
RAR_SEQ = "rar.seq"
RAR_REPLAYED = "rar.replayed"
RAR_REPLAY_OF = "rar.replay_of"
RAR_CACHED = "rar.cached"
RAR_STATUS = "rar.status"
RAR_ATTRIBUTE = "rar.attr."  # + the key of an attribute given to run.span(...)
RAR_CONTRACT_NET = "rar.contract_net."  # + task, task_id, cfps, bids, awards, rejects, ...

CONTRACT_NET_PROTOCOL = "fipa-contract-net"  # rar.science.protocols.contract_net's constant

# OTLP enum values (opentelemetry/proto/trace/v1/trace.proto)
KIND_INTERNAL = 1
KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_ERROR = 2

ROOT = "run"  # the key of the root span (the run's root span path)

# RAR provider names -> gen_ai.provider.name well-known values (others are passed as they are)
PROVIDERS = {
    "openai": "openai",
    "openai-text": "openai",
    "gemini": "gcp.gemini",
    "anthropic": "anthropic",
}

USAGE = (  # Usage field -> attribute (input_tokens includes the cached ones, as semconv wants)
    ("input_tokens", GEN_AI_USAGE_INPUT_TOKENS),
    ("output_tokens", GEN_AI_USAGE_OUTPUT_TOKENS),
    ("cached_input_tokens", GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
    ("cache_write_input_tokens", GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
    ("reasoning_tokens", GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
)
_WAITING = "RunWaiting"  # a run parked until a deadline unwinds its spans: not a failure


@dataclass(slots=True)
class PlannedSpan:
    """One span as the mapping decides it; ``attributes`` are complete when it ends."""

    key: str  # stable identity: "run", a span path, "<path>/#<ordinal>" for an effect
    parent: str | None
    name: str
    kind: int
    role: str  # agent | chat | tool | contract_net | workflow | span
    start_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    end_ns: int | None = None
    error_type: str | None = None
    agent: str | None = None  # the agent it runs for (its own name for an agent span)
    usage: dict[str, int] = field(default_factory=dict)  # agent spans: summed over chat below
    contract: dict[str, Any] = field(default_factory=dict)
    late: dict[str, Any] = field(default_factory=dict)  # attributes added after the start

    def add(self, key: str, value: Any) -> None:
        """An attribute known only after the span started (usage sums, counts, status)."""
        self.attributes[key] = value
        self.late[key] = value


class Sink(Protocol):
    def start(self, span: PlannedSpan) -> None: ...

    def end(self, span: PlannedSpan) -> None: ...


@dataclass(frozen=True, slots=True)
class MappingOptions:
    attributes: Mapping[str, Any] = field(default_factory=dict)  # copied onto every span
    capture_tool_content: bool = False
    all_spans: bool = False
    agent_name: str | None = None  # of the root span


def root_agent_name(manifest_tags: Mapping[str, Any], given: str | None = None) -> str:
    """The name of the run's root ``invoke_agent`` span."""
    if given:
        return given
    for key in ("agent", "kind"):
        value = manifest_tags.get(key)
        if isinstance(value, str) and value:
            return value
    return "run"


class SpanMapper:
    """Turns a run's events, in log order, into planned spans handed to ``sink``.

    ``read_request(ref)`` returns the linked form of an effect's request (message lists stay
    digests). Thread-safe: a live run's observer may be called from several threads.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        run_id: str,
        tags: Mapping[str, Any],
        options: MappingOptions,
        read_request: Callable[[dict[str, Any]], Any],
        redact: Callable[[Any], Any] | None = None,
    ) -> None:
        self.sink = sink
        self.options = options
        self._read_request = read_request
        self._redact: Callable[[Any], Any] = redact or (lambda value: value)
        self._lock = threading.Lock()
        self._open: dict[str, PlannedSpan] = {}  # key -> open span
        self._own: dict[str, str] = {}  # RAR span path -> key of its own (emitted) span
        self._under: dict[str, str] = {ROOT: ROOT}  # RAR span path -> key its children go under
        self._agent: dict[str, str | None] = {}  # RAR span path -> agent it runs for
        self._used: set[str] = set()
        self.root_agent = root_agent_name(tags, options.agent_name)
        base: dict[str, Any] = {RAR_RUN_ID: run_id}
        replay_of = tags.get("replay_of")
        if replay_of:
            base[RAR_REPLAYED] = True
            base[RAR_REPLAY_OF] = str(replay_of)
        for key, value in options.attributes.items():
            base[str(key)] = value
        self._base = base
        self._agent[ROOT] = self.root_agent

    # --- the run -------------------------------------------------------------------------------

    def begin_run(self, now_ns: int, seq: int | None = 1) -> None:
        with self._lock:
            root = self._plan(
                ROOT,
                None,
                f"invoke_agent {self.root_agent}",
                KIND_INTERNAL,
                "agent",
                now_ns,
                ROOT,
                seq,
            )
            root.agent = self.root_agent
            root.attributes[GEN_AI_OPERATION_NAME] = "invoke_agent"
            root.attributes[GEN_AI_AGENT_NAME] = self.root_agent
            self.sink.start(root)

    def finish_run(self, event: Mapping[str, Any], now_ns: int) -> None:
        """``run.finished``: every span still open ends here, then the root."""
        with self._lock:
            for key in reversed(list(self._open)):
                if key != ROOT:
                    self._end(self._open[key], now_ns, None)
            root = self._open.get(ROOT)
            if root is None:
                return
            status = str(event.get("status") or "")
            if status:
                root.add(RAR_STATUS, status)
            error = event.get("error") if status == "failed" else None
            failed = (error or {}).get("type") if isinstance(error, dict) else None
            if status == "failed" and not failed:
                failed = "RunFailed"
            self._end(root, now_ns, failed)

    def close(self, now_ns: int) -> None:
        """End what is still open (a run that never finished: interrupted, or being written)."""
        self.finish_run({}, now_ns)

    # --- spans ---------------------------------------------------------------------------------

    def span_start(self, event: Mapping[str, Any], now_ns: int) -> None:
        path = str(event.get("span", ""))
        parent_path = path.rsplit("/", 1)[0] if "/" in path else ROOT
        with self._lock:
            under = self._under.get(parent_path, ROOT)
            agent_given = event.get("agent")
            agent = str(agent_given) if agent_given else self._agent.get(parent_path)
            self._agent[path] = agent
            attrs = event.get("attributes") or {}
            if not isinstance(attrs, Mapping):
                attrs = {}
            name = str(event.get("name") or path.rsplit("/", 1)[-1])
            seq = event.get("seq")
            if attrs.get("protocol") == CONTRACT_NET_PROTOCOL:
                span = self._plan(
                    path,
                    under,
                    f"contract_net {name}",
                    KIND_INTERNAL,
                    "contract_net",
                    now_ns,
                    path,
                    seq,
                )
                span.contract = {
                    "task": name,
                    "cfps": 0,
                    "bids": 0,
                    "awards": 0,
                    "rejects": 0,
                    "reports": 0,
                }
                if agent:
                    span.attributes[GEN_AI_AGENT_NAME] = agent
            elif agent_given:
                span = self._plan(
                    path, under, f"invoke_agent {agent}", KIND_INTERNAL, "agent", now_ns, path, seq
                )
                span.attributes[GEN_AI_OPERATION_NAME] = "invoke_agent"
                span.attributes[GEN_AI_AGENT_NAME] = agent
            elif isinstance(attrs.get("flow"), str) and attrs.get("flow"):
                flow = str(attrs["flow"])
                span = self._plan(
                    path,
                    under,
                    f"invoke_workflow {flow}",
                    KIND_INTERNAL,
                    "workflow",
                    now_ns,
                    path,
                    seq,
                )
                span.attributes[GEN_AI_OPERATION_NAME] = "invoke_workflow"
                span.attributes[GEN_AI_WORKFLOW_NAME] = flow
            elif self.options.all_spans:
                span = self._plan(path, under, name, KIND_INTERNAL, "span", now_ns, path, seq)
                if agent:
                    span.attributes[GEN_AI_AGENT_NAME] = agent
            else:  # not a span of its own: what happens in it belongs to its parent
                self._under[path] = under
                return
            span.agent = agent
            for key, value in attrs.items():
                if key in ("protocol", "flow") and span.role in ("contract_net", "workflow"):
                    continue
                plain = attribute_value(value)
                if plain is not None:
                    span.attributes[RAR_ATTRIBUTE + str(key)] = plain
            self._own[path] = span.key
            self._under[path] = span.key
            self.sink.start(span)

    def span_end(self, event: Mapping[str, Any], now_ns: int) -> None:
        path = str(event.get("span", ""))
        with self._lock:
            key = self._own.pop(path, None)
            if path != ROOT:  # nothing happens in a closed span: forget it
                self._under.pop(path, None)
                self._agent.pop(path, None)
            span = self._open.get(key) if key is not None else None
            if span is None:
                return
            failed = None
            if event.get("status") == "error":
                error = event.get("error")
                failed = str(error.get("type") or "Error") if isinstance(error, dict) else "Error"
                if failed == _WAITING:
                    span.add(RAR_STATUS, "waiting")
                    failed = None
            self._end(span, now_ns, failed)

    # --- effects and messages ------------------------------------------------------------------

    def effect(
        self, event: Mapping[str, Any], result: Any, end_ns: int, request: Any = None
    ) -> None:
        """An effect event: ``llm`` and ``tool`` effects become spans that end at ``end_ns``.

        ``request`` is the request as the agent passed it, when the caller has it (a live run);
        otherwise its linked form is read from the record. Only names and numbers are read from
        it, and tool arguments when they are captured (then passed through ``redact``).
        """
        kind = event.get("kind")
        if kind not in ("llm", "tool"):
            return
        if request is None:
            request = self._read_request(event.get("request") or {})
        if not isinstance(request, Mapping):
            request = {}
        path = str(event.get("span", ROOT))
        with self._lock:
            under = self._under.get(path, ROOT)
            parent = self._open.get(under)
            duration_ns = max(0, int(event.get("duration_us") or 0)) * 1000
            start_ns = end_ns - duration_ns
            if parent is not None:
                start_ns = max(start_ns, parent.start_ns)
            key = f"{path}/#{event.get('ordinal', 0)}"
            error = event.get("error")
            failed = str(error.get("type") or "Error") if isinstance(error, Mapping) else None
            agent = self._agent.get(path)
            if kind == "llm":
                attrs, model = llm_attributes(request, result if failed is None else None)
                span = self._plan(
                    key,
                    under,
                    f"chat {model}" if model else "chat",
                    KIND_CLIENT,
                    "chat",
                    start_ns,
                    path,
                    event.get("seq"),
                )
            else:
                attrs, tool, tool_failed = tool_attributes(
                    request,
                    result if failed is None else None,
                    capture=self.options.capture_tool_content,
                    redact=self._redact,
                )
                failed = failed or tool_failed
                span = self._plan(
                    key,
                    under,
                    f"execute_tool {tool}" if tool else "execute_tool",
                    KIND_INTERNAL,
                    "tool",
                    start_ns,
                    path,
                    event.get("seq"),
                )
            span.attributes.update(attrs)
            if kind == "llm":
                span.usage = {f: attrs[a] for f, a in USAGE if a in attrs}
            span.agent = agent
            if agent:
                span.attributes[GEN_AI_AGENT_NAME] = agent
            self.sink.start(span)
            if kind == "llm" and failed is None:
                self._add_usage(span)
            self._end(span, end_ns, failed)

    def message(self, event: Mapping[str, Any]) -> None:
        """A ``message`` event: Contract Net messages are counted on their round's span."""
        if event.get("protocol") != CONTRACT_NET_PROTOCOL:
            return
        with self._lock:
            key = self._under.get(str(event.get("span", "")))
            span = self._open.get(key) if key is not None else None
            if span is None or span.role != "contract_net":
                return
            performative = str(event.get("performative") or "")
            counter = {
                "CFP": "cfps",
                "BID": "bids",
                "AWARD": "awards",
                "REJECT": "rejects",
                "REPORT": "reports",
            }.get(performative)
            if counter is not None:
                span.contract[counter] += 1
            if performative == "CFP" and event.get("conversation_id"):
                span.contract["task_id"] = str(event["conversation_id"])
            receivers = event.get("receivers") or []
            if performative == "AWARD" and receivers:
                span.contract["winner"] = str(receivers[0])

    def own_key(self, path: str) -> str | None:
        """The key of the span a RAR span path became, while it is open (None: none)."""
        with self._lock:
            return self._own.get(path)

    # --- helpers -------------------------------------------------------------------------------

    def _plan(
        self,
        key: str,
        parent: str | None,
        name: str,
        kind: int,
        role: str,
        start_ns: int,
        path: str,
        seq: Any,
    ) -> PlannedSpan:
        if key in self._used:  # the same path opened again (a resumed run): a new identity
            key = f"{key}/#s{seq}"
        self._used.add(key)
        span = PlannedSpan(
            key=key, parent=parent, name=name, kind=kind, role=role, start_ns=start_ns
        )
        span.attributes.update(self._base)
        span.attributes[RAR_SPAN] = path
        if isinstance(seq, int):
            span.attributes[RAR_SEQ] = seq
        self._open[key] = span
        return span

    def _add_usage(self, chat: PlannedSpan) -> None:
        key = chat.parent
        while key is not None:
            span = self._open.get(key)
            if span is None:
                break
            if span.role == "agent":
                for name, value in chat.usage.items():
                    span.usage[name] = span.usage.get(name, 0) + value
            key = span.parent

    def _end(self, span: PlannedSpan, end_ns: int, failed: str | None) -> None:
        self._open.pop(span.key, None)
        span.end_ns = max(end_ns, span.start_ns)
        if failed:
            span.error_type = failed
            span.add(ERROR_TYPE, failed)
        if span.role == "agent" and span.usage:
            for field_name, attribute in USAGE:
                if field_name in span.usage:
                    span.add(attribute, span.usage[field_name])
        if span.role == "contract_net":
            for name, value in span.contract.items():
                span.add(RAR_CONTRACT_NET + name, value)
        self.sink.end(span)


# --- reading requests and results --------------------------------------------------------------


def llm_attributes(request: Mapping[str, Any], result: Any) -> tuple[dict[str, Any], str]:
    """The chat span's attributes from an ``llm`` effect's request and result (or None when it
    failed), and the request's model. Reads names and numbers only, never messages."""
    attrs: dict[str, Any] = {GEN_AI_OPERATION_NAME: "chat"}
    inner = request.get("request")
    inner = inner if isinstance(inner, Mapping) else {}
    provider = request.get("provider")
    if isinstance(provider, str) and provider:
        attrs[GEN_AI_PROVIDER_NAME] = PROVIDERS.get(provider, provider)
    model = inner.get("model") or request.get("model")  # (an SDK call RAR could not lift)
    model = model if isinstance(model, str) else ""
    if model:
        attrs[GEN_AI_REQUEST_MODEL] = model
    for key, attribute in (
        ("temperature", GEN_AI_REQUEST_TEMPERATURE),
        ("top_p", GEN_AI_REQUEST_TOP_P),
        ("max_tokens", GEN_AI_REQUEST_MAX_TOKENS),
        ("seed", GEN_AI_REQUEST_SEED),
    ):
        value = inner.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attrs[attribute] = value
    base_url = request.get("base_url")
    if isinstance(base_url, str) and base_url:
        try:
            parts = urlsplit(base_url)
            if parts.hostname:
                attrs[SERVER_ADDRESS] = parts.hostname
                if parts.port:
                    attrs[SERVER_PORT] = parts.port
        except ValueError:
            pass
    if isinstance(result, Mapping):
        response = result.get("response")
        response = response if isinstance(response, Mapping) else {}
        served = result.get("served_by")
        served = served if isinstance(served, Mapping) else {}
        answered = response.get("model") or served.get("model")
        if isinstance(answered, str) and answered:
            attrs[GEN_AI_RESPONSE_MODEL] = answered
        attrs[GEN_AI_RESPONSE_FINISH_REASONS] = [str(response.get("finish_reason") or "stop")]
        usage = response.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        for field_name, attribute in USAGE:
            value = usage.get(field_name, 0)
            attrs[attribute] = int(value) if isinstance(value, int | float) else 0
        if result.get("cached"):
            attrs[RAR_CACHED] = True
    return attrs, model


def tool_attributes(
    request: Mapping[str, Any],
    result: Any,
    *,
    capture: bool,
    redact: Callable[[Any], Any] = lambda value: value,
) -> tuple[dict[str, Any], str, str | None]:
    """The execute_tool span's attributes, the tool's name and the error type of a failed call
    (a tool failure is a value in RAR: ``{"ok": false, "error": {"type", ...}}``)."""
    name = request.get("name")
    name = name if isinstance(name, str) else ""
    attrs: dict[str, Any] = {GEN_AI_OPERATION_NAME: "execute_tool", GEN_AI_TOOL_TYPE: "function"}
    if name:
        attrs[GEN_AI_TOOL_NAME] = name
    call_id = request.get("call_id")
    if isinstance(call_id, str) and call_id:
        attrs[GEN_AI_TOOL_CALL_ID] = call_id
    failed: str | None = None
    if isinstance(result, Mapping):
        error = result.get("error")
        if (result.get("ok") is False or result.get("status") == "error") and error:
            failed = str(error.get("type") or "Error") if isinstance(error, Mapping) else "Error"
    if capture:
        if "args" in request:  # a live request is not redacted yet; a recorded one is
            attrs[GEN_AI_TOOL_CALL_ARGUMENTS] = _json_text(redact(request.get("args")))
        if result is not None:
            attrs[GEN_AI_TOOL_CALL_RESULT] = _json_text(result)
    return attrs, name, failed


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(value)


def attribute_value(value: Any) -> Any:
    """``value`` as an OpenTelemetry attribute value (str, bool, int, float, or a list of one of
    them), or None when it is none of these (dicts, None, mixed lists are left out)."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple) and value:
        kinds = {type(item) for item in value}
        if len(kinds) == 1 and kinds.pop() in (str, bool, int, float):
            return list(value)
    return None


def check_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """User attributes for every span, refused (ValueError) when OpenTelemetry cannot hold one."""
    checked: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"attribute names are non-empty strings, not {key!r}")
        plain = attribute_value(value)
        if plain is None:
            raise ValueError(
                f"attribute {key!r}: {value!r} is not a string, bool, int, float or a "
                "non-empty list of one of these"
            )
        checked[key] = plain
    return checked


def linked_payload(ref: Mapping[str, Any], get_blob: Callable[[str], bytes]) -> Any:
    """A payload reference's value in its linked form: message lists stay ``{"$chain", ...}``
    digests, so reading a model request never reads its messages."""
    from rar.hashing import Canonical, from_canonical

    if "value" in ref:
        value = ref["value"]
        return from_canonical(value.data) if isinstance(value, Canonical) else value
    digest = ref.get("digest")
    if not isinstance(digest, str):
        return None
    return from_canonical(get_blob(digest))
