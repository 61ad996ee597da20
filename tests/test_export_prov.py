"""``rar export RUN --format prov``: a recorded run as a W3C PROV document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rar.cli.export_cmd import export_command
from rar.demo import run_demo
from rar.export._record import ExportError
from rar.export.prov import NAMESPACE, export_prov, local
from rar.replay.engine import replay
from rar.store.store import Store

prov = pytest.importorskip("prov")
from prov.model import (  # noqa: E402
    ProvActivity,
    ProvAgent,
    ProvAssociation,
    ProvAttribution,
    ProvCommunication,
    ProvDelegation,
    ProvDerivation,
    ProvDocument,
    ProvEntity,
    ProvGeneration,
    ProvMembership,
    ProvStart,
    ProvUsage,
)

KISSINGER = "What activation energy do the Kissinger DSC data in the corpus give?"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from rar.science.runtime import ask_question

    root = tmp_path_factory.mktemp("export-prov") / "runs"
    store = Store(root, create=True)
    ids = {"demo": run_demo(store).id}
    ids["science"] = ask_question(KISSINGER, store=store).run_id
    ids["replay"] = str(replay(ids["demo"], store=store).replay_run)
    fork = replay(ids["science"], store=store, mode="fork", at=30, overrides={"seed": 5})
    ids["fork"] = str(fork.replay_run)
    texts = {name: export_prov(store, run_id) for name, run_id in ids.items()}
    docs = {name: ProvDocument.deserialize(content=text) for name, text in texts.items()}
    yield {"store": store, "ids": ids, "root": root, "texts": texts, "docs": docs}
    store.close()


def _records(doc: Any, kind: type) -> list[Any]:
    return list(doc.get_records(kind))


def _ids(doc: Any, kind: type) -> set[str]:
    return {str(record.identifier) for record in _records(doc, kind)}


def _relations(doc: Any, kind: type, arity: int = 2) -> set[tuple[str | None, ...]]:
    """Each relation of ``kind`` as the text of its first ``arity`` formal arguments (the
    third of an association is its plan, of a delegation its activity, of a start the
    starter)."""
    found = set()
    for record in _records(doc, kind):
        values = [value for _, value in record.formal_attributes][:arity]
        found.add(tuple(None if v is None else str(v) for v in values))
    return found


def _record(doc: Any, ident: str) -> Any:
    (found,) = doc.get_record(ident)
    return found


def _one(record: Any, attribute: str) -> Any:
    (value,) = record.get_attribute(attribute)
    return value


def _types(record: Any) -> set[str]:
    return {str(t) for t in record.get_asserted_types()}


def test_science_run_document(world: dict[str, Any]) -> None:
    store, run_id, doc = world["store"], world["ids"]["science"], world["docs"]["science"]
    manifest = store.manifest(run_id)
    run = local(run_id)

    activity = _record(doc, run)
    assert "rar:Run" in _types(activity)
    assert activity.get_startTime().isoformat().startswith(manifest.created_at[:19])
    assert activity.get_endTime().isoformat().startswith(manifest.finished_at[:19])
    assert _one(activity, "prov:label") == KISSINGER
    assert _one(activity, "rar:status") == "completed"

    # the agents of the science runtime, the model, the tools and RAR itself
    agents = _ids(doc, ProvAgent)
    for role in ("planner", "researcher", "executor", "auditor"):
        assert local(run_id, "agent", role) in agents
        assert "prov:SoftwareAgent" in _types(_record(doc, local(run_id, "agent", role)))
    model = local(run_id, "model", "planner:rule-based")
    assert model == f"rar:{run_id}.model.planner%3Arule-based"
    assert {model, local(run_id, "tool", "search"), local(run_id, "tool", "python")} <= agents
    rar = local(run_id, "rar")
    assert _one(_record(doc, rar), "rar:version") == manifest.environment["rar"]
    plan = local(run_id, "entrypoint")
    assert (run, rar, plan) in _relations(doc, ProvAssociation, 3)
    assert "prov:Plan" in _types(_record(doc, plan))
    assert (local(run_id, "agent", "planner"), rar, run) in _relations(doc, ProvDelegation, 3)

    # inputs used, the answer and the log generated
    entities = _ids(doc, ProvEntity)
    used = _relations(doc, ProvUsage)
    generated = _relations(doc, ProvGeneration)
    question = _record(doc, local(run_id, "input", "question"))
    assert _one(question, "prov:value") == KISSINGER
    assert _one(question, "rar:digest") == manifest.inputs["question"].digest
    assert (run, local(run_id, "input", "question")) in used
    assert (run, local(run_id, "corpus")) in used
    answer = local(run_id, "answer")
    assert (answer, run) in generated and (local(run_id, "log"), run) in generated
    finished = store.events(run_id)[-1]
    assert _one(_record(doc, answer), "rar:digest") == finished["result"]["digest"]
    assert "Ea = 125.12" in _one(_record(doc, answer), "prov:value")
    assert _one(_record(doc, local(run_id, "log")), "rar:head") == manifest.head

    # spans and effects as sub-activities, with their agents and times
    events = store.events(run_id)
    activities = _ids(doc, ProvActivity)
    informed = _relations(doc, ProvCommunication)
    associated = _relations(doc, ProvAssociation)
    spans = {e["span"]: e["seq"] for e in events if e["type"] == "span.start"}
    for event in events:
        if event["type"] == "effect":
            effect = local(run_id, event["seq"])
            assert effect in activities
            outer = spans.get(event["span"])
            assert (effect, local(run_id, outer) if outer else run) in informed
            if "result" in event:
                result = local(run_id, event["seq"], "result")
                assert result in entities and (result, effect) in generated
                digest = _one(_record(doc, result), "rar:digest")
                assert digest == event["result"]["digest"]
            if event["kind"] == "llm":
                assert (effect, model) in associated
            if event["kind"] == "tool":
                request = store.resolve_payload(event["request"])
                assert (effect, local(run_id, "tool", request["name"])) in associated
                if request["name"] == "search":
                    assert (effect, local(run_id, "corpus")) in used
    researcher = next(e for e in events if e["type"] == "span.start" and e["agent"] == "researcher")
    span = _record(doc, local(run_id, researcher["seq"]))
    assert span.get_startTime() is not None and span.get_endTime() is not None
    assert (local(run_id, researcher["seq"]), local(run_id, "agent", "researcher")) in associated
    outer = local(run_id, spans[researcher["span"].rpartition("/")[0]])
    assert (local(run_id, researcher["seq"]), None, outer) in _relations(doc, ProvStart, 3)


def test_evidence_passages_and_the_answer_citing_them(world: dict[str, Any]) -> None:
    store, run_id, doc = world["store"], world["ids"]["science"], world["docs"]["science"]
    events = store.events(run_id)
    evidence = next(e for e in events if e["type"] == "evidence")
    collection = local(run_id, evidence["seq"])
    assert "prov:Collection" in _types(_record(doc, collection))
    anchors = store.resolve_payload(evidence["anchors"])
    members = {m for c, m in _relations(doc, ProvMembership) if c == collection}
    assert members == {local(run_id, evidence["seq"], n) for n in range(1, len(anchors) + 1)}
    first = _record(doc, local(run_id, evidence["seq"], 1))
    assert _one(first, "rar:contentHash") == anchors[0]["content_hash"]
    assert _one(first, "rar:doc") == anchors[0]["doc_id"]
    derived = _relations(doc, ProvDerivation)
    assert (local(run_id, evidence["seq"], 1), local(run_id, "corpus")) in derived  # its source

    answer = local(run_id, "answer")
    cited = {used for generated, used in derived if generated == answer}
    result = store.resolve_payload(events[-1]["result"])
    assert len(cited) == len({a["content_hash"] for a in result["anchors"]}) > 0
    hashes = {_one(_record(doc, str(p)), "rar:contentHash") for p in cited}
    assert hashes == {a["content_hash"] for a in result["anchors"]}


def test_artifacts_and_messages(world: dict[str, Any]) -> None:
    store, run_id, doc = world["store"], world["ids"]["science"], world["docs"]["science"]
    events = store.events(run_id)
    artifact = next(e for e in events if e["type"] == "artifact")
    entity = _record(doc, local(run_id, artifact["seq"]))
    assert _one(entity, "prov:label") == "figures/kissinger-fit-1.svg"
    assert _one(entity, "rar:digest") == artifact["digest"]
    span = next(e for e in events if e["type"] == "span.start" and e["span"] == artifact["span"])
    assert (local(run_id, artifact["seq"]), local(run_id, span["seq"])) in _relations(
        doc, ProvGeneration
    )
    attributed = _relations(doc, ProvAttribution)
    assert (local(run_id, artifact["seq"]), local(run_id, "agent", "executor")) in attributed
    message = next(e for e in events if e["type"] == "message")
    record = _record(doc, local(run_id, message["seq"]))
    assert _one(record, "rar:performative") == message["performative"]
    sender = local(run_id, "agent", message["sender"])
    assert (local(run_id, message["seq"]), sender) in attributed


def test_demo_run_document(world: dict[str, Any]) -> None:
    run_id, doc = world["ids"]["demo"], world["docs"]["demo"]
    agents = _ids(doc, ProvAgent)
    assert local(run_id, "agent", "assistant") in agents
    assert local(run_id, "model", "scripted:demo") in agents
    assert local(run_id, "tool", "calculator") in agents
    answer = _record(doc, local(run_id, "answer"))
    assert "55.3 kJ/mol" in _one(answer, "prov:value")
    # no parent: nothing derived from another run
    assert all(str(e).startswith(f"rar:{run_id}") for e in _ids(doc, ProvEntity))


def test_identifiers_are_in_the_rar_namespace(world: dict[str, Any]) -> None:
    for name, doc in world["docs"].items():
        run_id = world["ids"][name]
        parent = world["store"].manifest(run_id).parent
        allowed = (f"rar:{run_id}",) + ((f"rar:{parent.run_id}",) if parent else ())
        assert [ns.uri for ns in doc.namespaces] == [NAMESPACE]
        for record in doc.get_records():
            if record.identifier is not None:
                assert str(record.identifier).startswith(allowed), (name, record.identifier)
                assert record.identifier.uri.startswith(NAMESPACE)


@pytest.mark.parametrize(("name", "source"), [("replay", "demo"), ("fork", "science")])
def test_replay_and_branch_are_derived_from_their_parent(
    world: dict[str, Any], name: str, source: str
) -> None:
    store, doc = world["store"], world["docs"][name]
    run_id, parent_id = world["ids"][name], world["ids"][source]
    run, parent = local(run_id), local(parent_id)
    derived = _relations(doc, ProvDerivation)
    assert (local(run_id, "answer"), local(parent_id, "answer")) in derived
    assert (local(run_id, "log"), local(parent_id, "log")) in derived
    assert (run, local(parent_id, "log")) in _relations(doc, ProvUsage)
    assert (run, parent) in _relations(doc, ProvCommunication)
    assert _one(_record(doc, local(parent_id, "log")), "rar:head") == store.manifest(parent_id).head
    # every effect served from the parent's record: its result derived from the parent's
    seq = store.manifest(run_id).parent.seq
    served = {
        (u, g)
        for g, u in derived
        if g and g.endswith(".result") and u and u.startswith(f"rar:{parent_id}.")
    }
    parent_effects = [
        e for e in store.events(parent_id) if e["type"] == "effect" and e["seq"] <= seq
    ]
    assert served and len(served) <= len(parent_effects)
    assert {u for u, _ in served} <= {local(parent_id, e["seq"], "result") for e in parent_effects}
    if name == "replay":  # a strict replay is served every effect
        assert len(served) == len(parent_effects)
        assert (local(run_id, "answer"), local(parent_id, "answer")) in derived


def test_provn_reads_back_as_the_same_document(world: dict[str, Any]) -> None:
    store = world["store"]
    for name in ("science", "fork"):
        text = export_prov(store, world["ids"][name], fmt="provn")
        assert text.startswith("document\n") and text.endswith("endDocument\n")
        from_provn = prov.read(text, format="provn")
        assert from_provn == world["docs"][name]


def test_same_run_gives_the_same_bytes(world: dict[str, Any]) -> None:
    store = world["store"]
    for name, run_id in world["ids"].items():
        assert export_prov(store, run_id) == world["texts"][name]
        assert export_prov(store, run_id, fmt="provn") == export_prov(store, run_id, fmt="provn")


def test_same_bytes_in_another_process(world: dict[str, Any]) -> None:
    run_id = world["ids"]["fork"]
    for fmt in ("json", "provn"):
        done = subprocess.run(
            [sys.executable, "-m", "rar", "--store", str(world["root"]), "export", run_id,
             "--format", "prov", "--prov-format", fmt],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONHASHSEED": "4242"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == export_prov(world["store"], run_id, fmt=fmt)


# --- the command and bad input -----------------------------------------------------------------


def _invoke(world: dict[str, Any], *args: str) -> Any:
    return CliRunner().invoke(export_command, list(args), obj=str(world["root"]))


def test_cli_prints_prov_json(world: dict[str, Any]) -> None:
    result = _invoke(world, world["ids"]["demo"], "--format", "prov")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["prefix"] == {"rar": NAMESPACE}
    assert result.output == world["texts"]["demo"]


def test_cli_writes_provn_to_a_file(world: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "run.provn"
    result = _invoke(
        world, world["ids"]["science"][-8:], "--format", "prov", "--prov-format", "provn",
        "-o", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    assert prov.read(str(out), format="provn") == world["docs"]["science"]


def test_cli_bad_input(world: dict[str, Any], tmp_path: Path) -> None:
    unknown = _invoke(world, "no-such-run", "--format", "prov")
    assert unknown.exit_code == 2 and "no run matches 'no-such-run'" in unknown.output
    directory = _invoke(world, world["ids"]["demo"], "--format", "prov", "-o", str(tmp_path))
    assert directory.exit_code == 2 and "is a directory" in directory.output
    blocker = tmp_path / "file.txt"
    blocker.write_text("a file")
    under_file = _invoke(
        world, world["ids"]["demo"], "--format", "prov", "-o", str(blocker / "run.json")
    )
    assert under_file.exit_code == 2 and "cannot write" in under_file.output
    bad = _invoke(world, world["ids"]["demo"], "--format", "prov", "--prov-format", "xml")
    assert bad.exit_code == 2 and "Invalid value for '--prov-format'" in bad.output
    with pytest.raises(ExportError, match="unknown PROV format 'rdf'"):
        export_prov(world["store"], world["ids"]["demo"], fmt="rdf")


def test_missing_library_names_the_extra(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("prov", "prov.model", "prov.constants"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ExportError, match=r"pip install 'rar\[export\]'"):
        export_prov(world["store"], world["ids"]["demo"])
    result = _invoke(world, world["ids"]["demo"], "--format", "prov")
    assert result.exit_code == 2 and "pip install 'rar[export]'" in result.output


def test_a_run_still_being_written(tmp_path: Path) -> None:
    from rar.redaction import Redactor
    from rar.runtime.start import record

    store = Store(tmp_path / "runs", create=True)
    run = record("unfinished", store=store, seed=1, redactor=Redactor(env={}))
    try:
        run.effect("tool", {"name": "probe"}, lambda: {"content": "ok"})
        text = export_prov(store, run.id)
        doc = ProvDocument.deserialize(content=text)
        activity = _record(doc, local(run.id))
        assert activity.get_endTime() is None
        assert _one(activity, "rar:status") == "running"
        assert local(run.id, "answer") not in _ids(doc, ProvEntity)
        assert export_prov(store, run.id) == text
    finally:
        run.finish(result={"answer": "done"})
        store.close()
