"""The scripted model: a real provider that answers from a script, for tests and demos.

``ScriptedModel(["first answer", Message.assistant(tool_calls=[...]), ...])`` answers turn *k*
of a conversation (the number of assistant messages already in the request) with the *k*-th
entry; ``ScriptedModel(function)`` answers with ``function(request)``. Both are stateless: the
answer is a function of the conversation, so the same script replays the same way and a cached
or recorded answer is indistinguishable from a fresh one. Token counts are estimated (about four
characters a token) so that usage and cost accounting have something to add up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from rar.errors import ProviderError
from rar.hashing import digest_value
from rar.llm.types import FinishReason, Message, Request, Response, ToolCall, Usage

Turn = str | Message | Response
Script = Sequence[Turn] | Callable[[Request], Turn]


def tool_call(name: str, call_id: str | None = None, /, **arguments: Any) -> ToolCall:
    """A tool call for a script: ``tool_call("calculator", expression="2+2")``.

    Without ``call_id`` the id is derived from the name and arguments, so a script builds the
    same ids in every process (identical calls within one turn are numbered apart).
    """
    text = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    return ToolCall(
        id=call_id or f"call_{name}_{digest_value([name, text])[7:15]}", name=name, arguments=text
    )


def estimate_tokens(text: str | None) -> int:
    return 0 if not text else max(1, len(text) // 4)


class ScriptedModel:
    """A provider that answers from a list of turns or a function of the request."""

    name = "scripted"
    base_url = None

    def __init__(self, script: Script, *, model: str = "scripted") -> None:
        self.script = script
        self.model = model

    def complete(self, request: Request) -> Response:
        if callable(self.script):
            turn = self.script(request)
        else:
            index = sum(1 for m in request.messages if m.role == "assistant")
            if index >= len(self.script):
                raise ProviderError(
                    f"the script has {len(self.script)} turn(s) and the conversation asks for "
                    f"turn {index + 1}; add turns or end the conversation sooner",
                    provider=self.name,
                )
            turn = self.script[index]
        return self._response(request, turn)

    def _response(self, request: Request, turn: Turn) -> Response:
        turn = _distinct_ids(turn)
        if isinstance(turn, Response):
            base = turn
        elif isinstance(turn, Message):
            base = Response(
                content=turn.content,
                tool_calls=turn.tool_calls,
                reasoning=turn.reasoning,
                finish_reason=FinishReason.TOOL_CALLS if turn.tool_calls else FinishReason.STOP,
            )
        else:
            base = Response(content=str(turn))
        prompt = sum(estimate_tokens(m.content) + 4 for m in request.messages)
        output = estimate_tokens(base.content) + sum(
            estimate_tokens(c.arguments) + 4 for c in base.tool_calls
        )
        usage = (
            base.usage
            if base.usage != Usage()
            else Usage(
                input_tokens=prompt,
                output_tokens=output,
                reasoning_tokens=estimate_tokens(base.reasoning),
            )
        )
        return base.model_copy(
            update={
                "usage": usage,
                "model": base.model or self.model,
                "provider": self.name,
            }
        )


def _distinct_ids(turn: Turn) -> Turn:
    """Number apart identical tool-call ids within one turn (``id``, ``id_2``, ...)."""
    if isinstance(turn, str) or len(turn.tool_calls) < 2:
        return turn
    seen: dict[str, int] = {}
    calls = []
    for call in turn.tool_calls:
        seen[call.id] = seen.get(call.id, 0) + 1
        count = seen[call.id]
        calls.append(call if count == 1 else call.model_copy(update={"id": f"{call.id}_{count}"}))
    return turn.model_copy(update={"tool_calls": tuple(calls)})
