"""Ask a research question: the science runtime's entrypoint and its Python API.

::

    from rar.science import ask_question

    result = ask_question("What activation energy do the Kissinger data give?", mode="owl_dl")
    result.answer, result.anchors, result.audit, result.status, result.run_id

Every search is a recorded ``tool`` effect (``search``) and every computation one (``python``,
run in the sandbox), so a run replays offline like any other: ``rar replay RUN``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rar.evidence import BM25Index, Corpus, index_directory, resolve_corpus
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.runtime.run import Run
from rar.science.orchestrator import Orchestrator
from rar.science.planner import RuleBasedPlanner
from rar.science.planner_model import (
    AUTO,
    auto_profile,
    check_thinking,
    default_thinking,
    reasoning_effort,
    takes_reasoning,
)
from rar.science.protocols import Mode
from rar.science.spec import DEFAULT_MODEL, MODES
from rar.science.tables import parse_tables
from rar.store.manifest import RunStatus
from rar.store.store import Store

ENTRYPOINT = "rar.science.runtime:science_entry"
# what the orchestrator does when the planner model is unavailable after its retries
PLANNER_FALLBACKS = ("rule-based", "none")


def _client(run: Run, model: str, thinking: str | None = None) -> Client:
    """The planner's client; a real model gets ``thinking`` as its ``reasoning_effort`` (the
    rule-based planner ignores it, so its requests stay those recorded before thinking levels).
    ``thinking=None`` (runs recorded before thinking levels) leaves the profile as it is."""
    if model == DEFAULT_MODEL or model.startswith("planner:"):
        return Client(
            RuleBasedPlanner(model.partition(":")[2] or "rule-based"),
            run=run,
            profiles=Profiles(),
            cache=False,
        )
    if thinking is None:
        return Client(model, run=run)
    profiles = Profiles.load()
    profile = profiles.resolve(model).model_copy(
        update={"reasoning_effort": reasoning_effort(thinking)}
    )
    return Client(profile, run=run, profiles=profiles)


def science_entry(
    run: Run,
    question: str,
    mode: str = "owl_lite",
    corpus: str = "demo",
    model: str = DEFAULT_MODEL,
    max_steps: int = 12,
    planner_fallback: str = "rule-based",
    thinking: str | None = None,
    auditor: str | None = None,
) -> dict[str, Any]:
    """The entrypoint of a science run (recorded in its manifest, re-created by replay).

    ``thinking``: the planner model's thinking level (None in runs recorded before there were
    levels: the profile's own setting applies). ``model="auto"`` is resolved by the mode.
    """
    if model == AUTO:
        model = auto_profile(mode, Profiles.load()).name
    documents = Corpus.load(resolve_corpus(corpus))
    index = BM25Index.build(documents, index_directory(run.store.root, documents))

    def research(query: str, k: int) -> dict[str, Any]:
        def search() -> dict[str, Any]:
            hits = index.search(query, k)
            tables = [
                {
                    "doc_id": hit.passage.doc_id,
                    "location": hit.passage.location,
                    "caption": table.caption,
                    "columns": list(table.columns),
                    "rows": [list(row) for row in table.rows],
                }
                for hit in hits
                for table in parse_tables(hit.passage.text)
            ]
            return {
                "anchors": [hit.anchor().model_dump(mode="json") for hit in hits],
                # the whole text of each passage: the planner composes from its sentences and
                # the auditor checks claims against it (an anchor's snippet is cut at ~300 chars)
                "passages": {
                    f"{hit.passage.doc_id}#{hit.passage.location}": hit.passage.text
                    for hit in hits
                },
                "tables": tables,
            }

        request = {
            "name": "search",
            "version": "2",
            "corpus": documents.digest,
            "args": {"query": query, "k": k},
        }
        return run.effect("tool", request, search)

    sandbox: list[Any] = []

    def execute(code: str) -> dict[str, Any]:
        def cell() -> dict[str, Any]:
            from rar.sandbox import Sandbox, SandboxError

            try:
                if not sandbox:
                    sandbox.append(Sandbox(run.workspace, seed=int(run.config.get("seed", 0))))
                result: dict[str, Any] = sandbox[0].run_cell(code).as_dict()
            except SandboxError as exc:  # no sandbox, no model-written code: a value, not a crash
                return {"status": "error", "variables": {},
                        "error": {"type": type(exc).__name__, "message": exc.message}}
            return result

        return run.effect("tool", {"name": "python", "version": "1", "args": {"code": code}}, cell)

    offline = model == DEFAULT_MODEL or model.startswith("planner:")
    try:
        orchestrator = Orchestrator(
            run,
            _client(run, model, thinking),
            research=research,
            execute=execute,
            mode=mode,
            max_steps=max_steps,
            fallback=(
                (lambda: _client(run, DEFAULT_MODEL))
                if planner_fallback == "rule-based" and not offline
                else None
            ),
            auditor=Client(auditor, run=run) if auditor else None,
        )
        outcome = orchestrator.answer(question)
    finally:
        for box in sandbox:
            box.close()
    run.outcome_status = (
        RunStatus.COMPLETED_WITH_WARNINGS if outcome.warnings else RunStatus.COMPLETED
    )
    return {
        **outcome.result,
        "corpus_skipped": [s.model_dump(mode="json") for s in documents.skipped],
    }


@dataclass(frozen=True)
class ScienceResult:
    """A finished science run: its answer, evidence, audit and status."""

    run_id: str
    status: str
    answer: str
    anchors: list[dict[str, Any]] = field(default_factory=list)
    audit: dict[str, Any] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    confidence: float | None = None
    uncertainty: str = ""
    warnings: list[str] = field(default_factory=list)
    argumentation: dict[str, Any] | None = None
    corpus_skipped: list[dict[str, Any]] = field(default_factory=list)
    planner_fallback: dict[str, Any] | None = None  # the model was unavailable: who planned
    rejected: list[dict[str, Any]] = field(default_factory=list)  # claims the audit removed
    executions: int = 0  # sandbox cells run

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "answer": self.answer,
            "anchors": self.anchors,
            "audit": self.audit,
            "claims": self.claims,
            "confidence": self.confidence,
            "uncertainty": self.uncertainty,
            "warnings": self.warnings,
            "argumentation": self.argumentation,
            "corpus_skipped": self.corpus_skipped,
            "planner_fallback": self.planner_fallback,
            "rejected": self.rejected,
            "executions": self.executions,
        }

    def _repr_markdown_(self) -> str:
        lines = [self.answer, "", "| # | source | location | relevance |", "|---|---|---|---|"]
        for number, anchor in enumerate(self.anchors, start=1):
            lines.append(
                f"| {number} | {anchor.get('doc_title')} | {anchor.get('location')} | "
                f"{float(anchor.get('relevance_score', 0)):.2f} |"
            )
        passed = self.audit.get("passed")
        lines += [
            "",
            f"*Run `{self.run_id}` · {self.status} · audit "
            f"{'passed' if passed else 'did not pass'}*",
        ]
        return "\n".join(lines)


def ask_question(
    question: str,
    *,
    mode: str = "owl_lite",
    corpus: str | Path = "demo",
    model: str = DEFAULT_MODEL,
    seed: int = 0,
    max_steps: int = 12,
    planner_fallback: str = "rule-based",
    thinking: str | None = None,
    auditor: str | None = None,
    store: Store | str | Path | None = None,
    tags: dict[str, str] | None = None,
    run_id: str | None = None,
) -> ScienceResult:
    """Record a science run that answers ``question`` over ``corpus``; return its result.

    ``model``: ``planner:rule-based`` (offline, the default), a profile, ``provider:model``, or
    ``"auto"``: a profile of the mode's category (``s`` for owl_lite; ``l``, else ``xl``, else
    ``m`` for owl_dl and owl_full; see :mod:`rar.science.planner_model`).

    ``thinking``: the planner model's thinking level, ``minimal``, ``low``, ``medium``, ``high``
    or ``off`` (default: the mode's, minimal for owl_lite and high otherwise), sent as its
    ``reasoning_effort`` and recorded in the run's inputs and config.

    ``auditor``: a model (profile or ``provider:model``) that reviews each draft as well as the
    rule checks, answering in the AuditSchema (see :mod:`rar.science.model_auditor`); None
    (the default) audits with the rules alone.

    ``planner_fallback``: when the planner model is unavailable after its retries (connection
    refused, 5xx, rate limits), ``"rule-based"`` (the default) hands the planning over to the
    offline rule-based planner — recorded as a ``fallback`` event and named in the answer and
    the warnings — and ``"none"`` lets the run fail.

    ``tags`` are added to the manifest's (``kind: science`` stays); ``run_id`` records the run
    under that id instead of a fresh one (a study picks its cells' ids before running them).
    """
    from rar.errors import ConfigError
    from rar.replay.engine import execute

    if not question or not question.strip():
        raise ConfigError(
            "the question is empty; ask something, e.g. "
            "rar run 'How is activation energy determined?'"
        )
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    Mode(mode)
    if planner_fallback not in PLANNER_FALLBACKS:
        raise ConfigError(
            f"unknown planner fallback {planner_fallback!r}; choose one of "
            f"{', '.join(PLANNER_FALLBACKS)}"
        )
    level = default_thinking(mode) if thinking is None else check_thinking(thinking)
    chosen: dict[str, Any] = {}
    if model == AUTO:  # resolved once, here: the run records the profile it picked
        picked = auto_profile(mode, Profiles.load())
        model, chosen = picked.name, {"model_requested": AUTO, "model_category": picked.category}
    corpus_name = str(corpus)
    documents = Corpus.load(resolve_corpus(corpus_name))  # a bad corpus fails before recording
    planner: dict[str, Any] = {
        "provider": model.partition(":")[0],
        "model": model.partition(":")[2],
    }
    if not (model == DEFAULT_MODEL or model.startswith("planner:")):
        # an unknown model or a missing key fails before recording
        profile = Client(model).connect().profile
        if thinking is None and level != "off" and not takes_reasoning(profile):
            chosen["thinking_not_sent"] = (
                f"{profile.provider}:{profile.model} takes no reasoning setting; the mode's "
                f"level {level!r} is not sent (give --thinking to send one)"
            )
            level = "off"
        planner = {"provider": profile.provider, "model": profile.model}
        if profile.name != f"{profile.provider}:{profile.model}":
            planner["profile"] = profile.name
        if reasoning_effort(level) is not None:
            planner["reasoning_effort"] = reasoning_effort(level)
    auditor_models: list[dict[str, Any]] = []
    if auditor:
        checked = Client(auditor).connect().profile  # unknown or keyless: fail before recording
        auditor_models.append(
            {"provider": checked.provider, "model": checked.model, "role": "auditor"}
        )
    run = execute(
        science_entry,
        inputs={
            "question": question.strip(),
            "mode": mode,
            "corpus": corpus_name,
            "model": model,
            "max_steps": max_steps,
            "planner_fallback": planner_fallback,
            "thinking": level,
            **({"auditor": auditor} if auditor else {}),
        },
        goal=question.strip(),
        store=store if isinstance(store, Store) or store is None else Store(store),
        seed=seed,
        corpus_digest=documents.digest,
        config={
            "mode": mode,
            "model": model,
            **chosen,
            "thinking": level,
            "max_steps": max_steps,
            "planner_fallback": planner_fallback,
            "auditor": auditor or "rules",
        },
        models=[planner, *auditor_models],
        tools=[{"name": "search", "version": "2"}, {"name": "python", "version": "1"}],
        tags={**(tags or {}), "kind": "science"},
        run_id=run_id,
    )
    return result_of(run.store, run.id)


def result_of(store: Store, run_id: str) -> ScienceResult:
    """The :class:`ScienceResult` of a recorded science run."""
    manifest = store.manifest(run_id)
    events = store.events(run_id)
    finished: dict[str, Any] = next(
        (e for e in reversed(events) if e["type"] == "run.finished"), {}
    )
    result = store.resolve_payload(finished.get("result")) or {}
    return ScienceResult(
        run_id=run_id,
        status=manifest.status.value,
        answer=str(result.get("answer", "")),
        anchors=list(result.get("anchors", [])),
        audit=dict(result.get("audit", {})),
        claims=list(result.get("claims", [])),
        confidence=result.get("confidence"),
        uncertainty=str(result.get("uncertainty", "")),
        warnings=list(result.get("warnings", [])),
        argumentation=result.get("argumentation"),
        corpus_skipped=list(result.get("corpus_skipped", [])),
        planner_fallback=result.get("planner_fallback"),
        rejected=list(result.get("rejected", [])),
        executions=int(result.get("executions") or 0),
    )
