"""Power loss: whatever the disk keeps of writes that were not yet fsynced, a durable store loses
no acknowledged effect, stays readable, verifies, and every run can be reopened.

``kill -9`` cannot test this (the page cache survives a process). The writer runs once with every
file operation journaled (``tests/scripts/journaled_writer.py``); :mod:`powerloss` replays the
journal to many cut points on a model disk that keeps only what was fsynced — or that plus a
random part of what was not — and checks each resulting store. ``bench/reliability.py`` runs
the same check over every cut point of longer journals.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from powerloss import Journal, check_cut, machine_at, record_journal

CUTS = 40  # per policy; bench/reliability.py checks every cut of longer journals


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Journal:
    return record_journal(tmp_path_factory.mktemp("journal"), seed=11, effects=10)


def test_the_journal_sees_the_writes_the_fsyncs_and_the_acknowledgements(journal: Journal) -> None:
    kinds = {op["op"] for op in journal.ops}
    assert {"mkdir", "create", "write", "fsync", "replace", "ack"} <= kinds
    acks = [op for op in journal.ops if op["op"] == "ack"]
    assert len(acks) == 2 * 10 + 2  # every effect and both finishes
    # everything fsynced at the very end: nothing may be missing from the last machine
    final = machine_at(journal, journal.cuts - 1, keep="fsynced", rng=random.Random(0))
    assert sum(1 for name in final["files"] if name.endswith("events.jsonl")) == 2


@pytest.mark.parametrize("keep", ["fsynced", "some"])
def test_no_acknowledged_effect_is_lost_at_any_cut(
    journal: Journal, tmp_path: Path, keep: str
) -> None:
    rng = random.Random(f"cuts-{keep}")
    cuts = sorted(rng.sample(range(journal.cuts), min(CUTS, journal.cuts)))
    failures = []
    for cut in cuts:
        outcome = check_cut(journal, cut, tmp_path, keep=keep, seed=cut)  # type: ignore[arg-type]
        if not outcome.ok:
            failures.append(
                f"cut {cut} ({journal.ops[cut - 1]['op'] if cut else 'start'}): "
                f"{outcome.lost_effects} of {outcome.acked_effects} acknowledged effects lost, "
                f"{outcome.lost_finishes} finishes lost, problems {outcome.problems[:2]}"
            )
    assert not failures, "\n".join(failures[:10])


def test_the_simulation_can_fail_a_store_that_does_not_fsync(journal: Journal) -> None:
    """A disk that keeps nothing unsynced, fed a journal with the fsyncs removed, loses effects:
    the check is not vacuous."""
    unsynced = Journal([op for op in journal.ops if op["op"] != "fsync"], journal.root)
    machine = machine_at(unsynced, unsynced.cuts - 1, keep="fsynced", rng=random.Random(0))
    assert machine["files"] == {}
    acked = sum(a["effects"] for a in machine["acked"].values())
    assert acked == 20
