"""Cassettes: one recorded run in a small, self-contained store directory, replayed strictly.

This module is the machinery behind the pytest plugin (:mod:`rar.testing.plugin`) and works
without pytest::

    from rar.testing import record_cassette, replay_cassette

    record_cassette("tests/golden/one_tool_call", my_agent, inputs={"question": "2 + 3?"})
    outcome = replay_cassette("tests/golden/one_tool_call", my_agent,
                              inputs={"question": "2 + 3?"}, workdir=tmp_dir)
    outcome.result, outcome.report

A cassette directory is a RAR store holding exactly one finished run, stripped of what a store
can rebuild (``index.sqlite``), of the writer's ``lock`` and of the run's (empty) workspace, plus
``cassette.json`` naming the run::

    <cassette>/
      cassette.json                {"format": "rar.cassette/1", "run_id": ..., ...}
      <run_id>/manifest.json
      <run_id>/events.jsonl
      blobs/packs/<run_id>.1.pack

Nothing in it depends on where it lives, so it replays from a fresh clone. Replays run in a
copy (``workdir``) and never touch the cassette. Keep cassettes byte-exact in version control:
``* -text`` in a ``.gitattributes`` next to them stops line-ending conversion, which would
break the record's hash chain.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rar._version import __version__
from rar.errors import UserError
from rar.redaction import Redactor
from rar.replay.engine import ReplayReport, entrypoint_name, execute, replay
from rar.replay.fields import field_differences
from rar.store.layout import EVENTS_NAME, MANIFEST_NAME
from rar.store.store import Store

CASSETTE_FORMAT = "rar.cassette/1"
CASSETTE_FILE = "cassette.json"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*")

Entrypoint = Callable[..., Any]


class CassetteError(UserError):
    """A cassette cannot be used: missing, damaged, or not a cassette."""


class CassetteMissingError(CassetteError):
    """No cassette at the path: record it first."""


class GoldenMismatchError(AssertionError):
    """The code no longer does what the cassette recorded (``report`` says where and why)."""

    def __init__(self, message: str, report: ReplayReport | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.report = report

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class GoldenResult:
    """A golden run: what the entrypoint returned when replayed against the cassette.

    ``result`` is the replayed function's return value; ``report`` the strict replay's
    :class:`~rar.replay.engine.ReplayReport` (always reproducible here: anything else is a
    :class:`GoldenMismatchError`); ``recorded`` is True when this call (re)wrote the cassette;
    ``error`` the exception the entrypoint raised (as the recorded run did), if any.
    """

    name: str
    path: Path
    run_id: str
    result: Any
    report: ReplayReport
    recorded: bool
    error: Exception | None = None


def check_name(name: str) -> str:
    """``name`` if it is a usable cassette name (relative, ``/``-separated, no ``..``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name.split("/"):
        raise CassetteError(
            f"cassette name {name!r} is not usable: use letters, digits, '_', '-', '.' and '/' "
            "between parts (no '..', no leading '/')"
        )
    return name


def safe_name(text: str) -> str:
    """A cassette name made from arbitrary text (a test id): unusable characters become '_'."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-/]+", "_", text).strip("/")
    parts = [p if p not in ("", ".", "..") else "_" for p in cleaned.split("/")]
    parts = [("_" + p) if p[0] in ".-" else p for p in parts]
    return "/".join(parts) or "_"


def cassette_exists(path: Path | str) -> bool:
    return (Path(path) / CASSETTE_FILE).is_file()


def read_cassette(path: Path | str) -> dict[str, Any]:
    """The cassette's ``cassette.json``; checks that the run it names is there."""
    path = Path(path)
    meta_path = path / CASSETTE_FILE
    if not meta_path.is_file():
        raise CassetteMissingError(f"no cassette at {path} (no {CASSETTE_FILE})", path=str(path))
    try:
        meta: dict[str, Any] = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CassetteError(f"{meta_path} is not readable JSON: {exc}", path=str(path)) from exc
    run_id = meta.get("run_id")
    if (
        meta.get("format") != CASSETTE_FORMAT
        or not isinstance(run_id, str)
        or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", run_id)
    ):
        raise CassetteError(
            f"{meta_path} is not a {CASSETTE_FORMAT} cassette description", path=str(path)
        )
    if not (path / run_id / MANIFEST_NAME).is_file() or not (path / run_id / EVENTS_NAME).is_file():
        raise CassetteError(
            f"cassette {path} names run {run_id}, but {run_id}/{MANIFEST_NAME} or "
            f"{run_id}/{EVENTS_NAME} is missing; record it again",
            path=str(path),
        )
    return meta


def record_cassette(
    path: Path | str,
    entrypoint: Entrypoint,
    *,
    inputs: Mapping[str, Any] | None = None,
    seed: int = 0,
    redactor: Redactor | None = None,
    name: str | None = None,
    check: bool = True,
    raise_error: bool = True,
    **record_options: Any,
) -> GoldenResult:
    """Record ``entrypoint(run, **inputs)`` into a new cassette at ``path`` (replacing one).

    The run is recorded into a staging store (not durable: no fsync), copied without what a
    store can rebuild, and, with ``check``, replayed strictly once before it replaces the old
    cassette: an entrypoint whose outcome is not a function of its recorded effects (it reads
    the clock or a random number around ``run``, say) is refused here rather than at the next
    test run. ``record_options`` go to :func:`rar.execute` (``goal``, ``tags``, ``models``, ...).
    Returns the checking replay's result (``report.replay_status == "not-replayed"`` without
    ``check``); the entrypoint's exception, if it raised, as for :func:`replay_cassette`.
    """
    path = Path(path)
    redactor = redactor if redactor is not None else Redactor(env={})
    for reserved in ("store", "durable"):
        if reserved in record_options:
            raise TypeError(f"record_cassette() chooses {reserved!r} itself")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rar-record-") as scratch:  # no user path in it
        staging = Store(Path(scratch) / "store", create=True)
        try:
            run_id = _record(staging, entrypoint, inputs, seed, redactor, record_options)
            status = staging.manifest(run_id).status.value
        finally:
            staging.close()
        fresh = Path(scratch) / "cassette"
        _copy_run(staging.root, fresh, run_id)
        meta = {
            "format": CASSETTE_FORMAT,
            "run_id": run_id,
            "entrypoint": entrypoint_name(entrypoint),
            "status": status,
            "recorded_with": f"rar {__version__}",
        }
        (fresh / CASSETTE_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        outcome: GoldenResult | None = None
        if check:
            outcome = _replay(
                fresh,
                entrypoint,
                inputs=inputs,
                workdir=Path(scratch) / "check",
                redactor=redactor,
                name=name or path.name,
                recording=True,
            )
        _install(fresh, path)
    if outcome is None:
        report = ReplayReport(
            source_run=run_id, replay_run=None, mode="strict", replay_status="not-replayed"
        )
        return GoldenResult(name or path.name, path, run_id, None, report, recorded=True)
    if raise_error and outcome.error is not None:
        raise outcome.error
    return GoldenResult(
        outcome.name,
        path,
        run_id,
        outcome.result,
        outcome.report,
        recorded=True,
        error=outcome.error,
    )


def _record(
    staging: Store,
    entrypoint: Entrypoint,
    inputs: Mapping[str, Any] | None,
    seed: int,
    redactor: Redactor,
    record_options: dict[str, Any],
) -> str:
    """Record the run into the staging store; its id (a failed run is a golden run too)."""
    try:
        run = execute(
            entrypoint,
            inputs=dict(inputs or {}),
            store=staging,
            seed=seed,
            durable=False,
            redactor=redactor,
            **record_options,
        )
    except Exception:
        recorded = staging.run_ids()  # the error is in the record; the replay raises it again
        if len(recorded) != 1 or not staging.manifest(recorded[0]).status.finished:
            raise
        return recorded[0]
    return run.id


def replay_cassette(
    path: Path | str,
    entrypoint: Entrypoint,
    *,
    inputs: Mapping[str, Any] | None = None,
    workdir: Path | str | None = None,
    redactor: Redactor | None = None,
    name: str | None = None,
    raise_error: bool = True,
) -> GoldenResult:
    """Replay the cassette at ``path`` strictly with ``entrypoint``; return its result.

    The cassette is copied into ``workdir`` (a temporary directory when ``None``, removed
    afterwards) and replayed there. ``inputs``, when given, must equal the recorded inputs.
    Raises :class:`CassetteMissingError` / :class:`CassetteError` when there is no usable
    cassette and :class:`GoldenMismatchError` (an ``AssertionError``) when the replay is not
    reproducible. When the entrypoint raised (and the recorded run failed the same way), its
    exception is raised again, or, with ``raise_error=False``, returned as ``error``.
    """
    path = Path(path)
    outcome = _replay(
        path,
        entrypoint,
        inputs=inputs,
        workdir=workdir,
        redactor=redactor if redactor is not None else Redactor(env={}),
        name=name or path.name,
        recording=False,
    )
    if raise_error and outcome.error is not None:
        raise outcome.error
    return outcome


def _replay(
    path: Path,
    entrypoint: Entrypoint,
    *,
    inputs: Mapping[str, Any] | None,
    workdir: Path | str | None,
    redactor: Redactor,
    name: str,
    recording: bool,
) -> GoldenResult:
    meta = read_cassette(path)
    run_id: str = meta["run_id"]
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="rar-replay-") as scratch:
            return _replay_copy(
                path, Path(scratch), entrypoint, run_id, inputs, redactor, name, recording
            )
    return _replay_copy(path, Path(workdir), entrypoint, run_id, inputs, redactor, name, recording)


def _replay_copy(
    path: Path,
    workdir: Path,
    entrypoint: Entrypoint,
    run_id: str,
    inputs: Mapping[str, Any] | None,
    redactor: Redactor,
    name: str,
    recording: bool,
) -> GoldenResult:
    from rar.replay.engine import ReplayRefusedError

    copy = workdir / "store"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(path, copy)
    store = Store(copy)
    try:
        _check_sound(store, run_id, name, path)
        if inputs is not None:
            _check_inputs(store, run_id, inputs, redactor, name, path)
        returned: list[Any] = []
        raised: list[Exception] = []

        def function(run: Any, **kwargs: Any) -> Any:
            try:
                value = entrypoint(run, **kwargs)
            except Exception as exc:
                raised.append(exc)
                raise
            returned.append(value)
            return value

        try:
            report = replay(
                run_id, store=store, mode="strict", function=function, redactor=redactor
            )
        except ReplayRefusedError as exc:
            raise CassetteError(
                f"cassette {name!r} ({path}) cannot be replayed: {exc.message}. If it was "
                "edited or damaged, restore it from version control or record it again.",
                path=str(path),
            ) from exc
    finally:
        store.close()
    # result_equal False with no divergence: it ended differently (an error where the record
    # has a result, or another error), which replay's status alone does not count
    if not report.reproducible or report.result_equal is False:
        raise GoldenMismatchError(
            describe_mismatch(report, name=name, path=path, recording=recording), report
        )
    return GoldenResult(
        name,
        path,
        run_id,
        returned[0] if returned else None,
        report,
        recorded=False,
        error=raised[0] if raised else None,
    )


def _check_sound(store: Store, run_id: str, name: str, path: Path) -> None:
    """Verify the whole record, blobs included (replay reads blobs lazily; cassettes are small)."""
    from rar.store.verify import verify_store

    check = verify_store(store, [run_id])
    if not check.ok:
        listed = "; ".join(f"{p.what}: {p.detail}" for p in check.problems[:5])
        raise CassetteError(
            f"cassette {name!r} ({path}) cannot be replayed: it fails verification ({listed}). "
            "If it was edited or damaged, restore it from version control or record it again.",
            path=str(path),
        )


def _check_inputs(
    store: Store, run_id: str, inputs: Mapping[str, Any], redactor: Redactor, name: str, path: Path
) -> None:
    """The test's inputs must be the recorded ones: replay would silently use the recorded."""
    import orjson

    manifest = store.manifest(run_id)
    recorded = {
        key: store.resolve_payload(ref.model_dump(exclude_unset=True))
        for key, ref in manifest.inputs.items()
    }
    try:
        given = orjson.loads(orjson.dumps(redactor.redact(dict(inputs))))
    except TypeError:
        given = redactor.redact(dict(inputs))
    differences = field_differences(recorded, given)
    if differences:
        lines = [
            f"golden run {name!r}: the inputs differ from the ones recorded in the "
            f"cassette ({path})",
            "  differences (recorded -> given):",
        ]
        lines += [_difference_line(d) for d in differences]
        lines.append(
            "If the new inputs are intended, record the cassette again: pytest --rar-record"
        )
        raise GoldenMismatchError("\n".join(lines))


def describe_mismatch(
    report: ReplayReport, *, name: str, path: Path | str, recording: bool = False
) -> str:
    """A readable account of a non-reproducible replay: where, what, and what else differs."""
    divergence = report.first_divergence or {}
    status = report.replay_status
    if not divergence and report.result_equal is False:
        status = "the run ended differently"
        divergence = {"reason": "the outcome differs from the recorded one (result or error)"}
    lines = [
        f"golden run {name!r} diverged from its cassette: {status}",
        f"  cassette: {path} (run {report.source_run})",
    ]
    if divergence:
        lines.append(f"  first divergence: {divergence.get('reason')}")
        for key in ("span", "ordinal", "kind"):
            if divergence.get(key) is not None:
                lines.append(f"    {key + ':':<9}{divergence[key]}")
        differences = divergence.get("differences") or []
        if differences:
            lines.append("    differences (expected -> actual):")
            lines += ["  " + _difference_line(d) for d in differences]
    if report.unconsumed:
        first = report.unconsumed[0]
        lines.append(
            f"  recorded effects never reached: {len(report.unconsumed)} (first: "
            f"{first.get('span')} #{first.get('ordinal')} {first.get('kind')})"
        )
    if report.error and report.error.get("type") != "NondeterminismError":
        lines.append(
            f"  the replay raised {report.error.get('type')}: {report.error.get('message')}"
        )
    lines.append(f"  effects served {report.served}, mismatched {report.mismatched}")
    if report.boundary:
        lines.append("  around the code (differs from the recording, may explain it):")
        for section, differences in report.boundary.items():
            for difference in differences:
                lines.append(f"    {section}.{_difference_line(difference).strip()}")
    if recording:
        lines.append(
            "The run was just recorded and does not replay: the entrypoint's outcome depends on "
            "something that does not pass through the run (the clock, randomness, global state)."
        )
    else:
        lines.append(
            "If the new behaviour is intended, record the cassette again: pytest --rar-record"
        )
    return "\n".join(lines)


def _difference_line(difference: Mapping[str, Any]) -> str:
    return (
        f"    {difference.get('field')}: {difference.get('expected')!r} -> "
        f"{difference.get('actual')!r}"
    )


def _copy_run(store_root: Path, target: Path, run_id: str) -> None:
    """Copy one run and its packs, leaving out the index, the lock and the empty workspace."""
    target.mkdir(parents=True)
    source_run = store_root / run_id
    for item in sorted(source_run.rglob("*")):
        relative = item.relative_to(source_run)
        if relative.parts[0] in ("lock", "workspace") or item.is_dir():
            continue
        destination = target / run_id / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(item, destination)
    packs = store_root / "blobs" / "packs"
    if packs.is_dir():
        (target / "blobs" / "packs").mkdir(parents=True)
        for pack in sorted(packs.iterdir()):
            if pack.is_file() and pack.stat().st_size > 0:
                shutil.copy2(pack, target / "blobs" / "packs" / pack.name)


def _install(fresh: Path, path: Path) -> None:
    """Put ``fresh`` in place of the cassette at ``path`` (renames; the old one goes last)."""
    old: Path | None = None
    if path.exists():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        path.rename(old)
    shutil.move(str(fresh), str(path))
    if old is not None:
        shutil.rmtree(old)
