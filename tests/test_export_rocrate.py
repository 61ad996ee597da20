"""``rar export RUN --format rocrate -o DIR``: a Workflow Run Crate of a recorded run."""

from __future__ import annotations

import hashlib
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
from rar.export.rocrate import (
    METADATA_NAME,
    PROCESS_RUN_CRATE,
    WORKFLOW_RO_CRATE,
    WORKFLOW_RUN_CRATE,
    export_rocrate,
    metadata_text,
)
from rar.redaction import Redactor
from rar.replay.engine import execute, replay
from rar.runtime.start import record
from rar.store.store import Store

rocrate = pytest.importorskip("rocrate.rocrate")

KISSINGER = "What activation energy do the Kissinger DSC data in the corpus give?"
ORCID = "https://orcid.org/0000-0002-1825-0097"


def failing_entry(run: Any, prompt: str) -> None:
    run.effect("tool", {"name": "probe", "args": {"q": prompt}}, lambda: {"content": "ok"})
    raise RuntimeError("the agent broke")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from rar.science.runtime import ask_question

    root = tmp_path_factory.mktemp("export-rocrate") / "runs"
    store = Store(root, create=True)
    ids = {"demo": run_demo(store).id}
    ids["science"] = ask_question(KISSINGER, store=store).run_id
    ids["replay"] = str(replay(ids["demo"], store=store).replay_run)
    fork = replay(ids["science"], store=store, mode="fork", at=20, overrides={"seed": 3})
    ids["fork"] = str(fork.replay_run)
    with pytest.raises(RuntimeError):
        execute(failing_entry, inputs={"prompt": "Break."}, goal="Break.", store=store)
    ids["failed"] = next(r for r in store.run_ids() if r not in ids.values())
    run = record("signed run", store=store, seed=1, redactor=Redactor(env={}), authority=ORCID)
    with run:
        run.artifact("tables/x y.csv", b"x,y\n1,2\n", media_type="text/csv")
        run.finish(result={"answer": "two rows", "messages": [{"role": "user", "content": "hi"}]})
    ids["signed"] = run.id
    crates = root.parent / "crates"
    for name, run_id in ids.items():
        export_rocrate(store, run_id, crates / name)
    yield {"store": store, "ids": ids, "crates": crates, "root": root}
    store.close()


def _crate(world: dict[str, Any], name: str) -> Any:
    return rocrate.ROCrate(world["crates"] / name)


def _ids(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [
        item if isinstance(item, str) else item.id if hasattr(item, "id") else item["@id"]
        for item in items
    ]


def _action(crate: Any, run_id: str) -> Any:
    action = crate.get(f"#run-{run_id}")
    assert action is not None and action.type == "CreateAction"
    assert action.id in _ids(crate.root_dataset["mentions"])
    return action


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_science_run_crate(world: dict[str, Any]) -> None:
    store, run_id = world["store"], world["ids"]["science"]
    manifest = store.manifest(run_id)
    crate = _crate(world, "science")
    assert crate.version == "1.1"
    root = crate.root_dataset
    assert set(_ids(root["conformsTo"])) >= {PROCESS_RUN_CRATE, WORKFLOW_RUN_CRATE}
    assert WORKFLOW_RO_CRATE in _ids(crate.metadata["conformsTo"])
    assert root["datePublished"] == manifest.finished_at
    assert root["identifier"] == run_id

    workflow = crate.mainEntity
    assert workflow.id == "workflow.json"
    assert set(workflow.type) == {"File", "SoftwareSourceCode", "ComputationalWorkflow"}
    assert workflow["name"] == "rar.science.runtime:science_entry"
    assert workflow["programmingLanguage"]["name"] == "Python"
    assert workflow["softwareRequirements"]["softwareVersion"] == manifest.environment["rar"]
    parts = {part["name"]: part for part in workflow["hasPart"]}
    assert parts["planner:rule-based"].type == "SoftwareApplication"
    assert parts["search"]["softwareVersion"] == "2" and "python" in parts
    described = json.loads((world["crates"] / "science" / "workflow.json").read_text())
    assert described["entrypoint"] == manifest.entrypoint
    assert set(described["inputs"]) == set(manifest.inputs)

    action = _action(crate, run_id)
    assert action["name"] == KISSINGER
    assert action["startTime"] == manifest.created_at
    assert action["endTime"] == manifest.finished_at
    assert _ids(action["actionStatus"]) == ["http://schema.org/CompletedActionStatus"]
    assert action["instrument"] is workflow
    assert "agent" not in action.properties()  # nobody named in the manifest

    objects = {entity.id: entity for entity in action["object"]}
    question = objects["#input-question"]
    assert question.type == "PropertyValue" and question["value"] == KISSINGER
    assert question["identifier"] == manifest.inputs["question"].digest
    assert question["exampleOfWork"].id == "#param-question"
    assert "#param-question" in _ids(workflow["input"])
    assert crate.get("#param-question")["workExample"].id == "#input-question"
    assert objects["#input-max_steps"]["value"] == 12
    assert objects["#setting-seed"]["value"] == 0
    assert objects["#corpus"]["identifier"] == manifest.corpus_digest

    results = _ids(action["result"])
    assert results == [
        "result.json",
        "answer.md",
        "artifacts/figures/kissinger-fit-1.svg",
    ]
    finished = store.events(run_id)[-1]
    result = crate.get("result.json")
    assert result["sha256"] == finished["result"]["digest"].removeprefix("sha256:")
    assert result["exampleOfWork"].id == "#output-result"
    answer = (world["crates"] / "science" / "answer.md").read_text(encoding="utf-8")
    assert "Ea = 125.12" in answer and crate.get("answer.md")["encodingFormat"] == "text/markdown"
    figure = crate.get("artifacts/figures/kissinger-fit-1.svg")
    event = next(e for e in store.events(run_id) if e["type"] == "artifact")
    assert figure["sha256"] == event["digest"].removeprefix("sha256:")
    assert figure["encodingFormat"] == "image/svg+xml"
    assert figure["contentSize"] == str(event["size"])


def test_every_file_carries_its_digest_size_and_type(world: dict[str, Any]) -> None:
    for name in world["ids"]:
        crate, folder = _crate(world, name), world["crates"] / name
        files = [e for e in crate.get_entities() if "File" in e.type and e.id != METADATA_NAME]
        listed = {e.id for e in files}
        on_disk = {
            str(p.relative_to(folder)).replace(" ", "%20")
            for p in folder.rglob("*")
            if p.is_file() and p.name != METADATA_NAME
        }
        assert listed == on_disk, name
        for entity in files:
            path = folder / entity.id.replace("%20", " ")
            assert entity["sha256"] == _sha256(path), (name, entity.id)
            assert entity["identifier"] == f"sha256:{_sha256(path)}"
            assert entity["contentSize"] == str(path.stat().st_size)
            assert entity["encodingFormat"]
        assert set(_ids(crate.root_dataset["hasPart"])) == listed


def test_the_record_is_copied_byte_for_byte(world: dict[str, Any]) -> None:
    store, run_id = world["store"], world["ids"]["science"]
    folder = world["crates"] / "science"
    run_dir = store.run_dir(run_id)
    assert (folder / "events.jsonl").read_bytes() == (run_dir / "events.jsonl").read_bytes()
    assert (folder / "manifest.json").read_bytes() == (run_dir / "manifest.json").read_bytes()
    environment = json.loads((folder / "environment.json").read_text())
    assert environment == store.manifest(run_id).environment
    crate = _crate(world, "science")
    for trace in ("events.jsonl", "manifest.json", "environment.json"):
        assert crate.get(trace)["about"].id == f"#run-{run_id}"


def test_same_run_gives_the_same_bytes(world: dict[str, Any], tmp_path: Path) -> None:
    store, run_id = world["store"], world["ids"]["science"]
    export_rocrate(store, run_id, tmp_path / "again")
    first, second = world["crates"] / "science", tmp_path / "again"
    names = sorted(str(p.relative_to(first)) for p in first.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(second)) for p in second.rglob("*") if p.is_file())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert metadata_text(store, run_id) == (first / METADATA_NAME).read_text(encoding="utf-8")


def test_same_bytes_in_another_process(world: dict[str, Any], tmp_path: Path) -> None:
    """Another interpreter (another hash seed, another clock) writes the same metadata."""
    run_id = world["ids"]["fork"]
    out = tmp_path / "other"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(world["root"]), "export", run_id,
         "--format", "rocrate", "-o", str(out)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (out / METADATA_NAME).read_bytes() == (
        world["crates"] / "fork" / METADATA_NAME
    ).read_bytes()


def test_demo_run_crate(world: dict[str, Any]) -> None:
    run_id = world["ids"]["demo"]
    crate = _crate(world, "demo")
    action = _action(crate, run_id)
    assert _ids(action["result"]) == ["result.json", "answer.md"]
    answer = (world["crates"] / "demo" / "answer.md").read_text(encoding="utf-8")
    assert "55.3 kJ/mol" in answer
    parts = {part["name"]: part for part in crate.mainEntity["hasPart"]}
    assert parts["calculator"].type == "SoftwareApplication"
    assert parts["scripted:demo"]["applicationCategory"] == "language model"
    assert crate.mainEntity["name"] == "rar.demo:demo_agent"
    assert "#run-" + run_id == _ids(crate.root_dataset["mentions"])[0]
    assert len(_ids(crate.root_dataset["mentions"])) == 1  # no parent


@pytest.mark.parametrize(("name", "source", "word"), [("replay", "demo", "replay"),
                                                       ("fork", "science", "branch")])  # fmt: skip
def test_replay_and_branch_name_their_parent(
    world: dict[str, Any], name: str, source: str, word: str
) -> None:
    store, run_id, parent_id = world["store"], world["ids"][name], world["ids"][source]
    parent_manifest = store.manifest(parent_id)
    assert store.manifest(run_id).parent is not None
    crate = _crate(world, name)
    action = _action(crate, run_id)
    assert f"a {word} of run {parent_id}" in action["description"]

    parent = _action(crate, parent_id)  # also in the root's mentions
    assert parent["identifier"] == parent_id
    assert parent["instrument"] is crate.mainEntity
    assert parent["endTime"] == parent_manifest.finished_at
    parent_log, parent_result = parent["result"]
    assert parent_log.id == f"#run-{parent_id}-log"
    assert parent_log["identifier"] == parent_manifest.head
    parent_finished = store.events(parent_id)[-1]
    assert parent_result["identifier"] == parent_finished["result"]["digest"]

    # the replay consumed the parent's record; its outputs are derived from the parent's
    assert parent_log.id in _ids(action["object"])
    for output in ("result.json", "answer.md"):
        entity = crate.get(output)
        assert entity["isBasedOn"] is parent_result
        assert entity["prov:wasDerivedFrom"] is parent_result
    assert crate.get("events.jsonl")["isBasedOn"] is parent_log


def test_branch_records_its_new_seed(world: dict[str, Any]) -> None:
    crate = _crate(world, "fork")
    action = _action(crate, world["ids"]["fork"])
    settings = {e["name"]: e["value"] for e in action["object"] if e.id.startswith("#setting-")}
    assert settings["seed"] == 3
    assert "up to seq 20" in action["description"]


def test_failed_run(world: dict[str, Any]) -> None:
    run_id = world["ids"]["failed"]
    crate = _crate(world, "failed")
    action = _action(crate, run_id)
    assert _ids(action["actionStatus"]) == ["http://schema.org/FailedActionStatus"]
    assert action["error"] == "RuntimeError: the agent broke"
    assert "result" not in action.properties()
    assert crate.get("result.json") is None


def test_authority_is_the_agent_and_names_are_quoted(world: dict[str, Any]) -> None:
    crate = _crate(world, "signed")
    action = _action(crate, world["ids"]["signed"])
    assert action["agent"].id == ORCID and action["agent"].type == "Person"
    assert "artifacts/tables/x%20y.csv" in _ids(action["result"])
    assert (world["crates"] / "signed" / "artifacts" / "tables" / "x y.csv").read_bytes() == (
        b"x,y\n1,2\n"
    )
    # a result holding a conversation: the log seals its linked form, so it says so
    result = crate.get("result.json")
    assert "linked form" in result["description"]
    assert crate.get("workflow.json")["name"].endswith("(no entrypoint recorded)")


# --- the command and bad input -----------------------------------------------------------------


def _invoke(world: dict[str, Any], *args: str) -> Any:
    return CliRunner().invoke(export_command, list(args), obj=str(world["root"]))


def test_cli_writes_the_crate(world: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "deep" / "crate"
    result = _invoke(world, world["ids"]["demo"][-8:], "--format", "rocrate", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    assert (out / METADATA_NAME).read_bytes() == (
        world["crates"] / "demo" / METADATA_NAME
    ).read_bytes()
    assert sorted(p.name for p in tmp_path.joinpath("deep").iterdir()) == ["crate"]  # no scratch


def test_cli_into_an_empty_directory(world: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    result = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert (out / "answer.md").is_file()


def test_cli_refuses_a_non_empty_directory(world: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", str(out))
    assert result.exit_code == 2
    assert "is not empty" in result.output and "--force" in result.output
    # --force replaces crates only, never other files
    result = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", str(out), "--force")
    assert result.exit_code == 2
    assert "holds no ro-crate-metadata.json" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"


def test_cli_force_replaces_an_earlier_crate(world: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "crate"
    assert (
        _invoke(world, world["ids"]["science"], "--format", "rocrate", "-o", str(out)).exit_code
        == 0
    )
    assert (out / "artifacts").is_dir()
    again = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", str(out))
    assert again.exit_code == 2 and "is not empty" in again.output
    forced = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", str(out), "--force")
    assert forced.exit_code == 0, forced.output
    assert not (out / "artifacts").exists()  # the old crate is gone, not merged
    assert (
        json.loads((out / METADATA_NAME).read_text())["@graph"][0]["identifier"]
        == (world["ids"]["demo"])
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crate"]


def test_cli_bad_input(world: dict[str, Any], tmp_path: Path) -> None:
    unknown = _invoke(world, "no-such-run", "--format", "rocrate", "-o", str(tmp_path / "x"))
    assert unknown.exit_code == 2 and "no run matches 'no-such-run'" in unknown.output
    assert not (tmp_path / "x").exists()

    blocker = tmp_path / "file.txt"
    blocker.write_text("a file")
    under_file = _invoke(
        world, world["ids"]["demo"], "--format", "rocrate", "-o", str(blocker / "crate")
    )
    assert under_file.exit_code == 2 and "cannot write" in under_file.output
    assert "is not a directory" in under_file.output
    onto_file = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", str(blocker))
    assert onto_file.exit_code == 2 and "is not a directory" in onto_file.output
    assert blocker.read_text() == "a file"

    no_dir = _invoke(world, world["ids"]["demo"], "--format", "rocrate")
    assert no_dir.exit_code == 2 and "give -o DIR" in no_dir.output
    wrong = _invoke(
        world, world["ids"]["demo"], "--format", "rocrate", "-o", str(tmp_path / "y"),
        "--prov-format", "provn",
    )  # fmt: skip
    assert wrong.exit_code == 2 and "--prov-format applies to --format prov only" in wrong.output
    force = _invoke(world, world["ids"]["demo"], "--format", "trajectory", "--force")
    assert force.exit_code == 2 and "--force applies to --format rocrate only" in force.output


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_unwritable_place_is_reported(world: dict[str, Any]) -> None:
    result = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", "/proc/rar-crate")
    assert result.exit_code == 2 and "error: cannot write /proc/rar-crate" in result.output


def test_a_read_only_parent_is_reported(world: dict[str, Any], tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = _invoke(
            world, world["ids"]["demo"], "--format", "rocrate", "-o", str(locked / "crate")
        )
        assert result.exit_code == 2 and "cannot write" in result.output
    finally:
        locked.chmod(0o700)


def test_missing_library_names_the_extra(
    world: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "rocrate", None)
    monkeypatch.setitem(sys.modules, "rocrate.rocrate", None)
    with pytest.raises(ExportError, match=r"pip install 'rar\[export\]'"):
        export_rocrate(world["store"], world["ids"]["demo"], tmp_path / "x")
    result = _invoke(world, world["ids"]["demo"], "--format", "rocrate", "-o", str(tmp_path / "y"))
    assert result.exit_code == 2
    assert "pip install 'rar[export]'" in result.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_run_still_being_written(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs", create=True)
    run = record("unfinished", store=store, seed=1, redactor=Redactor(env={}))
    try:
        run.effect("tool", {"name": "probe"}, lambda: {"content": "ok"})
        report = export_rocrate(store, run.id, tmp_path / "crate")
        assert any("has not finished (running)" in w for w in report.warnings)
        crate = rocrate.ROCrate(tmp_path / "crate")
        action = _action(crate, run.id)
        assert _ids(action["actionStatus"]) == ["http://schema.org/ActiveActionStatus"]
        assert "endTime" not in action.properties() and "result" not in action.properties()
        assert crate.root_dataset["datePublished"] == store.events(run.id)[-1]["ts"]
        assert metadata_text(store, run.id) == (tmp_path / "crate" / METADATA_NAME).read_text()
    finally:
        run.finish(result={"answer": "done"})
        store.close()


def test_a_damaged_run_exports_with_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = Store(root, create=True)
    run_id = run_demo(store).id
    path = store.run_dir(run_id) / "manifest.json"
    path.write_text(path.read_text().replace('"goal": "Rate', '"goal": "Edited rate'))
    result = CliRunner().invoke(
        export_command, [run_id, "--format", "rocrate", "-o", str(tmp_path / "c")], obj=str(root)
    )
    assert result.exit_code == 0, result.output
    assert f"warning: run {run_id} does not verify" in result.output
    # the crate holds the record as it is, so `rar verify` on it finds the same edit
    assert b"Edited rate" in (tmp_path / "c" / "manifest.json").read_bytes()
    store.close()
