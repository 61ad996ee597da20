"""A streamed answer passed on as it arrives, and recorded when it ends.

The bytes are cut into Server-Sent Events; each event passes the run's redactor and goes on at
once, except the end of the answer: from the event that finishes it (OpenAI's ``[DONE]`` or
``finish_reason``, Anthropic's ``message_delta``/``message_stop``, Gemini's ``finishReason``,
a Responses API ``response.completed``) everything is held back until the upstream body has
ended and the effect is durably recorded. So a consumer never sees a whole answer the record
does not hold, and what it sees is exactly the recorded bytes.

An upstream body that breaks, or ends before the answer's end marker, is recorded with the
bytes that came and why it was cut (``interrupted``); the consumer gets those bytes and then a
transport error, and a replay does exactly the same. Such an answer is never cached.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import httpx2
import orjson

from rar.interop import _answers

if TYPE_CHECKING:
    from rar.interop._calls import Call, StreamKind
    from rar.redaction import Redactor
    from rar.runtime.pending import PendingEffect

#: The most one streamed answer may hold (as RAR's providers allow).
MAX_STREAM_BYTES = 64 * 1024 * 1024
_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class TooLarge(Exception):
    """The streamed answer passed :data:`MAX_STREAM_BYTES`."""


def _fields(event: bytes) -> tuple[str | None, str | None]:
    """(event name, data) of one event's bytes; data None when it has no data line."""
    name: str | None = None
    data: list[str] = []
    for line in event.decode("utf-8", "replace").splitlines():
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    return name, ("\n".join(data) if data else None)


class StreamWatch:
    """Follows the events of one answer: where its end begins, whether it ended properly."""

    def __init__(self, kind: StreamKind) -> None:
        self.kind = kind
        self.ending = False  # the end of the answer has begun: hold everything back
        self.complete = False  # the answer ended properly (its end marker, or an error event)
        self._finished = False

    def see(self, event: bytes) -> bool:
        """Take in one event; True when it belongs to the end of the answer."""
        name, data = _fields(event)
        if data is None:
            return self.ending
        if self.kind == "openai" and data.strip() == "[DONE]":
            self.ending = self.complete = True
            return True
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            return self.ending
        if isinstance(value, dict):
            self._judge(name, value)
        return self.ending

    def _judge(self, name: str | None, value: dict[str, Any]) -> None:
        kind = value.get("type") or name
        if "error" in value or kind == "error":
            self.ending = self.complete = True  # the upstream's own answer, recorded as is
        elif self.kind == "openai":
            choices = value.get("choices")
            if isinstance(choices, list) and any(
                isinstance(c, dict) and c.get("finish_reason") for c in choices
            ):
                self.ending = self._finished = True
        elif self.kind == "openai-responses":
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                self.ending = self.complete = True
        elif self.kind == "anthropic":
            if kind == "message_delta":
                self.ending = True
            elif kind == "message_stop":
                self.ending = self.complete = True
        elif self.kind == "gemini":
            candidates = value.get("candidates")
            if (
                isinstance(candidates, list)
                and candidates
                and isinstance(candidates[0], dict)
                and candidates[0].get("finishReason")
            ):
                self.ending = self.complete = True

    def ended_properly(self) -> bool:
        # an OpenAI-compatible server that sends finish_reason but no [DONE] ends properly too
        return self.complete or self._finished


class StreamRecorder:
    """The state of one streamed answer between its upstream and its consumer.

    The sync and async transports drive it: :meth:`feed` each upstream chunk (returns what to
    pass on now), then :meth:`end` (records; returns the held-back end), or :meth:`broken`
    when the upstream failed, or :meth:`closed_early` when the consumer stopped reading.
    """

    def __init__(
        self,
        call: Call,
        effect: PendingEffect,
        status: int,
        headers: list[list[str]],
        redactor: Redactor,
        on_recorded: Any,
    ) -> None:
        assert call.stream is not None
        self.call = call
        self.effect = effect
        self.status = status
        self.headers = headers
        self._redactor = redactor
        self._on_recorded = on_recorded
        self.watch = StreamWatch(call.stream)
        self._buffer = b""
        self._passed: list[bytes] = []  # events passed on to the consumer
        self._held: list[bytes] = []  # events of the end, held back
        self._size = 0
        self.settled = False

    def _redact(self, event: bytes) -> bytes:
        try:
            text = event.decode("utf-8")
        except UnicodeDecodeError:
            return event  # not text: recorded as its bytes (latin-1), as it came
        redacted = self._redactor.redact_text(text)
        return event if redacted is text else redacted.encode("utf-8")

    def _take(self, event: bytes, out: list[bytes]) -> None:
        event = self._redact(event)
        self._size += len(event)
        ending = self.watch.see(event)  # every event is seen: the end marker may come later
        if self._held or ending:
            self._held.append(event)
        else:
            self._passed.append(event)
            out.append(event)

    def feed(self, chunk: bytes) -> list[bytes]:
        out: list[bytes] = []
        buffer = self._buffer + chunk
        start = 0
        for match in _BOUNDARY.finditer(buffer):
            self._take(buffer[start : match.end()], out)
            start = match.end()
        self._buffer = buffer[start:]
        if self._size + len(self._buffer) > MAX_STREAM_BYTES:
            raise TooLarge(
                f"the streamed answer passed {MAX_STREAM_BYTES // (1024 * 1024)} MiB; "
                "RAR stopped reading it"
            )
        return out

    def end(self) -> tuple[list[bytes], httpx2.TransportError | None]:
        """The upstream body ended: record the answer; return the held-back events and the
        error to raise after them (an answer that ended before its end marker)."""
        if self._buffer:  # a last event without its blank line: passed on as it came
            self._held.append(self._redact(self._buffer))
            self._buffer = b""
        interrupted = None
        if not self.watch.ended_properly():
            interrupted = (
                "RemoteProtocolError",
                "the upstream stream ended before the answer's end marker; RAR recorded the "
                "bytes that came and did not cache them",
            )
        return self._settle(interrupted, closed=False)

    def broken(self, exc: BaseException) -> tuple[list[bytes], httpx2.TransportError]:
        """The upstream failed while streaming: record what came and why."""
        if self._buffer:
            self._held.append(self._redact(self._buffer))
            self._buffer = b""
        error_type = type(exc).__name__ if isinstance(exc, httpx2.TransportError) else ""
        reason = (
            f"the upstream stream broke ({type(exc).__name__}: {exc}); RAR recorded the bytes "
            "that came and did not cache them"
        )
        held, error = self._settle((error_type or "RemoteProtocolError", reason), closed=False)
        assert error is not None
        return held, error

    def closed_early(self) -> None:
        """The consumer stopped reading: record what it was given (never cached)."""
        if not self.settled:
            self._held.clear()
            self._settle(None, closed=True)

    def _settle(
        self, interrupted: tuple[str, str] | None, *, closed: bool
    ) -> tuple[list[bytes], httpx2.TransportError | None]:
        if self.settled:
            return [], None
        self.settled = True
        pieces = self._passed + self._held
        body = b"".join(pieces)
        result = _answers.result_of(
            self.call,
            self.status,
            self.headers,
            body,
            streamed=True,
            interrupted=interrupted,
            closed=closed,
        )
        recorded = self.effect.finish(result)
        self._on_recorded(self.call, self.effect, recorded, body)
        error = None
        if interrupted is not None:
            error = _answers.transport_error(*interrupted)
        return list(self._held), error
