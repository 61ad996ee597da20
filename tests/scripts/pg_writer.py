"""Child process for the PostgreSQL index tests: record runs with model calls into a store.

Usage: ``pg_writer.py STORE WORKER RUNS GOFILE`` (the index URL comes from ``RAR_INDEX_URL``
or the store's ``store.json``)

Creates ``GOFILE.readyWORKER`` once imported, waits for GOFILE (``-``: start at once), then
records RUNS runs. Each run records the same large payload (``SHARED``, stored once per store
unless writers race), an effect of its own, and two model calls through the cached client of a
scripted model: one question every worker asks (``shared question J``) and one of its own.
Prints one JSON object per run: ``{"run_id", "status", "events", "head", "calls", "cached"}``
(``calls``: calls that reached the model; ``cached``: answers served from the cache).
"""

from __future__ import annotations

import json
import sys

from concurrent_writer import SHARED, start_together  # the same large payload, the same start

from rar.llm import Message, Request, Response, ScriptedModel
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.redaction import Redactor
from rar.runtime.start import record


class Counting:
    """A scripted model that counts the calls reaching it."""

    name = "scripted"
    base_url = None

    def __init__(self) -> None:
        self.model = "pg-writer"
        self.calls = 0
        self._inner = ScriptedModel(
            lambda request: f"answer to {request.messages[-1].content}", model=self.model
        )

    def complete(self, request: Request) -> Response:
        self.calls += 1
        return self._inner.complete(request)


def main() -> None:
    store, worker, runs, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    start_together(go, worker)
    for j in range(runs):
        model = Counting()
        run = record(
            f"worker {worker} run {j}",
            store=store,
            seed=worker * 100 + j,
            redactor=Redactor(env={}),
        )
        with run:
            run.effect("tool", {"w": worker, "j": j, "k": 0}, lambda: SHARED)
            own = {"own": f"{worker}/{j}"}
            run.effect("tool", {"w": worker, "j": j, "k": 1}, lambda own=own: own)
            client = Client(model, run=run, profiles=Profiles())
            for prompt in (f"shared question {j}", f"question {j} of worker {worker}"):
                answer = client.complete(messages=[Message.user(prompt)])
                assert answer.content == f"answer to {prompt}", answer.content
        print(
            json.dumps(
                {
                    "run_id": run.id,
                    "status": run.manifest.status.value,
                    "events": run.manifest.events,
                    "head": run.manifest.head,
                    "calls": model.calls,
                    "cached": client.stats.cached_calls,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
