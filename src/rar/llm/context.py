"""The context-length check made before a request is sent, and trimming to fit.

A profile with ``max_context_length`` has every request counted before it leaves the client:
its prompt tokens (with the profile's ``token_encoding``, see :mod:`rar.llm.tokens`) plus its
``max_tokens``. A request over the limit is refused with a
:class:`~rar.errors.ContextLengthExceededError` before the effect, so nothing is recorded for
it — unless the profile says ``context_overflow = "trim"``: then the oldest turns are dropped
until it fits, and the trimmed request is the one recorded (and keyed, and replayed).

Trimming keeps every ``system`` message, the last ``user`` message and whatever follows it up to
the newest message (the turn being answered), and drops whole units, oldest first: a message on
its own, or an assistant message with tool calls together with the tool results that answer it
(a call is never separated from its results). Whatever is left before the first kept ``user``
message goes too, so the conversation the model sees still opens with a user turn. When even
the kept messages do not fit, the request is refused as above.
"""

from __future__ import annotations

from collections.abc import Sequence

from rar.errors import ContextLengthExceededError
from rar.llm.profiles import Profile
from rar.llm.tokens import check_encoding, count_message_tokens, count_request_tokens
from rar.llm.types import Message, Request

__all__ = ["fit", "units"]


def fit(request: Request, profile: Profile) -> Request:
    """``request`` when it fits ``profile``'s ``max_context_length`` (or the profile has none);
    else trimmed (``context_overflow = "trim"``) or refused."""
    limit = profile.max_context_length
    if limit is None:
        return request
    encoding = check_encoding(profile.token_encoding)
    budget = request.max_tokens or 0
    prompt = count_request_tokens(request, encoding)
    if prompt + budget <= limit:
        return request

    def refused(tokens: int, trimmed: bool) -> ContextLengthExceededError:
        return ContextLengthExceededError(
            profile=profile.name,
            limit=limit,
            prompt_tokens=tokens,
            max_tokens=budget,
            encoding=encoding,
            trimmed=trimmed,
        )

    if profile.context_overflow != "trim":
        raise refused(prompt, False)
    kept = _trim(request, encoding, limit - budget, prompt)
    if kept is None:
        smallest = request.model_copy(update={"messages": tuple(_protected(request.messages))})
        raise refused(count_request_tokens(smallest, encoding), True)
    return request.model_copy(update={"messages": kept})


def units(messages: Sequence[Message]) -> list[list[int]]:
    """The indexes of ``messages`` grouped into what trimming drops together: an assistant
    message with tool calls and the tool results right after it that answer those calls, or
    else one message."""
    groups: list[list[int]] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        group = [index]
        index += 1
        if message.role == "assistant" and message.tool_calls:
            ids = {call.id for call in message.tool_calls}
            while (
                index < len(messages)
                and messages[index].role == "tool"
                and messages[index].tool_call_id in ids
            ):
                group.append(index)
                index += 1
        groups.append(group)
    return groups


def _last_user(messages: Sequence[Message]) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)


def _kept_always(messages: Sequence[Message]) -> set[int]:
    """System messages, the last user message and the turn after it (never trimmed)."""
    last = _last_user(messages)
    # no user message at all: the newest unit is the turn being answered
    newest = units(messages)[-1][0] if messages else 0
    start = last if last is not None else newest
    system = {i for i, m in enumerate(messages) if m.role == "system"}
    return system | set(range(start, len(messages)))


def _protected(messages: Sequence[Message]) -> list[Message]:
    keep = _kept_always(messages)
    return [m for i, m in enumerate(messages) if i in keep]


def _trim(
    request: Request, encoding: str | None, allowed: int, prompt: int
) -> tuple[Message, ...] | None:
    """The messages left after dropping the oldest units until the prompt is at most
    ``allowed`` tokens; None when the messages that are never dropped are already too many."""
    messages = request.messages
    protected = _kept_always(messages)
    dropped: set[int] = set()
    droppable = [u for u in units(messages) if not protected.intersection(u)]
    for unit in droppable:
        if prompt <= allowed:
            break
        if dropped.issuperset(unit):  # gone already, with the turn it answered
            continue
        dropped.update(unit)
        prompt -= sum(count_message_tokens(messages[i], encoding) for i in unit)
        # what now comes before the first kept user message goes too: a conversation opens
        # with a user turn (an assistant answer to a dropped question is no use alone)
        for later in droppable:
            first = later[0]
            if set(later) <= dropped:
                continue
            if messages[first].role == "user":
                break
            dropped.update(later)
            prompt -= sum(count_message_tokens(messages[i], encoding) for i in later)
    if prompt > allowed:
        return None
    return tuple(m for i, m in enumerate(messages) if i not in dropped)
