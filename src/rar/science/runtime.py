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

from rar.agents import Mode
from rar.evidence import BM25Index, Corpus, index_directory, resolve_corpus
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.runtime.run import Run
from rar.science.orchestrator import Orchestrator
from rar.science.planner import RuleBasedPlanner
from rar.science.spec import DEFAULT_MODEL, MODES
from rar.science.tables import parse_tables
from rar.store.manifest import RunStatus
from rar.store.store import Store

ENTRYPOINT = "rar.science.runtime:science_entry"
# what the orchestrator does when the planner model is unavailable after its retries
PLANNER_FALLBACKS = ("rule-based", "none")


def _client(run: Run, model: str) -> Client:
    if model == DEFAULT_MODEL or model.startswith("planner:"):
        return Client(
            RuleBasedPlanner(model.partition(":")[2] or "rule-based"),
            run=run,
            profiles=Profiles(),
            cache=False,
        )
    return Client(model, run=run)


def science_entry(
    run: Run,
    question: str,
    mode: str = "owl_lite",
    corpus: str = "demo",
    model: str = DEFAULT_MODEL,
    max_steps: int = 12,
    planner_fallback: str = "rule-based",
) -> dict[str, Any]:
    """The entrypoint of a science run (recorded in its manifest, re-created by replay)."""
    documents = Corpus.load(resolve_corpus(corpus))
    index = BM25Index.build(documents, index_directory(run.store.root, documents))

    def research(query: str, k: int) -> dict[str, Any]:
        def search() -> dict[str, Any]:
            hits = index.search(query, k)
            tables = [
                {
                    "doc_id": hit.passage.doc_id,
                    "location": hit.passage.location,
                    "columns": list(table.columns),
                    "rows": [list(row) for row in table.rows],
                }
                for hit in hits
                for table in parse_tables(hit.passage.text)
            ]
            return {
                "anchors": [hit.anchor().model_dump(mode="json") for hit in hits],
                "tables": tables,
            }

        request = {
            "name": "search",
            "version": "1",
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
            _client(run, model),
            research=research,
            execute=execute,
            mode=mode,
            max_steps=max_steps,
            fallback=(
                (lambda: _client(run, DEFAULT_MODEL))
                if planner_fallback == "rule-based" and not offline
                else None
            ),
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
    store: Store | str | Path | None = None,
) -> ScienceResult:
    """Record a science run that answers ``question`` over ``corpus``; return its result.

    ``planner_fallback``: when the planner model is unavailable after its retries (connection
    refused, 5xx, rate limits), ``"rule-based"`` (the default) hands the planning over to the
    offline rule-based planner — recorded as a ``fallback`` event and named in the answer and
    the warnings — and ``"none"`` lets the run fail.
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
    corpus_name = str(corpus)
    documents = Corpus.load(resolve_corpus(corpus_name))  # a bad corpus fails before recording
    if not (model == DEFAULT_MODEL or model.startswith("planner:")):
        Client(model).connect()  # an unknown model or a missing key fails before recording
    run = execute(
        science_entry,
        inputs={
            "question": question.strip(),
            "mode": mode,
            "corpus": corpus_name,
            "model": model,
            "max_steps": max_steps,
            "planner_fallback": planner_fallback,
        },
        goal=question.strip(),
        store=store if isinstance(store, Store) or store is None else Store(store),
        seed=seed,
        corpus_digest=documents.digest,
        config={
            "mode": mode,
            "model": model,
            "max_steps": max_steps,
            "planner_fallback": planner_fallback,
        },
        models=[{"provider": model.partition(":")[0], "model": model.partition(":")[2]}],
        tools=[{"name": "search", "version": "1"}, {"name": "python", "version": "1"}],
        tags={"kind": "science"},
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
    )
