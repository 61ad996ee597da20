"""Child process for the power-loss simulation: record runs while journaling every file operation.

Usage: ``journaled_writer.py STORE JOURNAL SEED EFFECTS``

Every call the store makes that changes a file or a directory — ``os.open`` with ``O_CREAT``,
``os.write``, ``os.ftruncate``, ``os.fsync``, ``os.replace`` / ``os.rename``, ``os.mkdir``,
``os.unlink`` — is appended to JOURNAL (one JSON object per line) as soon as it has happened, in
the order it happened, with the file's path and, for writes, the offset and the bytes written.
After each ``run.effect`` returns an ``ack`` line is journaled: the effect was handed back to
the agent, so a durable run promises it survives a power loss from then on. :mod:`powerloss`
(in ``tests/``) replays the journal to any cut point, keeping only what had been fsynced (or a
random part of what had not), and checks the store it gets.

SQLite writes bypass ``os`` and are not journaled: the simulated machine loses ``index.sqlite``
entirely, which a derived index must survive.
"""

from __future__ import annotations

import base64
import os
import random
import sys
from typing import Any

import orjson

_real = {name: getattr(os, name) for name in (
    "open", "write", "ftruncate", "fsync", "replace", "rename", "mkdir", "unlink", "close",
)}  # fmt: skip
_paths: dict[int, str] = {}
_journal_fd = -1


def _log(entry: dict[str, Any]) -> None:
    line = orjson.dumps(entry) + b"\n"
    view = memoryview(line)
    while view:
        view = view[_real["write"](_journal_fd, view) :]


def _open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
    name = os.path.abspath(os.fspath(path))
    existed = os.path.exists(name)
    fd: int = _real["open"](path, flags, mode) if dir_fd is None else _real["open"](
        path, flags, mode, dir_fd=dir_fd
    )  # logged once it happened: a refused open changes nothing
    if flags & os.O_CREAT and not existed:
        _log({"op": "create", "path": name})
    elif flags & os.O_TRUNC:
        _log({"op": "truncate_path", "path": name, "size": 0})
    _paths[fd] = name
    return fd


def _write(fd: int, data: Any) -> int:
    path = _paths.get(fd)
    if path is None:
        return int(_real["write"](fd, data))
    offset = os.fstat(fd).st_size if _is_append(fd) else os.lseek(fd, 0, os.SEEK_CUR)
    written = int(_real["write"](fd, data))
    _log({"op": "write", "path": path, "offset": offset,
          "data": base64.b64encode(bytes(data[:written])).decode()})  # fmt: skip
    return written


def _is_append(fd: int) -> bool:
    import fcntl

    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)


def _ftruncate(fd: int, size: int) -> None:
    _real["ftruncate"](fd, size)
    if fd in _paths:
        _log({"op": "truncate_path", "path": _paths[fd], "size": size})


def _fsync(fd: int) -> None:
    _real["fsync"](fd)
    path = _paths.get(fd)
    if path is not None:  # journaled once done: only a completed fsync makes anything durable
        _log({"op": "fsync", "path": path, "dir": os.path.isdir(path)})


def _move(kind: str) -> Any:
    def move(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        _real[kind](src, dst, *args, **kwargs)
        _log({"op": "replace", "src": os.path.abspath(os.fspath(src)),
              "dst": os.path.abspath(os.fspath(dst))})  # fmt: skip

    return move


def _mkdir(path: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
    _real["mkdir"](path, mode)
    _log({"op": "mkdir", "path": os.path.abspath(os.fspath(path))})


def _unlink(path: Any, *, dir_fd: Any = None) -> None:
    _real["unlink"](path)
    _log({"op": "unlink", "path": os.path.abspath(os.fspath(path))})


def _close(fd: int) -> None:
    _paths.pop(fd, None)
    _real["close"](fd)


def install(journal: str) -> None:
    global _journal_fd
    _journal_fd = _real["open"](journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.open = _open  # type: ignore[assignment]
    os.write = _write  # type: ignore[assignment]
    os.ftruncate = _ftruncate
    os.fsync = _fsync
    os.replace = _move("replace")
    os.rename = _move("rename")
    os.mkdir = _mkdir  # type: ignore[assignment]
    os.unlink = _unlink  # type: ignore[assignment]
    os.close = _close


def main() -> None:
    store, journal, seed, effects = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    install(journal)
    from rar.redaction import Redactor
    from rar.runtime.start import record

    rng = random.Random(seed)
    acked = 0
    for number in range(2):  # two runs: the second finds a store that already exists
        run = record(f"power loss {number}", store=store, seed=seed + number,
                     redactor=Redactor(env={}))  # fmt: skip
        for i in range(effects):
            size = rng.choice((16, 300, 1500, 6000))
            result = {"i": i, "data": rng.randbytes(size // 2).hex()}
            span = "step" if i % 4 == 1 else None
            if span:
                with run.span(span):
                    run.effect("llm", {"i": i, "run": number}, lambda r=result: r)
            else:
                run.effect("tool", {"i": i, "run": number}, lambda r=result: r)
            acked += 1
            _log({"op": "ack", "run": run.id, "effects": i + 1})
        run.finish()
        _log({"op": "ack", "run": run.id, "finished": True})
    print(acked)


if __name__ == "__main__":
    main()
