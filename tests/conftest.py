from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from rar.redaction import Redactor
from rar.store.store import Store

# `pytest --hypothesis-profile=long tests/test_fuzz_*.py`: the fuzz tests run far more examples
# (each test's own budget keeps the default run under ~10 s); no deadline, slow data allowed.
settings.register_profile(
    "long",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    s = Store(store_path, create=True)
    yield s
    s.close()


@pytest.fixture
def redactor() -> Redactor:
    """A redactor independent of the test process's environment."""
    return Redactor(env={})


@pytest.fixture
def blobs_in_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every blob written to a pack, none carried in log lines (``RAR_CARRY_LIMIT=0``, also for
    subprocesses): for tests about packs and their damage."""
    monkeypatch.setenv("RAR_CARRY_LIMIT", "0")
