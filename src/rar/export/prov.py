"""A recorded run as a W3C PROV document (PROV-JSON or PROV-N), built with the ``prov`` library.

``rar export RUN --format prov [--prov-format json|provn]``. Every identifier is in the ``rar``
namespace (:data:`NAMESPACE`) and is made of the run id and, for what an event recorded, the
event's ``seq``:

* activities: ``rar:RUN`` (the run), ``rar:RUN.SEQ`` for each span (its ``span.start``) and each
  effect, with start and end times; each is ``wasInformedBy`` and ``wasStartedBy`` the activity
  around it;
* entities: ``rar:RUN.input.NAME``, ``rar:RUN.corpus``, ``rar:RUN.answer`` (the result),
  ``rar:RUN.log`` (``events.jsonl``), ``rar:RUN.entrypoint`` (a ``prov:Plan``),
  ``rar:RUN.SEQ.result`` (an effect's result), ``rar:RUN.SEQ`` for evidence (a
  ``prov:Collection`` of the passages ``rar:RUN.SEQ.N``), audit reports, messages and artifacts;
* agents: ``rar:RUN.agent.NAME`` (planner, researcher, executor, auditor, a flow's agents),
  ``rar:RUN.model.PROVIDER:MODEL``, ``rar:RUN.tool.NAME`` (software agents), ``rar:RUN.rar``
  (RAR itself, associated with the run with the entrypoint as plan) and
  ``rar:RUN.authority`` (who started the run, when the manifest says);
* a replay or branch: the run ``used`` its parent's log and ``wasInformedBy`` the parent run; its
  answer, log and artifacts ``wasDerivedFrom`` the parent's, and each effect served from the
  parent's record has its result derived from the parent effect's result.

Names outside ``[A-Za-z0-9_-]`` are percent-encoded (UTF-8), so PROV-N can write every
identifier as it is. The document is built from the record alone, in log order: the same run
gives the same bytes. The mapping is documented in docs/interop.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from rar.errors import RarError
from rar.export._record import ExportError, RunRecord, load, missing_extra, parse_time, read_run
from rar.store.store import Store

NAMESPACE = "urn:rar:"
FORMATS = ("json", "provn")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_DOCUMENT_EVENTS = frozenset({"message", "evidence", "audit", "artifact"})


def export_prov(store: Store, run_id: str, *, fmt: str = "json") -> str:
    """The PROV document of run ``run_id`` (a full id) as PROV-JSON or PROV-N text."""
    return serialize(build_document(store, read_run(store, run_id)), fmt)


def serialize(document: Any, fmt: str = "json") -> str:
    """A document as PROV-JSON (indented) or PROV-N text, with a final newline."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown PROV format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "provn":
        return str(document.get_provn()) + "\n"
    return str(document.serialize(format="json", indent=2)) + "\n"


def local(*parts: object) -> str:
    """``rar:`` + the parts, each percent-encoded outside ``[A-Za-z0-9_-]``, joined by dots."""
    return "rar:" + ".".join(_encode(str(part)) for part in parts)


def _encode(text: str) -> str:
    return "".join(
        char if char in _SAFE else "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
        for char in text
    )


def build_document(store: Store, record: RunRecord) -> Any:
    """The ``prov.model.ProvDocument`` of a run."""
    try:
        import prov.model  # noqa: F401
    except ImportError as exc:
        raise missing_extra("prov", exc) from None
    builder = _Builder(store, record)
    builder.build()
    return builder.doc


class _Builder:
    """Adds the run's records to a new document, in log order."""

    def __init__(self, store: Store, record: RunRecord) -> None:
        from prov.constants import PROV, PROV_LABEL, PROV_TYPE, PROV_VALUE
        from prov.model import ProvDocument

        self.store = store
        self.record = record
        self.doc = ProvDocument()
        self.rar = self.doc.add_namespace("rar", NAMESPACE)
        self.PROV = PROV
        self.TYPE = PROV_TYPE
        self.LABEL = PROV_LABEL
        self.VALUE = PROV_VALUE
        self.run = record.run_id
        self.agents: dict[str, str] = {}
        self.span_activity: dict[str, str] = {"run": local(self.run)}
        self.last_tool_result: dict[str, str] = {}
        self.passages: dict[tuple[str, str, str], str] = {}
        self.artifacts: dict[str, str] = {}
        # (kind, request digest, result digest) -> this run's effect results, in log order
        self.served: dict[tuple[str, str, str], list[str]] = {}

    # --- helpers ---------------------------------------------------------------------------------

    def types(self, *names: str) -> list[tuple[Any, Any]]:
        found = []
        for name in names:
            prefix, _, term = name.partition(":")
            found.append((self.TYPE, (self.PROV if prefix == "prov" else self.rar)[term]))
        return found

    def attrs(self, *types: str, **values: Any) -> list[tuple[Any, Any]]:
        found = self.types(*types)
        for key, value in values.items():
            if value is None:
                continue
            name = {"label": self.LABEL, "value": self.VALUE}.get(key) or self.rar[key]
            items = value if isinstance(value, list) else [value]
            found.extend((name, item) for item in items)
        return found

    def agent(self, key: str, ident: str, attributes: list[tuple[Any, Any]]) -> str:
        if key not in self.agents:
            self.doc.agent(ident, attributes)
            self.agents[key] = ident
        return self.agents[key]

    def run_agent(self, name: str) -> str:
        return self.agent(
            f"agent:{name}",
            local(self.run, "agent", name),
            self.attrs("prov:SoftwareAgent", "rar:Agent", label=name),
        )

    def model_agent(self, name: str) -> str:
        return self.agent(
            f"model:{name}",
            local(self.run, "model", name),
            self.attrs("prov:SoftwareAgent", "rar:Model", label=name),
        )

    def tool_agent(self, name: str, version: Any = None) -> str:
        return self.agent(
            f"tool:{name}",
            local(self.run, "tool", name),
            self.attrs(
                "prov:SoftwareAgent",
                "rar:Tool",
                label=name,
                version=None if version is None else str(version),
            ),
        )

    def activity_of(self, span: str) -> str:
        path = span
        while path:
            if path in self.span_activity:
                return self.span_activity[path]
            path = path.rpartition("/")[0]
        return local(self.run)

    # --- the document ----------------------------------------------------------------------------

    def build(self) -> None:
        record, doc = self.record, self.doc
        manifest = record.manifest
        run = local(self.run)
        start = parse_time(record.started_at)
        end = parse_time(record.ended_at) if record.ended_at else None
        doc.activity(
            run,
            start,
            end,
            self.attrs(
                "rar:Run",
                label=manifest.goal or f"RAR run {self.run}",
                status=record.status,
                entrypoint=manifest.entrypoint,
                seed=_scalar(manifest.config.get("seed")),
            ),
        )
        # RAR, the entrypoint as its plan, and who started the run
        environment = manifest.environment or {}
        rar = self.agent(
            "rar",
            local(self.run, "rar"),
            self.attrs(
                "prov:SoftwareAgent",
                "rar:Runtime",
                label="RAR (Reproducible Agent Runtime)",
                version=_scalar(environment.get("rar")),
                python=_scalar(environment.get("python")),
                platform=_scalar(environment.get("platform")),
            ),
        )
        plan = local(self.run, "entrypoint")
        doc.entity(
            plan,
            self.attrs("prov:Plan", "rar:Entrypoint", label=manifest.entrypoint or "(none)"),
        )
        doc.wasAssociatedWith(run, rar, plan)
        if manifest.authority:
            person = self.agent(
                "authority",
                local(self.run, "authority"),
                self.attrs("prov:Person", label=manifest.authority),
            )
            doc.wasAssociatedWith(run, person)
            doc.actedOnBehalfOf(rar, person, run)
        for model in manifest.models:
            name = _model_name(model)
            if name:
                self.model_agent(name)
        for tool in manifest.tools:
            if tool.get("name"):
                self.tool_agent(str(tool["name"]), tool.get("version"))

        # inputs
        for name, (value, digest) in record.inputs.items():
            entity = local(self.run, "input", name)
            doc.entity(
                entity,
                self.attrs("rar:Input", label=name, value=_scalar(value, json=True), digest=digest),
            )
            doc.used(run, entity, start)
        corpus = None
        if manifest.corpus_digest:
            corpus = local(self.run, "corpus")
            doc.entity(corpus, self.attrs("rar:Corpus", digest=manifest.corpus_digest))
            doc.used(run, corpus, start)

        # spans, effects and what they recorded, in log order
        for event in record.events:
            kind = event.get("type")
            if kind == "span.start":
                self.span_start(event)
            elif kind == "span.end":
                self.span_end(event)
            elif kind == "effect":
                self.effect(event, corpus)
            elif kind in _DOCUMENT_EVENTS:
                getattr(self, kind)(event, corpus)
        for key in [k for k in self.agents if k.startswith("agent:")]:
            doc.actedOnBehalfOf(self.agents[key], rar, run)

        # the answer and the log
        answer = None
        if record.finished is not None and record.result_digest:
            answer = local(self.run, "answer")
            doc.entity(
                answer,
                self.attrs(
                    "rar:Answer",
                    label="the run's result",
                    value=record.answer,
                    digest=record.result_digest,
                ),
            )
            doc.wasGeneratedBy(answer, run, end)
            self.cited(answer)
        log = local(self.run, "log")
        doc.entity(
            log,
            self.attrs(
                "rar:Log",
                label="events.jsonl",
                events=len(record.events),
                head=manifest.head,
            ),
        )
        doc.wasGeneratedBy(log, run, end)
        self.parent(answer, log)

    def span_start(self, event: dict[str, Any]) -> None:
        span = str(event.get("span") or "run")
        outer = self.activity_of(span.rpartition("/")[0] or "run")
        ident = local(self.run, event["seq"])
        agent = self.record.agent_of(event)
        self.doc.activity(
            ident,
            parse_time(str(event["ts"])),
            None,
            self.attrs("rar:Span", label=event.get("name") or span, span=span, agent=agent),
        )
        self.span_activity[span] = ident
        self.doc.wasInformedBy(ident, outer)
        self.doc.wasStartedBy(ident, None, outer, parse_time(str(event["ts"])))
        if agent:
            self.doc.wasAssociatedWith(ident, self.run_agent(agent))

    def span_end(self, event: dict[str, Any]) -> None:
        span = str(event.get("span") or "run")
        ident = self.span_activity.get(span)
        if ident is None:
            return
        activity: Any = self.doc.get_record(ident)[0]  # a ProvActivity
        activity.set_time(None, parse_time(str(event["ts"])))
        activity.add_attributes(self.attrs(status=str(event.get("status") or "ok")))
        error = event.get("error")
        if isinstance(error, dict):
            activity.add_attributes(self.attrs(error=_error_text(error)))

    def effect(self, event: dict[str, Any], corpus: str | None) -> None:
        seq = int(event["seq"])
        kind = str(event.get("kind") or "effect")
        span = str(event.get("span") or "run")
        ident = local(self.run, seq)
        ended = parse_time(str(event["ts"]))
        started = ended - timedelta(microseconds=int(event.get("duration_us") or 0))
        request = load(self.store, event.get("request"))
        request = request if isinstance(request, dict) else {}
        attributes = self.attrs(
            "rar:Effect",
            kind=kind,
            span=span,
            ordinal=_scalar(event.get("ordinal")),
            request=_digest(event.get("request")),
        )
        error = event.get("error")
        if isinstance(error, dict):
            attributes += self.attrs(error=_error_text(error))
        outer = self.activity_of(span)
        self.doc.activity(ident, started, ended, attributes)
        self.doc.wasInformedBy(ident, outer)
        self.doc.wasStartedBy(ident, None, outer, started)
        agent = self.record.agent_of(event)
        if agent:
            self.doc.wasAssociatedWith(ident, self.run_agent(agent))
        if kind == "llm":
            inner = request.get("request")
            model = inner.get("model") if isinstance(inner, dict) else None
            provider = request.get("provider")
            name = f"{provider}:{model}" if provider and model else str(model or provider or "")
            if name:
                self.doc.wasAssociatedWith(ident, self.model_agent(name))
        elif kind == "tool" and request.get("name"):
            self.doc.wasAssociatedWith(
                ident, self.tool_agent(str(request["name"]), request.get("version"))
            )
            if corpus is not None and request.get("corpus") == self.record.manifest.corpus_digest:
                self.doc.used(ident, corpus, started)
        result_digest = _digest(event.get("result"))
        if result_digest is not None and not isinstance(error, dict):
            result = local(self.run, seq, "result")
            self.doc.entity(result, self.attrs("rar:EffectResult", kind=kind, digest=result_digest))
            self.doc.wasGeneratedBy(result, ident, ended)
            if kind == "tool":
                self.last_tool_result[span] = result
            self.served.setdefault(
                (kind, _digest(event.get("request")) or "", result_digest), []
            ).append(result)

    def message(self, event: dict[str, Any], corpus: str | None) -> None:
        ident = local(self.run, event["seq"])
        receivers = [str(r) for r in event.get("receivers") or []]
        self.doc.entity(
            ident,
            self.attrs(
                "rar:Message",
                label=str(event.get("performative") or "message"),
                performative=event.get("performative"),
                sender=event.get("sender"),
                receiver=receivers or None,
                protocol=event.get("protocol"),
                conversation=event.get("conversation_id"),
                digest=_digest(event.get("content")),
            ),
        )
        self.generated(ident, event)
        if event.get("sender"):
            self.doc.wasAttributedTo(ident, self.run_agent(str(event["sender"])))

    def evidence(self, event: dict[str, Any], corpus: str | None) -> None:
        seq = int(event["seq"])
        ident = local(self.run, seq)
        self.doc.collection(
            ident,
            self.attrs(
                "rar:Evidence", label="evidence anchors", digest=_digest(event.get("anchors"))
            ),
        )
        self.generated(ident, event)
        span = str(event.get("span") or "run")
        if span in self.last_tool_result:
            self.doc.wasDerivedFrom(ident, self.last_tool_result[span])
        anchors = self.resolve(event.get("anchors"))
        for number, anchor in enumerate(anchors if isinstance(anchors, list) else [], 1):
            if not isinstance(anchor, dict):
                continue
            passage = local(self.run, seq, number)
            self.passage(passage, anchor, corpus)
            self.doc.hadMember(ident, passage)

    def passage(self, ident: str, anchor: dict[str, Any], corpus: str | None) -> None:
        self.doc.entity(
            ident,
            self.attrs(
                "rar:Passage",
                label=_scalar(anchor.get("doc_title")),
                doc=_scalar(anchor.get("doc_id")),
                location=_scalar(anchor.get("location")),
                contentHash=_scalar(anchor.get("content_hash")),
            ),
        )
        self.passages.setdefault(_anchor_key(anchor), ident)
        if corpus is not None:
            self.doc.hadPrimarySource(ident, corpus)

    def audit(self, event: dict[str, Any], corpus: str | None) -> None:
        ident = local(self.run, event["seq"])
        self.doc.entity(
            ident,
            self.attrs(
                "rar:AuditReport",
                label="audit report",
                stage=event.get("stage"),
                digest=_digest(event.get("report")),
            ),
        )
        self.generated(ident, event)

    def artifact(self, event: dict[str, Any], corpus: str | None) -> None:
        ident = local(self.run, event["seq"])
        self.doc.entity(
            ident,
            self.attrs(
                "rar:Artifact",
                label=str(event.get("name")),
                digest=event.get("digest"),
                mediaType=event.get("media_type"),
                size=_scalar(event.get("size")),
            ),
        )
        self.generated(ident, event)
        self.artifacts[str(event.get("name"))] = ident

    def generated(self, ident: str, event: dict[str, Any]) -> None:
        span = str(event.get("span") or "run")
        self.doc.wasGeneratedBy(ident, self.activity_of(span), parse_time(str(event["ts"])))
        agent = self.record.agent_of(event)
        if agent and event.get("type") != "message":
            self.doc.wasAttributedTo(ident, self.run_agent(agent))

    def cited(self, answer: str) -> None:
        """The answer is derived from the passages its result cites."""
        result = self.record.result
        anchors = result.get("anchors") if isinstance(result, dict) else None
        for number, anchor in enumerate(anchors if isinstance(anchors, list) else [], 1):
            if not isinstance(anchor, dict):
                continue
            passage = self.passages.get(_anchor_key(anchor))
            if passage is None:  # cited without an evidence event naming it
                passage = local(self.run, "answer", number)
                self.passage(passage, anchor, None)
            self.doc.wasDerivedFrom(answer, passage)

    def resolve(self, ref: Any) -> Any:
        try:
            return self.store.resolve_payload(ref) if isinstance(ref, dict) else None
        except RarError:
            return None

    def parent(self, answer: str | None, log: str) -> None:
        """Links of a replay or a branch to the run it came from."""
        reference = self.record.manifest.parent
        if reference is None:
            return
        doc, run = self.doc, local(self.run)
        parent_id = reference.run_id
        parent_run, parent_log = local(parent_id), local(parent_id, "log")
        manifest, events = None, []
        try:
            manifest = self.store.manifest(parent_id)
            events = self.store.events(parent_id)
        except RarError as exc:
            self.record.warnings.append(f"the parent run {parent_id} cannot be read: {exc.message}")
        if manifest is not None:
            doc.activity(
                parent_run,
                parse_time(manifest.created_at),
                parse_time(manifest.finished_at) if manifest.finished_at else None,
                self.attrs("rar:Run", label=manifest.goal, status=manifest.status.value),
            )
        else:
            doc.activity(parent_run, None, None, self.attrs("rar:Run"))
        doc.entity(
            parent_log,
            self.attrs("rar:Log", label="events.jsonl", head=manifest.head if manifest else None),
        )
        doc.wasGeneratedBy(parent_log, parent_run)
        mode = self.record.manifest.tags.get("replay_mode")
        doc.used(run, parent_log, None, None, self.attrs(replayedUntil=reference.seq, mode=mode))
        doc.wasInformedBy(run, parent_run)
        doc.wasDerivedFrom(log, parent_log, run)
        finished = next((e for e in reversed(events) if e.get("type") == "run.finished"), None)
        if answer is not None and finished is not None and isinstance(finished.get("result"), dict):
            parent_answer = local(parent_id, "answer")
            doc.entity(
                parent_answer,
                self.attrs("rar:Answer", digest=_digest(finished["result"])),
            )
            doc.wasGeneratedBy(parent_answer, parent_run)
            doc.wasDerivedFrom(answer, parent_answer, run)
        # artifacts saved under the same name, and effect results served from the parent
        parent_artifacts: dict[str, str] = {}
        parent_results: dict[tuple[str, str, str], list[str]] = {}
        for event in events:
            if event.get("type") == "artifact" and isinstance(event.get("name"), str):
                parent_artifacts[event["name"]] = local(parent_id, event["seq"])
            elif event.get("type") == "effect" and int(event["seq"]) <= reference.seq:
                result = _digest(event.get("result"))
                if result is not None:
                    key = (str(event.get("kind")), _digest(event.get("request")) or "", result)
                    parent_results.setdefault(key, []).append(
                        local(parent_id, event["seq"], "result")
                    )
        for name, ident in self.artifacts.items():
            if name in parent_artifacts:
                doc.entity(parent_artifacts[name], self.attrs("rar:Artifact", label=name))
                doc.wasGeneratedBy(parent_artifacts[name], parent_run)
                doc.wasDerivedFrom(ident, parent_artifacts[name], run)
        for key, results in self.served.items():
            sources = parent_results.get(key, [])
            for result, source in zip(results, sources, strict=False):
                doc.entity(source, self.attrs("rar:EffectResult", kind=key[0], digest=key[2]))
                doc.wasGeneratedBy(source, parent_run)
                doc.wasDerivedFrom(result, source, run)


def _model_name(model: dict[str, Any]) -> str:
    provider, name = model.get("provider"), model.get("model")
    if provider and name:
        return f"{provider}:{name}"
    return str(name or provider or "")


def _digest(ref: Any) -> str | None:
    return str(ref["digest"]) if isinstance(ref, dict) and "digest" in ref else None


def _error_text(error: dict[str, Any]) -> str:
    kind, message = error.get("type"), error.get("message")
    return f"{kind}: {message}" if kind and message else str(kind or message or "error")


def _anchor_key(anchor: dict[str, Any]) -> tuple[str, str, str]:
    return (
        str(anchor.get("doc_id")),
        str(anchor.get("location")),
        str(anchor.get("content_hash")),
    )


def _scalar(value: Any, *, json: bool = False) -> Any:
    """A value PROV writes as a literal: strings, integers and booleans as they are; floats,
    structures and None as JSON text (or None, unless ``json``)."""
    import json as _json

    if isinstance(value, (str, bool, int)):
        return value
    if value is None:
        return "null" if json else None
    return _json.dumps(value, sort_keys=True, ensure_ascii=False)
