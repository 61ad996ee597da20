"""A ``rar proxy`` session served in a background thread, for tests."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any, Self

from rar.interop._server import bind, make_server
from rar.interop.proxy import Proxy, ProxySummary
from rar.store.store import Store


class ProxyThread:
    """``with ProxyThread(store, mode=..., upstream=...) as proxy:`` serves on a free port;
    leaving the block stops the server and seals the session's run (:attr:`summary`)."""

    def __init__(
        self,
        store: Store,
        *,
        header_timeout: float = 10.0,
        keep_alive: float = 5.0,
        loop: str = "auto",
        **options: Any,
    ) -> None:
        self.proxy = Proxy(store, **options)
        self.server = make_server(
            self.proxy, header_timeout=header_timeout, keep_alive=keep_alive, loop=loop
        )
        self._socket: socket.socket = bind("127.0.0.1", 0)
        self.port = self._socket.getsockname()[1]
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self.summary: ProxySummary | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def run_id(self) -> str:
        return self.proxy.run.id

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the proxy did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> ProxySummary:
        if self.summary is None:
            self.server.should_exit = True
            self._thread.join(timeout=20)
            self._socket.close()
            self.summary = self.proxy.close()
        return self.summary

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
