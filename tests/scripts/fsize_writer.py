"""Child process for the disk-full tests: an append that hits RLIMIT_FSIZE.

Usage: ``fsize_writer.py STORE RUN_ID MODE THEN``

MODE says which write hits the limit:

* ``log``: the limit is set half an event line above the log's size, then an effect like the
  ones before it (small request and result) is recorded: its line is written in part, then EFBIG;
* ``blob``: the limit is set a little above the largest file, then an effect whose result
  (about 60 KB of incompressible text) becomes a blob crossing it in the pack;
* ``newpack``: a first run is recorded and finished (its blobs indexed), so the second run RUN_ID
  needs no pack at start; the limit is set to 4 bytes, then an effect with a large result makes
  the writer create its pack, whose 8-byte header cannot be written;
* ``start``: the limit is set to 4 bytes before ``record()`` starts the run RUN_ID (the first
  manifest cannot be written); THEN is ignored.

THEN says what happens after the failure: ``abandon`` ends the process at once (``os._exit``),
leaving the run unfinished; ``continue`` raises the limit again, repeats the effect in the same
run and finishes the run.

Prints one JSON object on stdout (a pipe, not subject to the limit).
"""

from __future__ import annotations

import base64
import json
import os
import resource
import signal
import sys
from pathlib import Path

from rar.errors import AppendError, RarError
from rar.redaction import Redactor
from rar.runtime.start import record


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else -1


def main() -> None:
    store, run_id, mode, then = sys.argv[1:5]
    redactor = Redactor(env={})
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if mode == "start":
        _start(store, run_id, redactor)
        return
    if mode == "newpack":
        with record("first", store=store, seed=1, redactor=redactor) as first:
            first.effect("tool", {"n": 0}, lambda: {"ok": True})
    run = record("disk full", store=store, seed=2, run_id=run_id, redactor=redactor)
    for n in range(3):
        run.effect("tool", {"n": n}, lambda n=n: {"small": n})
    log = run.dir / "events.jsonl"
    pack = Path(store) / "blobs" / "packs" / f"{run_id}.1.pack"
    if mode == "log":
        result: object = {"small": "big"}
        last_line = log.read_bytes().split(b"\n")[-2]
        limit = _size(log) + len(last_line) // 2
    elif mode == "blob":
        result = {"blob": base64.b64encode(os.urandom(45_000)).decode()}
        limit = max(_size(log), _size(pack)) + 2000
    else:
        result = {"blob": base64.b64encode(os.urandom(45_000)).decode()}
        limit = 4
    before = {"log": _size(log), "pack": _size(pack), "packs": sorted(os.listdir(pack.parent))}

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    error = None
    try:
        run.effect("tool", {"n": "big"}, lambda: result)
    except AppendError as exc:
        error = {"type": type(exc).__name__, "message": str(exc), "path": str(exc.path)}
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    out = {
        "limit": limit,
        "error": error,
        "before": before,
        "after": {"log": _size(log), "pack": _size(pack), "packs": sorted(os.listdir(pack.parent))},
    }
    if then == "abandon":
        print(json.dumps(out), flush=True)
        os._exit(0)
    value = run.effect("tool", {"n": "big"}, lambda: result)
    assert value == result
    manifest = run.finish()
    out["status"] = manifest.status.value
    out["events"] = manifest.events
    print(json.dumps(out), flush=True)


def _start(store: str, run_id: str, redactor: Redactor) -> None:
    Path(store).mkdir(parents=True, exist_ok=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4, hard))
    error = None
    try:
        record("disk full at start", store=store, seed=3, run_id=run_id, redactor=redactor)
    except Exception as exc:
        error = {
            "type": type(exc).__name__,
            "message": str(exc),
            "rar_error": isinstance(exc, RarError),
        }
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print(json.dumps({"error": error}), flush=True)


if __name__ == "__main__":
    main()
