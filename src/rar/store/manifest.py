"""``manifest.json``: who, what and where of a run (after the Reproducible Agent Run protocol).

The manifest is rewritten atomically when the run's status changes. Its *immutable part*
(everything except :data:`MUTABLE_FIELDS`) is also embedded in the ``run.started`` event, so it is
covered by the log's hash chain: ``rar verify`` reports a manifest edited after the fact.
Credentials never appear here: keys are recorded as references such as ``env:OPENAI_API_KEY``.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rar.errors import ManifestMissingError
from rar.store._fs import atomic_write
from rar.store.events import PayloadRef
from rar.store.layout import MANIFEST_NAME

FORMAT = "rar.run/1"


class RunStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    COMPLETED_WITH_WARNINGS = "completed_with_warnings"
    FAILED = "failed"
    WAITING = "waiting"

    @property
    def finished(self) -> bool:
        return self in FINISHED_STATUSES


FINISHED_STATUSES = frozenset(
    {RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_WARNINGS, RunStatus.FAILED, RunStatus.WAITING}
)


class ParentRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    run_id: str
    seq: int = Field(description="divergence point: events up to this seq were replayed")


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str = FORMAT
    run_id: str
    created_at: str
    goal: str | None = None
    entrypoint: str | None = Field(default=None, description="module:callable that re-creates it")
    inputs: dict[str, PayloadRef] = Field(default_factory=dict)
    models: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    environment: dict[str, Any] = Field(default_factory=dict)
    corpus_digest: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    authority: str | None = None
    redaction: dict[str, Any] = Field(default_factory=dict)
    secrets: list[str] = Field(default_factory=list, description="references, never values")
    parent: ParentRef | None = None
    workspace: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    # mutable part
    status: RunStatus = RunStatus.PENDING
    finished_at: str | None = None
    events: int = 0
    head: str | None = Field(default=None, description="digest of the last log line at finish")
    stats: dict[str, Any] = Field(default_factory=dict)


MUTABLE_FIELDS = frozenset({"status", "finished_at", "events", "head", "stats"})


def immutable_part(manifest: Manifest) -> dict[str, Any]:
    data = manifest.model_dump(mode="json")
    return {key: value for key, value in data.items() if key not in MUTABLE_FIELDS}


def write_manifest(run_dir: Path, manifest: Manifest, *, durable: bool = True) -> None:
    data = orjson.dumps(manifest.model_dump(mode="json"), option=orjson.OPT_INDENT_2)
    atomic_write(run_dir / MANIFEST_NAME, data + b"\n", durable=durable)


def read_manifest(run_dir: Path, run_id: str | None = None) -> Manifest:
    path = run_dir / MANIFEST_NAME
    run_id = run_id or run_dir.name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ManifestMissingError(run_id, path) from None
    except OSError as exc:
        raise ManifestMissingError(run_id, path, exc.strerror or str(exc)) from exc
    try:
        return Manifest.model_validate(orjson.loads(data))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise ManifestMissingError(run_id, path, f"unreadable: {first}") from exc
