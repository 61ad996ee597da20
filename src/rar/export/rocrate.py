"""A recorded run as an RO-Crate following the Workflow Run Crate profile (0.5).

``rar export RUN --format rocrate -o DIR`` writes a directory with ``ro-crate-metadata.json``
(RO-Crate 1.1, the version Workflow Run Crate 0.5 is written against) and these files:

* ``workflow.json`` — the main workflow (``File``, ``SoftwareSourceCode``,
  ``ComputationalWorkflow``): the entrypoint RAR called as ``entrypoint(run, **inputs)``, its
  parameter slots, models and tools. Its ``input`` / ``output`` are ``FormalParameter``\\ s;
* ``result.json`` — the run's result, as RFC 8785 canonical JSON (when the result holds no
  conversation, its sha256 is the result digest sealed in the log's ``run.finished`` event);
* ``answer.md`` — the answer text (``answer`` or ``text`` of the result);
* ``artifacts/<name>`` — the files the run saved, read from their re-hashed blobs;
* ``events.jsonl``, ``manifest.json`` — the run's log and manifest, byte for byte;
* ``environment.json`` — the environment fingerprint of the manifest.

Every file entity carries ``sha256`` (hex), ``identifier`` (``sha256:<hex>``), ``contentSize``
and ``encodingFormat``. The run is a ``CreateAction`` (``instrument``: the workflow; ``object``:
the inputs and settings as ``PropertyValue``\\ s and the corpus; ``result``: result, answer and
artifacts). A replay or branch names its parent: the parent run is a ``CreateAction`` too, whose
``result`` is its log and result; the new run's ``object`` includes that log (its effects were
served from it) and its result, answer and log are ``isBasedOn`` / ``prov:wasDerivedFrom`` the
parent's. ``datePublished`` is when the run finished, so the same run gives the same bytes.
The mapping is documented in docs/interop.md.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rar.errors import RarError
from rar.export._record import ExportError, RunRecord, missing_extra, read_run
from rar.hashing import canonical, digest_bytes
from rar.store.store import Store

RO_CRATE_VERSION = "1.1"
PROCESS_RUN_CRATE = "https://w3id.org/ro/wfrun/process/0.5"
WORKFLOW_RUN_CRATE = "https://w3id.org/ro/wfrun/workflow/0.5"
WORKFLOW_RO_CRATE = "https://w3id.org/workflowhub/workflow-ro-crate/1.0"
PROFILES = (
    (PROCESS_RUN_CRATE, "Process Run Crate", "0.5"),
    (WORKFLOW_RUN_CRATE, "Workflow Run Crate", "0.5"),
    (WORKFLOW_RO_CRATE, "Workflow RO-Crate", "1.0"),
)
FORMAL_PARAMETER = "https://bioschemas.org/profiles/FormalParameter/1.0-RELEASE"
METADATA_NAME = "ro-crate-metadata.json"
WORKFLOW_FORMAT = "rar.workflow/1"
LOG_MEDIA_TYPE = "application/x-ndjson"
EXTRA_TERMS = {
    "sha256": "http://schema.org/sha256",  # not in the RO-Crate 1.1 context
    "prov": "http://www.w3.org/ns/prov#",
}

ACTION_STATUS = {
    "completed": "CompletedActionStatus",
    "completed_with_warnings": "CompletedActionStatus",
    "failed": "FailedActionStatus",
    "interrupted": "FailedActionStatus",
    "waiting": "ActiveActionStatus",
    "running": "ActiveActionStatus",
    "pending": "PotentialActionStatus",
}
_Add = Callable[[str, dict[str, Any]], dict[str, str]]
"""Adds a contextual entity to the crate; returns its reference ``{"@id": ...}``."""
_REPLAY_WORDS = {"fork": "branch", "strict": "replay", "lenient": "lenient replay"}


@dataclass
class CrateReport:
    """What :func:`export_rocrate` wrote."""

    path: Path
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def export_rocrate(
    store: Store, run_id: str, out_dir: Path | str, *, force: bool = False
) -> CrateReport:
    """Write the crate of run ``run_id`` (a full id) to ``out_dir``.

    ``out_dir`` must not exist or be empty; ``force`` replaces a directory that already holds
    an RO-Crate (``ro-crate-metadata.json``), never one holding anything else.
    """
    _rocrate_module()
    target = Path(out_dir)
    _check_target(target, force)
    record = read_run(store, run_id, artifact_bytes=True)
    crate, files = build_crate(store, record)
    _write(crate, target)
    return CrateReport(target, files, list(record.warnings))


def metadata_text(store: Store, run_id: str) -> str:
    """The ``ro-crate-metadata.json`` text of run ``run_id``, without writing any file."""
    _rocrate_module()
    crate, _ = build_crate(store, read_run(store, run_id, artifact_bytes=True))
    return json.dumps(crate.metadata.generate(), indent=4, sort_keys=True, ensure_ascii=False)


def _rocrate_module() -> Any:
    try:
        import rocrate.rocrate
    except ImportError as exc:
        raise missing_extra("rocrate", exc) from None
    return rocrate.rocrate


# --- the crate -----------------------------------------------------------------------------------


def build_crate(store: Store, record: RunRecord) -> tuple[Any, list[str]]:
    """The crate (a ``rocrate.rocrate.ROCrate``) and the paths of its files, in order."""
    from rocrate.model.computerlanguage import ComputerLanguage
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    manifest = record.manifest
    run_id = record.run_id
    environment: dict[str, Any] = dict(manifest.environment or {})
    crate = ROCrate(version=RO_CRATE_VERSION)
    crate.metadata.extra_terms = dict(EXTRA_TERMS)
    files: list[str] = []

    def add(identifier: str, properties: dict[str, Any]) -> dict[str, str]:
        crate.add(ContextEntity(crate, identifier, properties=properties))
        return {"@id": identifier}

    def add_file(path: str, data: bytes, properties: dict[str, Any]) -> dict[str, str]:
        hexdigest = digest_bytes(data).removeprefix("sha256:")
        entity = crate.add_file(
            source=io.BytesIO(data),
            dest_path=path,
            properties={
                **properties,
                "contentSize": str(len(data)),
                "sha256": hexdigest,
                "identifier": f"sha256:{hexdigest}",
            },
        )
        files.append(path)
        return {"@id": entity.id}

    action_id = _action_id(run_id)
    action_ref = {"@id": action_id}

    # the root data entity
    goal = manifest.goal or ""
    root = crate.root_dataset
    root["name"] = f"RAR run {run_id}" + (f": {goal}" if goal else "")
    root["description"] = (
        f"The record of the RAR (Reproducible Agent Runtime) run {run_id}: its log, manifest, "
        "result, answer and artifacts, described as a Workflow Run Crate. `rar verify` checks "
        "the log's hash chain; `rar replay` re-executes the run against it."
    )
    root["identifier"] = run_id
    root["datePublished"] = record.published_at
    if manifest.tags:
        root["keywords"] = [f"{key}:{value}" for key, value in sorted(manifest.tags.items())]
    for profile_id, name, version in PROFILES:
        add(profile_id, {"@type": "CreativeWork", "name": name, "version": version})
    root["conformsTo"] = [{"@id": profile_id} for profile_id, _, _ in PROFILES]

    # software: the language, RAR and the key packages of the environment
    python = crate.add(
        ComputerLanguage(
            crate,
            identifier="#python",
            properties={
                "name": "Python",
                "identifier": {"@id": "https://www.python.org/"},
                "url": {"@id": "https://www.python.org/"},
                **({"version": str(environment["python"])} if environment.get("python") else {}),
            },
        )
    )
    packages = [
        add(
            f"https://pypi.org/project/{quote(str(name))}/{quote(str(version))}/",
            {"@type": "SoftwareApplication", "name": str(name), "softwareVersion": str(version)},
        )
        for name, version in sorted((environment.get("packages") or {}).items())
    ]
    rar_app = add(
        "#rar",
        {
            "@type": "SoftwareApplication",
            "name": "RAR (Reproducible Agent Runtime)",
            "description": "Records, replays, branches, diffs and audits AI agent runs; the "
            "engine that ran the workflow and wrote its record.",
            **({"softwareVersion": str(environment["rar"])} if environment.get("rar") else {}),
            **({"softwareRequirements": packages} if packages else {}),
        },
    )
    components = [
        add(
            _local_id("tool", str(tool.get("name", ""))),
            {
                "@type": "SoftwareApplication",
                "name": str(tool.get("name", "")),
                "description": "a tool the run's agents could call",
                **({"softwareVersion": str(tool["version"])} if tool.get("version") else {}),
            },
        )
        for tool in manifest.tools
        if tool.get("name")
    ]
    for model in manifest.models:
        name = _model_name(model)
        if not name:
            continue
        details = ", ".join(
            f"{key} {model[key]}"
            for key in ("role", "profile", "reasoning_effort")
            if model.get(key)
        )
        components.append(
            add(
                _local_id("model", name),
                {
                    "@type": "SoftwareApplication",
                    "name": name,
                    "applicationCategory": "language model",
                    "description": "a model the run was set up with"
                    + (f" ({details})" if details else ""),
                },
            )
        )
    components = list({ref["@id"]: ref for ref in components}.values())  # each once

    # the main workflow: the entrypoint, its parameter slots and outputs
    inputs_params: list[dict[str, str]] = []
    object_refs: list[dict[str, str]] = []
    for name, (value, digest) in record.inputs.items():
        param = add(
            _local_id("param", name),
            {
                "@type": "FormalParameter",
                "conformsTo": {"@id": FORMAL_PARAMETER},
                "name": name,
                "additionalType": _data_type(value),
                "valueRequired": True,
            },
        )
        inputs_params.append(param)
        object_refs.append(
            add(
                _local_id("input", name),
                {
                    "@type": "PropertyValue",
                    "name": name,
                    "value": _value(value),
                    "identifier": digest,
                    "exampleOfWork": param,
                },
            )
        )
    for key, value in sorted(manifest.config.items()):
        if key in record.inputs and record.inputs[key][0] == value:
            continue  # the same value as the input of that name, listed above
        object_refs.append(
            add(
                _local_id("setting", key),
                {
                    "@type": "PropertyValue",
                    "name": key,
                    "value": _value(value),
                    "description": "a setting of the run (its manifest's config)",
                },
            )
        )
    if manifest.corpus_digest:
        corpus_name = record.inputs.get("corpus", (None, ""))[0]
        object_refs.append(
            add(
                "#corpus",
                {
                    "@type": "CreativeWork",
                    "name": f"corpus {corpus_name}" if isinstance(corpus_name, str) else "corpus",
                    "description": "the documents the run searched, named by their digest",
                    "identifier": manifest.corpus_digest,
                },
            )
        )

    output_params: dict[str, dict[str, str]] = {}
    if record.finished is not None and record.result_digest:
        output_params["result"] = add(
            "#output-result",
            {
                "@type": "FormalParameter",
                "conformsTo": {"@id": FORMAL_PARAMETER},
                "name": "result",
                "additionalType": "File",
                "encodingFormat": "application/json",
                "description": "what the entrypoint returned",
            },
        )
        if record.answer is not None:
            output_params["answer"] = add(
                "#output-answer",
                {
                    "@type": "FormalParameter",
                    "conformsTo": {"@id": FORMAL_PARAMETER},
                    "name": "answer",
                    "additionalType": "File",
                    "encodingFormat": "text/markdown",
                    "description": "the answer text of the result",
                },
            )

    workflow_doc = {
        "format": WORKFLOW_FORMAT,
        "entrypoint": manifest.entrypoint,
        "call": "entrypoint(run, **inputs), inside a run recorded by RAR",
        "inputs": {name: _data_type(value) for name, (value, _) in record.inputs.items()},
        "models": manifest.models,
        "tools": manifest.tools,
        "rar": environment.get("rar"),
        "replay": f"rar replay {run_id}",
    }
    workflow_bytes = (json.dumps(workflow_doc, indent=2, ensure_ascii=False) + "\n").encode()
    workflow_hex = digest_bytes(workflow_bytes).removeprefix("sha256:")
    workflow = crate.add_workflow(
        source=io.BytesIO(workflow_bytes),
        dest_path="workflow.json",
        main=True,
        lang=python,
        properties={
            "name": manifest.entrypoint or f"RAR run {run_id} (no entrypoint recorded)",
            "description": (
                f"The Python callable {manifest.entrypoint} that RAR called with the run and "
                "its inputs."
                if manifest.entrypoint
                else "The run was recorded without naming its code (no entrypoint)."
            ),
            "encodingFormat": "application/json",
            "contentSize": str(len(workflow_bytes)),
            "sha256": workflow_hex,
            "identifier": f"sha256:{workflow_hex}",
            **({"version": str(environment["rar"])} if environment.get("rar") else {}),
            "softwareRequirements": rar_app,
            **({"hasPart": components} if components else {}),
            **({"input": inputs_params} if inputs_params else {}),
            **({"output": list(output_params.values())} if output_params else {}),
        },
    )
    files.append("workflow.json")
    for name in record.inputs:
        crate.get(_local_id("param", name))["workExample"] = {"@id": _local_id("input", name)}

    # the parent of a replay or a branch
    parent = _parent(store, record, add, {"@id": workflow.id})

    # outputs
    results: list[dict[str, str]] = []
    if "result" in output_params:
        data = canonical(record.result)
        sealed = digest_bytes(data) == record.result_digest
        results.append(
            add_file(
                "result.json",
                data,
                {
                    "name": "result",
                    "description": (
                        "The run's result as RFC 8785 canonical JSON; its digest is the one "
                        "sealed in the log's run.finished event."
                        if sealed
                        else "The run's result as RFC 8785 canonical JSON (the log seals the "
                        f"digest of its linked form, {record.result_digest})."
                    ),
                    "encodingFormat": "application/json",
                    "exampleOfWork": output_params["result"],
                    "dateCreated": record.ended_at or record.published_at,
                    **_derived(parent, "result"),
                },
            )
        )
        crate.get("#output-result")["workExample"] = results[-1]
    if "answer" in output_params and record.answer is not None:
        text = record.answer if record.answer.endswith("\n") else record.answer + "\n"
        results.append(
            add_file(
                "answer.md",
                text.encode("utf-8"),
                {
                    "name": "answer",
                    "description": "The answer text of the run's result.",
                    "encodingFormat": "text/markdown",
                    "exampleOfWork": output_params["answer"],
                    "dateCreated": record.ended_at or record.published_at,
                    **_derived(parent, "result"),
                },
            )
        )
        crate.get("#output-answer")["workExample"] = results[-1]
    for artifact in record.artifacts:
        if artifact.data is None:
            continue
        results.append(
            add_file(
                f"artifacts/{artifact.name}",
                artifact.data,
                {
                    "name": artifact.name,
                    "description": f"A file the run saved (event {artifact.seq}"
                    + (f", by {artifact.agent}" if artifact.agent else "")
                    + ").",
                    "encodingFormat": artifact.media_type,
                    "dateCreated": artifact.ts,
                },
            )
        )

    # the record itself: traces about the action
    run_dir = store.run_dir(run_id)
    log_bytes = _log_bytes(run_dir / "events.jsonl", len(record.events))
    add_file(
        "events.jsonl",
        log_bytes,
        {
            "name": "events.jsonl",
            "description": f"The run's log: {len(record.events)} events, one RFC 8785 JSON "
            "object per line, hash-chained (see RAR's docs/store-format.md). Payload blobs "
            "stay in the store.",
            "encodingFormat": LOG_MEDIA_TYPE,
            "about": action_ref,
            **_derived(parent, "log"),
        },
    )
    add_file(
        "manifest.json",
        _read(run_dir / "manifest.json"),
        {
            "name": "manifest.json",
            "description": "The run's manifest (format rar.run/1): goal, inputs, models, tools, "
            "environment, config, parent and final status.",
            "encodingFormat": "application/json",
            "about": action_ref,
        },
    )
    environment_bytes = (
        json.dumps(environment, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    ).encode()
    add_file(
        "environment.json",
        environment_bytes,
        {
            "name": "environment fingerprint",
            "description": "Where the run ran: Python, platform, RAR and key package versions, a "
            "digest over all installed distributions, the git commit and dirty flag.",
            "encodingFormat": "application/json",
            "about": action_ref,
        },
    )

    # the run
    if parent is not None:
        object_refs.append(parent["log"])
    action: dict[str, Any] = {
        "@type": "CreateAction",
        "name": goal or f"RAR run {run_id}",
        "description": _action_description(record),
        "identifier": run_id,
        "instrument": {"@id": workflow.id},
        "startTime": record.started_at,
        "actionStatus": {
            "@id": f"http://schema.org/{ACTION_STATUS.get(record.status, 'FailedActionStatus')}"
        },
    }
    if record.ended_at and record.status not in ("running", "pending", "interrupted"):
        action["endTime"] = record.ended_at
    error = _error(record)
    if error:
        action["error"] = error
    authority = _authority(manifest.authority, add)
    if authority is not None:
        action["agent"] = authority
    if object_refs:
        action["object"] = object_refs
    if results:
        action["result"] = results
    add(action_id, action)
    root["mentions"] = [action_ref] + ([parent["action"]] if parent is not None else [])
    return crate, files


def _action_id(run_id: str) -> str:
    return f"#run-{run_id}"


def _local_id(kind: str, name: str) -> str:
    return f"#{kind}-{quote(name, safe='')}"


def _model_name(model: dict[str, Any]) -> str:
    provider, name = model.get("provider"), model.get("model")
    if provider and name:
        return f"{provider}:{name}"
    return str(name or provider or "")


def _data_type(value: Any) -> str:
    """The schema.org data type a parameter's value has (``PropertyValue`` for structures)."""
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Integer"
    if isinstance(value, float):
        return "Float"
    if isinstance(value, str):
        return "Text"
    return "PropertyValue"


def _value(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _error(record: RunRecord) -> str | None:
    if record.status == "interrupted":
        return "the run's writer stopped before the run finished"
    error = (record.finished or {}).get("error")
    if record.status == "failed" and isinstance(error, dict):
        kind, message = error.get("type"), error.get("message")
        return f"{kind}: {message}" if kind and message else str(kind or message or "failed")
    if record.status == "failed":
        return "the run failed"
    return None


def _action_description(record: RunRecord) -> str:
    manifest = record.manifest
    parts = [f"RAR run {record.run_id}"]
    if manifest.entrypoint:
        parts.append(f"of {manifest.entrypoint}")
    text = " ".join(parts) + f"; status {record.status}"
    seed = manifest.config.get("seed")
    if seed is not None:
        text += f"; seed {seed}"
    stats = manifest.stats or {}
    effects = stats.get("effects")
    if isinstance(effects, dict) and effects:
        text += "; effects " + ", ".join(f"{k} {v}" for k, v in sorted(effects.items()))
    if manifest.parent is not None:
        mode = manifest.tags.get("replay_mode", "")
        word = _REPLAY_WORDS.get(mode, "replay")
        text += (
            f"; a {word} of run {manifest.parent.run_id}: its events up to seq "
            f"{manifest.parent.seq} were served from that run's record"
        )
    return text + "."


def _authority(authority: str | None, add: _Add) -> dict[str, str] | None:
    """The person or organisation who started the run, when the manifest names one."""
    if not authority:
        return None
    if authority.startswith("https://ror.org/"):
        return add(authority, {"@type": "Organization", "name": authority})
    if authority.startswith(("https://orcid.org/", "http://orcid.org/")):
        return add(authority, {"@type": "Person", "name": authority})
    return add("#authority", {"@type": "Person", "name": authority})


def _parent(
    store: Store, record: RunRecord, add: _Add, workflow: dict[str, str]
) -> dict[str, dict[str, str]] | None:
    """The parent run of a replay or a branch as a CreateAction with its log and result."""
    reference = record.manifest.parent
    if reference is None:
        return None
    parent_id = reference.run_id
    action: dict[str, Any] = {
        "@type": "CreateAction",
        "name": f"RAR run {parent_id} (the run this one was replayed from)",
        "identifier": parent_id,
        "instrument": workflow,
    }
    log: dict[str, Any] = {
        "@type": "CreativeWork",
        "name": f"the log of run {parent_id}",
        "description": f"The record of run {parent_id}; run {record.run_id} was served its "
        f"effects from events 1..{reference.seq} of it.",
        "encodingFormat": LOG_MEDIA_TYPE,
    }
    result: dict[str, Any] = {"@type": "CreativeWork", "name": f"the result of run {parent_id}"}
    try:
        manifest = store.manifest(parent_id)
        events = store.events(parent_id)
    except RarError as exc:
        record.warnings.append(f"the parent run {parent_id} cannot be read: {exc.message}")
        manifest, events = None, []
    if manifest is not None:
        if manifest.goal:
            action["name"] = manifest.goal
        action["startTime"] = manifest.created_at
        if manifest.finished_at:
            action["endTime"] = manifest.finished_at
        status = manifest.status.value
        action["actionStatus"] = {
            "@id": f"http://schema.org/{ACTION_STATUS.get(status, 'FailedActionStatus')}"
        }
        if manifest.head:
            log["identifier"] = manifest.head
    finished = next((e for e in reversed(events) if e.get("type") == "run.finished"), None)
    if finished is not None and isinstance(finished.get("result"), dict):
        result["identifier"] = str(finished["result"].get("digest"))
    log_ref = add(f"{_action_id(parent_id)}-log", log)
    result_ref = add(f"{_action_id(parent_id)}-result", result)
    action["result"] = [log_ref, result_ref]
    return {"action": add(_action_id(parent_id), action), "log": log_ref, "result": result_ref}


def _derived(parent: dict[str, dict[str, str]] | None, what: str) -> dict[str, Any]:
    if parent is None:
        return {}
    return {"isBasedOn": parent[what], "prov:wasDerivedFrom": parent[what]}


def _read(path: Path) -> bytes:
    from rar.store._fs import read_regular

    try:
        return read_regular(path)
    except OSError as exc:
        raise ExportError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _log_bytes(path: Path, count: int) -> bytes:
    """The first ``count`` lines of the log (the ones read as events: a run still being written
    may have more by now)."""
    data = _read(path)
    end = 0
    for _ in range(count):
        found = data.find(b"\n", end)
        if found < 0:
            return data
        end = found + 1
    return data[:end]


# --- writing -------------------------------------------------------------------------------------


def _check_target(target: Path, force: bool) -> None:
    if target.is_symlink():
        raise ExportError(f"{target} is a symbolic link; give the directory itself")
    if not target.exists():
        return
    if not target.is_dir():
        raise ExportError(f"{target} exists and is not a directory; give a new directory")
    try:
        empty = not any(target.iterdir())
    except OSError as exc:
        raise ExportError(f"cannot read {target}: {exc.strerror or exc}") from exc
    if empty:
        return
    if not force:
        raise ExportError(
            f"{target} is not empty; give a new or empty directory, or --force to replace an "
            "RO-Crate exported there before"
        )
    if not (target / METADATA_NAME).is_file():
        raise ExportError(
            f"{target} is not empty and holds no {METADATA_NAME}: --force replaces an RO-Crate "
            "only, never other files"
        )


def _write(crate: Any, target: Path) -> None:
    """Write the crate next to ``target`` and move it in place: never a half-written crate."""
    parent = target.absolute().parent
    above = next((p for p in [parent, *parent.parents] if p.exists() or p.is_symlink()), None)
    if above is not None and not above.is_dir():
        raise ExportError(f"cannot write {target}: {above} is not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        scratch = _scratch(parent, target.name)
    except OSError as exc:
        raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from exc
    old: Path | None = None
    try:
        crate.write(scratch)
        if target.exists():
            if any(target.iterdir()):  # a crate replaced with --force
                old = _scratch(parent, target.name, create=False)
                target.rename(old)
            else:
                target.rmdir()
        scratch.rename(target)
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        if old is not None and not target.exists():
            old.rename(target)
            old = None
        raise ExportError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _scratch(parent: Path, name: str, *, create: bool = True) -> Path:
    for number in range(1000):
        path = parent / f".{name}.rar-export-{number}"
        if path.exists() or path.is_symlink():
            continue
        if create:
            path.mkdir()
        return path
    raise OSError(f"no free scratch directory name next to {parent / name}")
