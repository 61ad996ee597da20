from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rar.redaction import Redactor
from rar.store.store import Store


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
