"""Helper for ``bench/proxy.py`` (not a benchmark itself): the server processes it starts and
talks to — ``rar proxy`` as a user starts it, and the pass-through **floor** proxies on the
proxy's own server (``python bench/_proxy_servers.py --floor-server UPSTREAM httpx2|rar``),
each run optionally under cProfile (``--profiled OUT ...``: on with SIGUSR1, written with
SIGUSR2)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _common
import httpx2

HEADERS = {"content-type": "application/json", "authorization": "Bearer dummy"}


# --- the floor: a pass-through proxy recording nothing -------------------------------------------


class _Floor:
    """A pass-through application of the proxy's server: the request upstream, the answer
    back (streamed as it comes), nothing recorded."""

    max_body = 32 * 1024 * 1024
    body_timeout = 60.0

    def __init__(self, upstream: str, client_kind: str) -> None:
        self.upstream = upstream
        self.kind = client_kind
        self.client: Any = None
        self.base = httpx2.URL(upstream).raw_path.rstrip(b"/")
        self.forwarded = [(k.encode(), v.encode()) for k, v in HEADERS.items()]

    async def answer(self, request: Any) -> Any:
        from rar.interop._server import Reply

        path = request.path.removeprefix("/v1")
        if self.kind == "httpx2":
            if self.client is None:
                self.client = httpx2.AsyncClient(timeout=60)
            built = self.client.build_request(
                request.method, self.upstream + path, content=request.body, headers=HEADERS
            )
            answer = await self.client.send(built, stream=True)
            pairs = answer.headers.items()
            pieces, close = answer.aiter_raw(), answer.aclose
        else:
            if self.client is None:
                from rar.interop._upstream import Upstream

                self.client = Upstream(self.upstream)
            answer = await self.client.request(
                request.method, self.base + path.encode(), self.forwarded, request.body
            )
            pairs = answer.headers
            pieces, close = answer.__aiter__(), answer.aclose
        headers = [
            (k.encode(), v.encode())
            for k, v in pairs
            if k not in ("content-length", "transfer-encoding", "connection")
        ]
        kind = next((v for k, v in headers if k == b"content-type"), b"")
        if kind.startswith(b"text/event-stream"):
            return Reply(answer_status(answer), headers, pieces=pieces, aclose=close)
        body = b"".join([piece async for piece in pieces])
        await close()
        return Reply(answer_status(answer), headers, body)

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()


def answer_status(answer: Any) -> int:
    return int(getattr(answer, "status_code", None) or answer.status)


def serve_floor(upstream: str, client_kind: str) -> None:
    from rar.interop._server import bind, make_server

    sock = bind("127.0.0.1", 0)
    server = make_server(_Floor(upstream, client_kind))
    print(f"floor at http://127.0.0.1:{sock.getsockname()[1]}/v1 ", flush=True)
    server.run(sockets=[sock])


def serve_profiled(out: str, argv: list[str]) -> None:
    """Run ``argv`` (this script's floor, or rar) with cProfile (CPU time) switched on by
    SIGUSR1 and written to ``out`` by SIGUSR2."""
    import cProfile

    profile = cProfile.Profile(time.process_time)
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())

    def dump(*_: object) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR2, dump)
    if argv[0] == "--floor-server":
        serve_floor(argv[1], argv[2])
        return
    from rar.cli import main as rar_main

    sys.argv = ["rar", *argv]
    rar_main()


# --- the processes -------------------------------------------------------------------------------


class Child:
    """A server in its own process, its URL read from its first line (this child only is ever
    signalled, by its pid)."""

    def __init__(self, command: list[str], profile: str | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OPENAI_API_KEY": "bench-upstream-key"}
        env["PYTHONPATH"] = os.pathsep.join([str(_common.SRC), env.get("PYTHONPATH", "")])
        self.profile = profile
        if profile is not None:  # the same command, under serve_profiled
            rest = command[3:] if command[1:3] == ["-m", "rar"] else command[2:]
            command = [sys.executable, __file__, "--profiled", profile, *rest]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert self.process.stdout is not None
        self.line = self.process.stdout.readline()
        match = re.search(r" at (http://\S+/v1) ", self.line)
        if not match:
            self.process.kill()
            raise RuntimeError(f"did not start: {self.line!r} {self.process.stderr.read()}")
        self.url = match[1]

    def cpu(self) -> float:
        """CPU seconds the process (all its threads) has run so far, from the scheduler's
        nanosecond counters (``/proc/PID/task/*/schedstat``); 0 where there is no /proc."""
        total = 0
        try:
            for task in os.listdir(f"/proc/{self.process.pid}/task"):
                with open(f"/proc/{self.process.pid}/task/{task}/schedstat") as stat:
                    total += int(stat.read().split()[0])
        except (OSError, ValueError, IndexError):
            return 0.0
        return total / 1e9

    def signal(self, number: int) -> None:
        if self.profile is not None:
            self.process.send_signal(number)

    def stop(self) -> str:
        self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=60)
        if self.process.returncode not in (0, -signal.SIGINT):
            raise RuntimeError(f"failed: {err}")
        return out


def rar_proxy(store: Path, *args: str, profile: str | None = None) -> Child:
    command = [sys.executable, "-m", "rar", "--store", str(store), "proxy", "--port", "0"]
    child = Child([*command, *args], profile)
    child.run_id = re.search(r"run (\S+) ", child.line)[1]  # type: ignore[attr-defined, index]
    return child


def floor_proxy(upstream: str, client_kind: str, profile: str | None = None) -> Child:
    return Child([sys.executable, __file__, "--floor-server", upstream, client_kind], profile)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--floor-server":
        serve_floor(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 3 and sys.argv[1] == "--profiled":
        serve_profiled(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(f"usage: {sys.argv[0]} --floor-server UPSTREAM httpx2|rar | --profiled OUT ...")
