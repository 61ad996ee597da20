"""The provider protocol: one required method, ``complete(request) -> response``.

Optional capabilities are plain methods a provider may also have, found by duck typing:

* ``async acomplete(request) -> Response`` — used by the async client when present (otherwise
  the client runs ``complete`` in a worker thread);
* ``stream(request, on_chunk) -> Response`` — streams content and reasoning chunks to
  ``on_chunk`` as they arrive and returns the assembled response;
* ``name`` (the provider's id, e.g. ``"openai"``) and ``base_url`` — part of the cache key;
* ``template`` — the prompt template of a text-completion provider (a name, or an object with
  a ``name``): it decides the prompt the model sees, so it is part of the cache key too.

Variants such as retrying, caching, recording and rate limiting wrap providers in the client;
they are not subclasses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from rar.llm.types import Request, Response, StreamChunk

ChunkCallback = Callable[[StreamChunk], None]


@runtime_checkable
class Provider(Protocol):
    def complete(self, request: Request) -> Response: ...


def provider_name(provider: object) -> str:
    return str(getattr(provider, "name", type(provider).__name__.lower()))


def provider_base_url(provider: object) -> str | None:
    value = getattr(provider, "base_url", None)
    return str(value) if value else None


def provider_template(provider: object) -> str | None:
    """The name of the provider's prompt template, for text-completion providers."""
    template = getattr(provider, "template", None)
    if template is None or isinstance(template, str):
        return template
    name = getattr(template, "name", None)
    return str(name) if name else None
