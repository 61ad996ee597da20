"""A run's displayed status: ``interrupted`` only for a run no writer holds and never sealed."""

from __future__ import annotations

from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store


def test_a_row_read_just_before_the_run_finished_shows_how_it_ended(store: Store) -> None:
    run = record("finishes while its row is read", store=store, redactor=Redactor(env={}))
    run.effect("tool", {"name": "x"}, lambda: 1)
    row = store.row_from_files(run.id)  # read while the run is being written
    assert row is not None and row.status == "running"
    assert store.display_status(row) == "running"
    run.finish()  # manifest sealed, then the lock released
    # the same (now stale) row: the lock is free, and the manifest says how the run ended
    assert store.display_status(row) == "completed"


def test_a_run_left_running_without_a_writer_is_interrupted(store: Store) -> None:
    run = record("its writer goes away", store=store, redactor=Redactor(env={}))
    run.effect("tool", {"name": "x"}, lambda: 1)
    row = store.row_from_files(run.id)
    assert row is not None
    run._writer._lock.release()  # as the kernel does when the writer's process dies
    assert store.display_status(row) == "interrupted"
    assert store.display_status(store.row_from_files(run.id)) == "interrupted"  # type: ignore[arg-type]
