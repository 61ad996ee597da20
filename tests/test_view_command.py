"""`rar view` as a user starts it: the URL it prints answers at once; bad input is refused."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from helpers import record_small_run

from rar.store.store import Store


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    store = Store(tmp_path / "runs", create=True)
    record_small_run(store)
    store.close()
    return tmp_path / "runs"


def _view(store_dir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rar", "view", "--store", str(store_dir), "--no-open", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("attempt", range(3))
def test_the_printed_url_answers_the_first_request(store_dir: Path, attempt: int) -> None:
    server = _view(store_dir, "--port", "0")
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert url, line
        # no wait, no retry: the first connection after the line must be served
        answer = httpx2.get(url.group(1) + "api/runs", timeout=10)
        assert answer.status_code == 200 and len(answer.json()["runs"]) == 1
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_store_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    server = _view(missing, "--port", "0")
    out, err = server.communicate(timeout=30)
    assert server.returncode == 2
    assert f"there is no run store at {missing}" in err and "--store" in err
    assert "http://" not in out  # nothing was served


def test_a_port_in_use_is_bad_input_with_a_way_out(store_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        server = _view(store_dir, "--port", str(port))
        _, err = server.communicate(timeout=30)
    assert server.returncode == 2, err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port 0" in err
    assert "internal error" not in err
