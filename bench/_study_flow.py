"""A flow cell for bench/study.py that takes a known time: the demo agent, then ``work_ms`` of
CPU (a stand-in for a cell's own computation). Imported by the Dask workers (bench/ is on the
path they inherit)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from rar.demo import demo_agent
from rar.runtime.run import Run


def timed_agent(run: Run, question: str, work_ms: int) -> dict[str, Any]:
    result = demo_agent(run, question=question)
    # the work's length is the point, not its value: time it with the CPU clock
    end = time.thread_time() + work_ms / 1000  # nondeterminism-ok: bench stand-in for work
    digest = b""
    while time.thread_time() < end:  # nondeterminism-ok: see above
        digest = hashlib.sha256(digest).digest()
    return {**result, "work_ms": work_ms}
