"""What the research-object exports (RO-Crate, PROV) read from a recorded run.

Both exports read the store only (the manifest, the log, payloads and blobs) and nothing that
depends on when or where they run, so exporting the same run twice gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rar.errors import RarError, UserError
from rar.store.store import Store

_NOT_FINISHED = {"pending", "running"}


class ExportError(UserError):
    """A research-object export cannot be made (missing library, bad output path, ...)."""


def missing_extra(library: str, error: ImportError) -> ExportError:
    """The error for an optional library of the ``export`` extra that is not installed."""
    return ExportError(
        f"this export needs the {library!r} package, which is not installed "
        f"({error}); install RAR's export extra: pip install 'rar[export]'"
    )


@dataclass
class Artifact:
    seq: int
    name: str
    digest: str
    size: int
    media_type: str
    ts: str
    span: str
    agent: str | None
    data: bytes | None = None
    problem: str | None = None


@dataclass
class RunRecord:
    """A run as the research-object exports see it."""

    run_id: str
    manifest: Any  # rar.store.manifest.Manifest
    events: list[dict[str, Any]]
    status: str  # the manifest's status, or "interrupted" for a run its writer left running
    inputs: dict[str, tuple[Any, str]]  # name -> (value, digest)
    finished: dict[str, Any] | None
    result: Any
    result_digest: str | None
    answer: str | None
    artifacts: list[Artifact]
    span_agents: dict[str, str]
    warnings: list[str] = field(default_factory=list)

    @property
    def started_at(self) -> str:
        return str(self.manifest.created_at)

    @property
    def ended_at(self) -> str | None:
        """When the run finished; None while it has not."""
        if self.manifest.finished_at:
            return str(self.manifest.finished_at)
        if self.finished is not None and self.finished.get("finished_at"):
            return str(self.finished["finished_at"])
        return None

    @property
    def published_at(self) -> str:
        """The time an export is dated with: the run's end, else its last event, else its
        creation (never the time of the export, so the same run gives the same document)."""
        if self.ended_at:
            return self.ended_at
        if self.events and self.events[-1].get("ts"):
            return str(self.events[-1]["ts"])
        return self.started_at

    def agent_of(self, event: dict[str, Any]) -> str | None:
        return agent_of(event, self.span_agents)


def agent_of(event: dict[str, Any], span_agents: dict[str, str]) -> str | None:
    """The event's ``agent``, else that of the innermost span around it that names one."""
    if event.get("agent"):
        return str(event["agent"])
    path = str(event.get("span") or "run")
    while path:
        if path in span_agents:
            return span_agents[path]
        path = path.rpartition("/")[0]
    return None


def parse_time(text: str) -> datetime:
    """An ISO 8601 time of the record (``...Z``) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def load(store: Store, ref: Any) -> Any:
    """A payload as stored (inline value, or its blob with conversations still linked); None
    when it cannot be read."""
    if not isinstance(ref, dict):
        return None
    if "value" in ref:
        return ref["value"]
    try:
        return store.get_json(str(ref["digest"]))
    except (RarError, OSError, ValueError, KeyError):
        return None


def answer_text(result: Any) -> str | None:
    from rar.export.trajectory import _answer_text

    return _answer_text(result)


def read_run(store: Store, run_id: str, *, artifact_bytes: bool = False) -> RunRecord:
    """Read run ``run_id`` (a full id) for an export; ``artifact_bytes`` also reads each
    artifact's bytes from its (re-hashed) blob."""
    manifest = store.manifest(run_id)
    events = store.events(run_id)
    warnings: list[str] = []
    status = manifest.status.value
    if status == "running" and not store.is_writing(run_id):
        status = "interrupted"
    if status in _NOT_FINISHED or status == "interrupted":
        warnings.append(
            f"run {run_id} has not finished ({status}): the export shows it as far as it goes"
        )

    inputs: dict[str, tuple[Any, str]] = {}
    for name, ref in manifest.inputs.items():
        try:
            value = store.resolve_payload(ref.reference())
        except RarError as exc:
            warnings.append(f"input {name!r} cannot be read: {exc.message}")
            value = None
        inputs[name] = (value, ref.digest)

    finished = next((e for e in reversed(events) if e.get("type") == "run.finished"), None)
    result: Any = None
    result_digest: str | None = None
    if finished is not None and isinstance(finished.get("result"), dict):
        result_digest = str(finished["result"].get("digest"))
        try:
            result = store.resolve_payload(finished["result"])
        except RarError as exc:
            warnings.append(f"the run's result cannot be read: {exc.message}")

    span_agents: dict[str, str] = {}
    for event in events:
        if event.get("type") == "span.start" and event.get("agent"):
            span_agents[str(event.get("span"))] = str(event["agent"])

    artifacts: dict[str, Artifact] = {}
    for event in events:
        if event.get("type") != "artifact" or not isinstance(event.get("name"), str):
            continue
        item = Artifact(
            seq=int(event["seq"]),
            name=str(event["name"]),
            digest=str(event.get("digest")),
            size=int(event.get("size") or 0),
            media_type=str(event.get("media_type") or "application/octet-stream"),
            ts=str(event.get("ts")),
            span=str(event.get("span") or "run"),
            agent=agent_of(event, span_agents),
        )
        if not _safe_name(item.name):
            item.problem = "its name is not a relative path inside artifacts/"
        elif artifact_bytes:
            try:
                item.data = store.get_blob(item.digest)  # re-hashed by the pack reader
            except RarError as exc:
                item.problem = exc.message
            except (OSError, ValueError, KeyError) as exc:
                item.problem = f"cannot read blob {item.digest}: {exc}"
        if item.problem:
            warnings.append(f"artifact {item.name!r} is left out: {item.problem}")
        artifacts[item.name] = item  # a name saved again: the last one counts
    return RunRecord(
        run_id=run_id,
        manifest=manifest,
        events=events,
        status=status,
        inputs=inputs,
        finished=finished,
        result=result,
        result_digest=result_digest,
        answer=answer_text(result),
        artifacts=sorted(artifacts.values(), key=lambda a: a.seq),
        span_agents=span_agents,
        warnings=warnings,
    )


def _safe_name(name: str) -> bool:
    parts = name.split("/")
    return (
        bool(name)
        and not name.startswith(("/", "."))
        and "\\" not in name
        and all(part not in ("", ".", "..") for part in parts)
    )
