"""Wire mapping of the Gemini provider: requests to ``generateContent`` JSON and answers back.

Pure functions (no HTTP) shared by the sync, async and streaming paths of
:class:`rar.llm.providers.gemini.Gemini`, so each path maps exactly the same way.
"""

from __future__ import annotations

import re
from typing import Any

import httpx2
import orjson

from rar.errors import (
    BadRequestError,
    ConfigError,
    MalformedResponseError,
    ProviderError,
    StreamInterruptedError,
)
from rar.llm.providers._http import expect, raise_for_status
from rar.llm.types import FinishReason, Request, Response, StreamChunk, ToolCall, ToolSpec, Usage

PROVIDER = "gemini"

#: Google's documented stand-in for a thought signature RAR did not keep (Gemini 3 and later
#: reject replayed function calls without one).
SKIP_SIGNATURE = "skip_thought_signature_validator"

THINKING_BUDGETS = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}

# fmt: off
_FILTERED = [
    "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR",
]
#: The keys of Gemini's ``Schema`` (an OpenAPI 3.0 subset) that RAR passes on.
_SCHEMA_KEYS = frozenset([
    "type", "format", "description", "nullable", "enum", "items", "properties", "required",
    "minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "minimum", "maximum", "anyOf", "propertyOrdering", "default", "example",
])
# fmt: on
_FINISH = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    **dict.fromkeys(_FILTERED, FinishReason.CONTENT_FILTER),
}
_TOOL_CHOICE = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
_FORMATS = frozenset({"date-time", "enum", "int32", "int64", "float", "double"})
_MAX_REF_DEPTH = 8


def model_major(model: str) -> int | None:
    """The generation number in a model id (``gemini-2.5-flash`` → 2), if it has one."""
    match = re.search(r"gemini-(\d+)", model)
    return int(match.group(1)) if match else None


def model_path(model: str) -> str:
    """``models/<id>`` (or a tuned model's own path) for the URL."""
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


# --- request ---------------------------------------------------------------------------------


def build_body(request: Request) -> dict[str, Any]:
    """The ``generateContent`` JSON body for ``request``."""
    body: dict[str, Any] = {"contents": _contents(request)}
    system = [{"text": m.content} for m in request.messages if m.role == "system" and m.content]
    if system:
        body["systemInstruction"] = {"parts": system}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        if request.tool_choice:
            body["toolConfig"] = {"functionCallingConfig": _tool_choice(request)}
    config = _generation_config(request)
    if config:
        body["generationConfig"] = config
    return body


def _contents(request: Request) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    signed = (model_major(request.model) or 3) >= 3
    previous_tool = False
    for message in request.messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            name = message.name or names.get(message.tool_call_id or "")
            if not name:
                raise BadRequestError(
                    f"a tool result (call id {message.tool_call_id!r}) names no tool and answers "
                    "no earlier call; Gemini needs the function name",
                    provider=PROVIDER,
                )
            text = message.content or ""
            result = {"error": text} if message.is_error else _as_object(text)
            answer: dict[str, Any] = {"name": name, "response": result}
            if message.tool_call_id and not _generated_id(message.tool_call_id, name):
                answer["id"] = message.tool_call_id  # pairs the result with the model's call
            part: dict[str, Any] = {"functionResponse": answer}
            if previous_tool:
                contents[-1]["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
            previous_tool = True
            continue
        previous_tool = False
        if message.role == "user":
            contents.append({"role": "user", "parts": [{"text": message.content or ""}]})
            continue
        parts: list[dict[str, Any]] = [{"text": message.content}] if message.content else []
        for index, call in enumerate(message.tool_calls):
            try:
                args = call.parsed_arguments()
            except ValueError as exc:
                raise BadRequestError(
                    f"an assistant message holds invalid tool arguments: {exc}", provider=PROVIDER
                ) from None
            function: dict[str, Any] = {"name": call.name, "args": args}
            if not _generated_id(call.id, call.name):
                function["id"] = call.id
            call_part: dict[str, Any] = {"functionCall": function}
            if signed and index == 0:
                call_part["thoughtSignature"] = SKIP_SIGNATURE
            parts.append(call_part)
            names[call.id] = call.name
        if parts:
            contents.append({"role": "model", "parts": parts})
    return contents


def _as_object(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    return value if isinstance(value, dict) else {"content": text}


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name}
    if tool.description:
        declaration["description"] = tool.description
    parameters = sanitize_schema(tool.parameters)
    if parameters.get("properties") or parameters.get("type") not in ("object", None):
        declaration["parameters"] = parameters
    return declaration


def _tool_choice(request: Request) -> dict[str, Any]:
    choice = request.tool_choice or "auto"
    if choice in _TOOL_CHOICE:
        return {"mode": _TOOL_CHOICE[choice]}
    if choice not in {t.name for t in request.tools}:
        raise ConfigError(f"tool_choice names {choice!r}, which is not one of the request's tools")
    return {"mode": "ANY", "allowedFunctionNames": [choice]}


def _generation_config(request: Request) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, value in (
        ("temperature", request.temperature),
        ("topP", request.top_p),
        ("maxOutputTokens", request.max_tokens),
        ("seed", request.seed),
    ):
        if value is not None:
            config[key] = value
    if request.stop:
        config["stopSequences"] = list(request.stop)
    fmt = request.response_format
    if fmt is not None and fmt.type != "text":
        config["responseMimeType"] = "application/json"
        if fmt.type == "json_schema" and fmt.json_schema:
            config["responseSchema"] = sanitize_schema(fmt.json_schema)
    if request.reasoning_effort:
        effort = request.reasoning_effort
        if (model_major(request.model) or 0) >= 3:
            config["thinkingConfig"] = {"thinkingLevel": effort, "includeThoughts": True}
        else:
            budget = THINKING_BUDGETS[effort]
            config["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": True}
    return config


def sanitize_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema reduced to the OpenAPI subset Gemini accepts.

    Local ``$ref``s are inlined, ``oneOf`` becomes ``anyOf``, ``const`` a one-value enum,
    ``["x", "null"]`` types and ``anyOf [.., {type: null}]`` become ``nullable``; keys Gemini
    rejects (``additionalProperties``, ``$schema``, ``title``, unknown formats, ...) are dropped.
    """
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    return _sanitize(schema, defs, 0)


def _sanitize(node: Any, defs: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        if target is None or depth >= _MAX_REF_DEPTH:
            return {"type": "object"}
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        depth += 1
    if "allOf" in node and isinstance(node["allOf"], list):
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        for member in node["allOf"]:
            merged.update(_sanitize(member, defs, depth))
        node = merged
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) < len(kind):
            out["nullable"] = True
        kind = kinds[0] if kinds else None
    if isinstance(kind, str):
        out["type"] = kind
    if "const" in node and isinstance(node["const"], str):
        out["enum"] = [node["const"]]
    variants = node.get("anyOf", node.get("oneOf"))
    if isinstance(variants, list):
        real = [v for v in variants if not (isinstance(v, dict) and v.get("type") == "null")]
        if len(real) < len(variants):
            out["nullable"] = True
        if len(real) == 1:
            out = {**_sanitize(real[0], defs, depth), **out}
        elif real:
            out["anyOf"] = [_sanitize(v, defs, depth) for v in real]
    for key, value in node.items():
        if key not in _SCHEMA_KEYS or key in ("type", "anyOf"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _sanitize(sub, defs, depth) for name, sub in value.items()}
        elif key == "items":
            first = value[0] if isinstance(value, list) and value else value
            out[key] = _sanitize(first, defs, depth)
        elif key == "enum":
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                out[key] = value
        elif key == "format":
            if value in _FORMATS:
                out[key] = value
        else:
            out[key] = value
    if isinstance(out.get("required"), list) and isinstance(out.get("properties"), dict):
        out["required"] = [r for r in out["required"] if r in out["properties"]]
    return out


# --- answers -----------------------------------------------------------------------------------


def _expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    return expect(value, kind, what, PROVIDER)


def parse_response(data: dict[str, Any], *, model: str) -> Response:
    """A ``GenerateContentResponse`` JSON object as a :class:`Response`."""
    candidates = data.get("candidates")
    if not candidates:
        raise_blocked(data)
        raise MalformedResponseError("the answer has no candidates", provider=PROVIDER)
    candidate = candidates[0] if isinstance(candidates, list) else None
    if not isinstance(candidate, dict):
        raise MalformedResponseError("the first candidate is not an object", provider=PROVIDER)
    content = candidate.get("content") or {}
    parts = content.get("parts") or [] if isinstance(content, dict) else None
    if not isinstance(parts, list):
        raise MalformedResponseError("the candidate's content has no parts list", provider=PROVIDER)
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise MalformedResponseError("a content part is not an object", provider=PROVIDER)
        piece = _expect(part.get("text"), str, f"the text of content part {i}")
        if "functionCall" in part:
            calls.append(_tool_call(part["functionCall"], len(calls)))
        elif piece is not None:
            (thoughts if part.get("thought") else texts).append(piece)
    reason = candidate.get("finishReason")
    if calls and reason in (None, "STOP", "FINISH_REASON_UNSPECIFIED"):
        finish = FinishReason.TOOL_CALLS
    else:
        default = FinishReason.STOP if reason is None else FinishReason.OTHER
        finish = _FINISH.get(str(reason), default)
    return Response(
        content="".join(texts) or None,
        tool_calls=tuple(calls),
        reasoning="".join(thoughts) or None,
        finish_reason=finish,
        usage=_usage(data.get("usageMetadata")),
        model=str(data.get("modelVersion") or model),
        provider=PROVIDER,
    )


def raise_blocked(data: dict[str, Any]) -> None:
    """Raise a clear error when the prompt was blocked (no candidates, a block reason)."""
    feedback = data.get("promptFeedback")
    reason = feedback.get("blockReason") if isinstance(feedback, dict) else None
    if reason:
        detail = feedback.get("blockReasonMessage") if isinstance(feedback, dict) else None
        raise BadRequestError(
            f"the prompt was blocked ({reason}){f': {detail}' if detail else ''}; nothing was "
            "generated. Change the prompt (or the safety settings) and try again",
            provider=PROVIDER,
        )


def _tool_call(call: Any, index: int) -> ToolCall:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise MalformedResponseError("a functionCall part has no name", provider=PROVIDER)
    args = call.get("args") or {}
    if not isinstance(args, dict):
        raise MalformedResponseError("a functionCall's args is not an object", provider=PROVIDER)
    name = call["name"]
    arguments = orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode()
    given = call.get("id")
    call_id = given if isinstance(given, str) and given else generated_id(name, index)
    return ToolCall(id=call_id, name=name, arguments=arguments)


def generated_id(name: str, index: int) -> str:
    """The id RAR gives a ``functionCall`` that came without one: deterministic (the name and
    the call's position in the answer), so a replay matches it."""
    return f"call_{name}_{index}"


def _generated_id(call_id: str, name: str) -> bool:
    """Whether ``call_id`` is one RAR made up (:func:`generated_id`), never sent to Gemini."""
    prefix = f"call_{name}_"
    return call_id.startswith(prefix) and call_id[len(prefix) :].isdigit()


def _usage(meta: Any) -> Usage:
    if not isinstance(meta, dict):
        return Usage()

    def count(key: str) -> int:
        value = meta.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    thoughts = count("thoughtsTokenCount")
    return Usage(
        input_tokens=count("promptTokenCount"),
        cached_input_tokens=count("cachedContentTokenCount"),
        output_tokens=count("candidatesTokenCount") + thoughts,
        reasoning_tokens=thoughts,
    )


class StreamAssembler:
    """Builds the answer from ``streamGenerateContent`` chunks and yields their text pieces."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.parts: list[dict[str, Any]] = []
        self.finish: str | None = None
        self.usage: Any = None
        self.model_version: Any = None

    def feed(self, text: str) -> list[StreamChunk]:
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise MalformedResponseError(
                f"a streamed chunk is not JSON ({exc}): {text[:200]!r}", provider=PROVIDER
            ) from exc
        if not isinstance(data, dict):
            raise MalformedResponseError("a streamed chunk is not an object", provider=PROVIDER)
        if "error" in data:
            error = data["error"] if isinstance(data["error"], dict) else {}
            code = error.get("code")
            status = code if isinstance(code, int) else 500
            raise_for_status(httpx2.Response(status, content=text.encode()), provider=PROVIDER)
            raise ProviderError(str(error), provider=PROVIDER)
        self.usage = data.get("usageMetadata") or self.usage
        self.model_version = data.get("modelVersion") or self.model_version
        candidates = data.get("candidates")
        if not candidates:
            raise_blocked(data)
            return []
        candidate = candidates[0] if isinstance(candidates, list) else None
        if not isinstance(candidate, dict):
            raise MalformedResponseError("a streamed candidate is not an object", provider=PROVIDER)
        chunks: list[StreamChunk] = []
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for i, part in enumerate(parts if isinstance(parts, list) else []):
            if not isinstance(part, dict):
                raise MalformedResponseError("a content part is not an object", provider=PROVIDER)
            piece = _expect(part.get("text"), str, f"the text of streamed content part {i}")
            if "functionCall" in part or not isinstance(piece, str):
                self.parts.append(part)
                continue
            thought = bool(part.get("thought"))
            last = self.parts[-1] if self.parts else None
            if (
                last is not None
                and "functionCall" not in last
                and isinstance(last.get("text"), str)
                and bool(last.get("thought")) == thought
            ):
                last["text"] += piece
            else:
                self.parts.append({"text": piece, "thought": thought})
            if piece:
                chunks.append(StreamChunk(kind="reasoning" if thought else "content", text=piece))
        self.finish = candidate.get("finishReason") or self.finish
        return chunks

    def response(self) -> Response:
        if self.finish is None:
            raise StreamInterruptedError(
                "the stream ended before the model finished (no finishReason)", provider=PROVIDER
            )
        data: dict[str, Any] = {
            "candidates": [{"content": {"parts": self.parts}, "finishReason": self.finish}],
            "usageMetadata": self.usage,
            "modelVersion": self.model_version,
        }
        return parse_response(data, model=self.model)
