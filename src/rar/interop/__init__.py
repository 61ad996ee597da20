"""Interop: RAR's record and the tools around it.

Recording what RAR did not write:

* :class:`RecordingTransport` / :class:`AsyncRecordingTransport` — httpx2 transports that make
  every call of the official ``openai``, ``anthropic`` and ``google-genai`` SDKs an effect of a
  run (an ``llm`` effect for model calls, ``http`` for the rest), served again byte for byte in
  a replay; :func:`http_client` and :func:`async_http_client` wrap them in httpx2 clients.
* ``rar proxy`` (:mod:`rar.interop.proxy`) — an OpenAI-compatible server on loopback that does
  the same for any process that honours ``OPENAI_BASE_URL``.

Nothing here is imported by ``import rar``; the names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rar.interop.transport import (
        AsyncRecordingTransport,
        RecordingTransport,
        async_http_client,
        http_client,
    )

_EXPORTS = {
    "AsyncRecordingTransport": "rar.interop.transport",
    "RecordingTransport": "rar.interop.transport",
    "async_http_client": "rar.interop.transport",
    "http_client": "rar.interop.transport",
}

__all__ = ["AsyncRecordingTransport", "RecordingTransport", "async_http_client", "http_client"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rar.interop' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
