"""Starting a recorded run: :func:`record` creates the run directory, the manifest and the
first events, and returns the :class:`~rar.runtime.run.Run` context."""

from __future__ import annotations

import os
import random as _random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rar.errors import ConfigError, RunExistsError
from rar.hashing import MAX_SAFE_INTEGER
from rar.redaction import Redactor, default_redactor, redaction_policy
from rar.runtime.fingerprint import environment_fingerprint
from rar.runtime.run import Run
from rar.store.events import PayloadRef
from rar.store.manifest import Manifest, ParentRef, RunStatus
from rar.store.store import Store, new_run_id, utc_now_iso
from rar.store.writer import RunWriter


def _new_writer(
    store: Store, run_id: str | None, *, redactor: Redactor, durable: bool
) -> RunWriter:
    if run_id is not None:
        return RunWriter(store, run_id, redactor=redactor, durable=durable)
    for _ in range(8):  # a fresh id collides only by chance: draw again
        try:
            return RunWriter(store, new_run_id(), redactor=redactor, durable=durable)
        except RunExistsError:
            continue
    raise RunExistsError(new_run_id(), store.root)


_OFF = ("", "0", "false", "no", "off")  # RAR_OTEL values that leave telemetry off
_telemetry_warned = False


def _start_telemetry(run: Run, telemetry: Any) -> None:
    """Live spans for ``run`` (:mod:`rar.interop.otel`, imported only now). Asked for by
    ``RAR_OTEL`` alone (``telemetry == "env"``), a missing OpenTelemetry is a warning, once:
    the environment never breaks a run."""
    global _telemetry_warned
    try:
        from rar.interop.otel import _from_record

        _from_record(run, telemetry)
    except ConfigError as exc:
        if telemetry != "env":
            raise
        if not _telemetry_warned:
            _telemetry_warned = True
            import logging

            logging.getLogger("rar.runtime").warning(
                "RAR_OTEL is set, but %s; runs are recorded without live spans", exc.message
            )


MAX_SEED = MAX_SAFE_INTEGER  # what canonical JSON (RFC 8785) holds exactly


def check_seed(seed: object) -> int:
    """``seed`` as an int, or a :class:`ConfigError` saying what a seed may be."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not -MAX_SEED <= seed <= MAX_SEED:
        raise ConfigError(
            f"the seed {seed!r} is not a whole number between -{MAX_SEED} and {MAX_SEED}; "
            "give a smaller one (e.g. --seed 7)"
        )
    return seed


def record(
    goal: str | None = None,
    *,
    store: Store | str | Path | None = None,
    seed: int | None = None,
    inputs: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    workspace: str | Path | None = None,
    models: list[dict[str, Any]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    entrypoint: str | None = None,
    parent: tuple[str, int] | None = None,
    corpus_digest: str | None = None,
    secrets: list[str] | None = None,
    tags: Mapping[str, str] | None = None,
    authority: str | None = None,
    durable: bool = True,
    redactor: Redactor | None = None,
    run_id: str | None = None,
    telemetry: Any = None,
) -> Run:
    """Start recording a new run and return its :class:`Run` context.

    ``seed`` fixes the run's random streams and ids (a random seed is drawn and recorded when
    none is given). ``workspace`` is the directory snapshotted before and after the run (default:
    ``<run>/workspace``). ``durable=False`` skips fsync (faster, safe against process crashes,
    not against power loss).

    ``telemetry`` sends live OpenTelemetry spans of the run (GenAI conventions, see
    :mod:`rar.interop.otel`; needs ``pip install 'rar[otel]'``): ``True`` for the global tracer
    provider (or one set up from ``OTEL_EXPORTER_OTLP_*`` when none is), a ``TracerProvider``,
    or a :class:`rar.interop.otel.Telemetry` with options. Left unset, ``RAR_OTEL=1`` in the
    environment means ``True``. Without either, OpenTelemetry is not even imported.
    """
    if not isinstance(store, Store):
        store = Store(store)
    redactor = redactor or default_redactor()
    if seed is None:
        seed = int.from_bytes(_random.SystemRandom().randbytes(6), "big")  # nondeterminism-ok
    seed = check_seed(seed)
    writer = _new_writer(store, run_id, redactor=redactor, durable=durable)
    run_id = writer.run_id
    try:
        space = Path(workspace) if workspace is not None else writer.dir / "workspace"
        space.mkdir(parents=True, exist_ok=True)
        manifest = Manifest(
            run_id=run_id,
            created_at=utc_now_iso(),
            goal=redactor.redact_text(goal) if goal else goal,
            entrypoint=entrypoint,
            inputs={
                name: PayloadRef.model_validate(writer.plain_payload(value))
                for name, value in (inputs or {}).items()
            },
            models=redactor.redact(list(models or [])),
            tools=redactor.redact(list(tools or [])),
            environment=environment_fingerprint(),
            corpus_digest=corpus_digest,
            config=redactor.redact({"seed": seed, "durable": durable, **dict(config or {})}),
            authority=redactor.redact_text(authority) if authority else authority,
            redaction=redaction_policy(redactor),
            secrets=list(secrets or []),
            parent=ParentRef(run_id=parent[0], seq=parent[1]) if parent else None,
            workspace=str(space.resolve()),
            tags=redactor.redact(dict(tags or {})),
            status=RunStatus.RUNNING,
        )
        run = Run(writer, manifest, seed=seed, workspace=space)
        if telemetry is None and os.environ.get("RAR_OTEL", "").strip().lower() not in _OFF:
            telemetry = "env"
        if telemetry is not None and telemetry is not False:
            _start_telemetry(run, telemetry)
        run._begin()
    except BaseException:
        writer.abandon()
        raise
    return run
