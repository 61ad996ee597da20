"""A run's log reserves its next blocks ahead of its end (``fallocate(FALLOC_FL_KEEP_SIZE)``),
so that an fsync of an append allocates nothing: the file's size and contents never show it,
closing gives the space back, and a writer that crashed leaves it to the next one to free."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import rar.store._fs as fs
from rar.store._fs import RESERVE_BYTES, AppendOnlyFile

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fallocate is Linux's")


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@linux
def test_durable_appends_reserve_space_the_size_never_shows_and_close_gives_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    log = AppendOnlyFile(path, what="log", new=True)
    for n in range(5):
        log.write(b'{"seq":%d}\n' % n, sync=True)
    data = path.read_bytes()
    assert data == b"".join(b'{"seq":%d}\n' % n for n in range(5))
    assert os.stat(path).st_size == len(data)
    if allocated(path) < RESERVE_BYTES:
        pytest.skip("this file system does not allocate ahead (fallocate unsupported)")
    log.close()
    assert path.read_bytes() == data
    assert allocated(path) <= 2 * 4096, "closing gives the reserve back"


@linux
def test_a_reserve_left_by_a_crashed_writer_is_freed_by_the_next(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    crashed = AppendOnlyFile(path, what="log", new=True)
    crashed.write(b"line\n", sync=True)
    if allocated(path) < RESERVE_BYTES:
        pytest.skip("this file system does not allocate ahead (fallocate unsupported)")
    os.close(crashed._fd)  # a kill -9: no close(), the reserve stays
    crashed._fd = -1
    reopened = AppendOnlyFile(path, what="log", size=5)
    assert allocated(path) <= 2 * 4096
    reopened.write(b"more\n", sync=True)
    reopened.close()
    assert path.read_bytes() == b"line\nmore\n"


def test_appends_go_on_where_space_cannot_be_reserved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(fs._libc, "fallocate", None)
    monkeypatch.setitem(fs._libc, "sync_file_range", None)
    path = tmp_path / "events.jsonl"
    log = AppendOnlyFile(path, what="log", new=True)
    calls: list[str] = []
    log.write(b"a\n", sync=True, while_syncing=lambda: calls.append("hook"))
    log.write(b"b\n", sync=True)
    log.close()
    assert path.read_bytes() == b"a\nb\n" and calls == ["hook"]
