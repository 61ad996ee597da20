"""``rar proxy`` as a command: an unmodified script using the openai SDK records through it and
replays with the upstream stopped; SIGINT and SIGTERM seal the session's run ``completed``."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rar.store.manifest import RunStatus
from rar.store.store import Store
from servers.openai_server import Answer, OpenAIServer

# A script that knows nothing of RAR: it reads OPENAI_BASE_URL and OPENAI_API_KEY, as any does.
SCRIPT = """
import asyncio, json
from openai import AsyncOpenAI, OpenAI

client = OpenAI(max_retries=0)
plain = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "What is 17 * 23?"}]
)
stream = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "Count to three"}], stream=True
)
pieces = [c.choices[0].delta.content for c in stream if c.choices]

async def main():
    answer = await AsyncOpenAI(max_retries=0).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "And async?"}]
    )
    return answer.choices[0].message.content

print(json.dumps({"plain": plain.model_dump(), "pieces": pieces, "async": asyncio.run(main())}))
"""
UPSTREAM_KEY = "upstreamkey-1f2e3d4c5b6a79880a1b2c3d4e5f6a7b"


def _proxy(store: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "OPENAI_API_KEY": UPSTREAM_KEY}
    process = subprocess.Popen(
        [sys.executable, "-m", "rar", "--store", str(store), "proxy", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r" at (http://127\.0\.0\.1:(\d+)/v1) ", line)
    assert match, (line, process.stderr.read() if process.poll() is not None else "")
    # printed only once it accepts connections: the first attempt succeeds
    socket.create_connection(("127.0.0.1", int(match[2])), timeout=2).close()
    return process, match[1]


def _stop(process: subprocess.Popen[str], sig: int) -> str:
    process.send_signal(sig)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return out


def _script(tmp_path: Path, url: str) -> dict[str, Any]:
    path = tmp_path / "plain_openai_script.py"
    path.write_text(SCRIPT)
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "RAR_"))
    }
    env.update(OPENAI_BASE_URL=url, OPENAI_API_KEY="dummy")
    done = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_unmodified_openai_script_records_through_the_proxy_and_replays_upstream_stopped(
    tmp_path: Path, sig: int
) -> None:
    store_path = tmp_path / "runs"
    with OpenAIServer() as upstream:
        upstream.script(
            Answer(content="391"), Answer(content="one, two, three"), Answer(content="async 391")
        )
        recording, url = _proxy(store_path, "--upstream", upstream.base_url)
        recorded = _script(tmp_path, url)
        out = _stop(recording, sig)
        assert {r.headers["authorization"] for r in upstream.received} == {f"Bearer {UPSTREAM_KEY}"}
    run_id = re.search(r"run (\S+) completed", out)
    assert run_id, out
    store = Store(store_path)
    assert store.manifest(run_id[1]).status == RunStatus.COMPLETED

    replaying, url = _proxy(store_path, "--mode", "replay", "--run", run_id[1])
    replayed = _script(tmp_path, url)
    out = _stop(replaying, sig)
    assert replayed == recorded
    assert recorded["plain"]["choices"][0]["message"]["content"] == "391"
    assert "".join(recorded["pieces"][1:-1]) == "one, two, three"
    assert "replay reproducible: 3 served, 0 not recorded, 0 recorded but not asked" in out


def test_replay_needs_a_run_and_record_needs_an_upstream(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "rar", "--store", str(tmp_path / "runs"), "proxy"]
    for args, message in (
        (["--mode", "replay"], "--mode replay needs --run"),
        ([], "--mode record needs --upstream"),
    ):
        done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 2 and message in done.stderr
