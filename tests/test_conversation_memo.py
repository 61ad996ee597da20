"""``ConversationMemo``: a growing conversation's message parts are extended, never wrong."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from rar.hashing import canonical
from rar.llm import types as types_module
from rar.llm.types import ConversationMemo, Message, Request, ToolCall


def _request(messages: list[Message]) -> Request:
    return Request(model="m", messages=tuple(messages), temperature=0.2)


def _same_bytes(memo: ConversationMemo, request: Request) -> None:
    assert canonical(request.payload(memo)) == canonical(request.payload())


def test_a_growing_conversation_reuses_the_parts_it_has(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_at: list[int] = []
    real = types_module._CANONICAL

    def counting(messages: Any) -> Any:
        looked_at.append(1)
        return real(messages)

    monkeypatch.setattr(types_module, "_CANONICAL", counting)
    memo = ConversationMemo()
    history = [Message.system("be brief"), Message.user("hi")]
    for i in range(30):
        request = _request(history)
        parts = request.payload(memo)["messages"]
        assert parts == request.payload()["messages"]
        assert len(parts) == len(history)
        history.append(Message.assistant(f"answer {i}"))
        history.append(Message.user(f"question {i}"))
    # with the memo, each call looked only at its new messages (2 + 29 × 2); without it
    # (payload() above, the reference), at every message of every call
    with_memo = 2 + 29 * 2
    without = sum(2 + 2 * i for i in range(30))
    assert len(looked_at) == with_memo + without
    # the memo's parts are its own: changing a returned list changes no later payload
    request = _request(history)
    request.payload(memo)["messages"].clear()
    _same_bytes(memo, _request([*history, Message.user("more")]))


def test_another_conversation_an_edit_or_a_shorter_one_is_listed_afresh() -> None:
    memo = ConversationMemo()
    base = [Message.system("s"), Message.user("one"), Message.assistant("two")]
    _same_bytes(memo, _request(base))
    # an earlier message replaced by another object with other content
    edited = [base[0], Message.user("ONE"), base[2], Message.user("three")]
    _same_bytes(memo, _request(edited))
    # shorter than the last one
    _same_bytes(memo, _request(base[:2]))
    # a different conversation altogether
    _same_bytes(memo, _request([Message.user("else")]))
    # equal but distinct messages (rebuilt from the same fields) give the same parts
    rebuilt = [Message.model_validate(m.model_dump()) for m in base]
    _same_bytes(memo, _request([*rebuilt, Message.user("four")]))
    # tool calls and tool results
    call = ToolCall(id="c1", name="calc", arguments='{"x": 1}')
    tools = [*base, Message.assistant(tool_calls=(call,))]
    _same_bytes(memo, _request(tools))
    _same_bytes(memo, _request([*tools, Message(role="tool", content="2", tool_call_id="c1")]))


def test_threads_sharing_one_memo_get_their_own_conversation() -> None:
    memo = ConversationMemo()
    failures: list[str] = []

    def talk(name: str) -> None:
        history = [Message.user(f"{name} starts")]
        for i in range(200):
            request = _request(history)
            if request.payload(memo)["messages"] != request.payload()["messages"]:
                failures.append(f"{name} step {i}")
            history.append(Message.assistant(f"{name} {i}"))

    threads = [threading.Thread(target=talk, args=(f"t{k}",)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
