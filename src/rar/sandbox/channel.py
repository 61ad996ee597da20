"""The parent's end of the worker's pipes: length-prefixed JSON, read with a cap and a deadline."""

from __future__ import annotations

import json
import os
import select
import struct
import time
from collections.abc import Callable
from typing import Any

HEADER = struct.Struct(">I")


class ChannelClosed(Exception):
    """The worker closed its end (it died)."""


class ChannelTimeout(Exception):
    """No complete answer before the deadline."""


class ChannelAborted(Exception):
    """The ``tick`` callback asked to stop waiting (its reason is the message)."""


class ProtocolError(Exception):
    """The worker sent something that is not a frame (too large, not JSON, not an object)."""


class Channel:
    def __init__(self, write_fd: int, read_fd: int, max_frame: int) -> None:
        self.write_fd = write_fd
        self.read_fd = read_fd
        self.max_frame = max_frame
        os.set_blocking(read_fd, False)
        self._poll = select.poll()
        self._poll.register(read_fd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
        view = memoryview(HEADER.pack(len(data)) + data)
        try:
            while view:
                view = view[os.write(self.write_fd, view) :]
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ChannelClosed("the worker is gone") from exc

    def receive(
        self,
        deadline: float | None,
        tick: Callable[[], str | None] | None = None,
        tick_every: float = 1.0,
    ) -> dict[str, Any]:
        """The next frame. ``tick`` runs every ``tick_every`` seconds while waiting; a string it
        returns aborts the wait with :class:`ChannelAborted`."""
        header = self._read(HEADER.size, deadline, tick, tick_every)
        (size,) = HEADER.unpack(header)
        if size > self.max_frame:
            raise ProtocolError(f"the worker sent a frame of {size} bytes (cap {self.max_frame})")
        body = self._read(size, deadline, tick, tick_every)
        try:
            message = json.loads(body)
        except ValueError as exc:
            raise ProtocolError(f"the worker sent a frame that is not JSON: {exc}") from exc
        if not isinstance(message, dict):
            raise ProtocolError("the worker sent a frame that is not a JSON object")
        return message

    def _read(
        self,
        size: int,
        deadline: float | None,
        tick: Callable[[], str | None] | None,
        tick_every: float,
    ) -> bytes:
        parts: list[bytes] = []
        next_tick = time.monotonic() + tick_every
        while size:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise ChannelTimeout()
            if tick is not None and now >= next_tick:
                reason = tick()
                if reason is not None:
                    raise ChannelAborted(reason)
                next_tick = now + tick_every
            wait = next_tick - now if tick is not None else None
            if deadline is not None:
                wait = min(wait, deadline - now) if wait is not None else deadline - now
            timeout_ms = None if wait is None else max(0, int(wait * 1000) + 1)
            if not self._poll.poll(timeout_ms):
                continue
            try:
                chunk = os.read(self.read_fd, min(size, 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise ChannelClosed("the worker closed its end")
            parts.append(chunk)
            size -= len(chunk)
        return b"".join(parts)
