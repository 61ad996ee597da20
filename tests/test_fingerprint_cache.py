"""The environment fingerprint is cached per environment, and the cache follows the packages."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from rar.runtime import fingerprint


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache directory and an empty site directory on sys.path."""
    monkeypatch.setenv(fingerprint.ENV_CACHE_DIR, str(tmp_path / "cache"))
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(directory)])
    return directory


def _age(path: Path, seconds: float = 3600.0) -> None:
    """Make an entry look old enough to be trusted (older than the racy window)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def install(site: Path, name: str, version: str) -> Path:
    dist = site / f"{name}-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    _age(dist)
    return dist


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = fingerprint._installed

    def wrapped() -> dict[str, object]:
        calls.append(1)
        return real()

    monkeypatch.setattr(fingerprint, "_installed", wrapped)
    return calls


def test_installing_and_removing_a_package_changes_the_fingerprint(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting(monkeypatch)
    before_key = fingerprint.environment_key()
    assert before_key is not None
    before = fingerprint.installed_packages()
    assert fingerprint.installed_packages() == before
    assert len(calls) == 1, "the second look-up in an unchanged environment is served cached"

    dist = install(site, "rar-fake-package", "1.0")
    key = fingerprint.environment_key()
    assert key is not None and key != before_key
    with_fake = fingerprint.installed_packages()
    assert len(calls) == 2, "a changed environment is read again"
    assert with_fake["distributions"]["count"] == before["distributions"]["count"] + 1
    assert with_fake["distributions"]["digest"] != before["distributions"]["digest"]

    # an upgrade: the old dist-info goes, a new one comes
    (dist / "METADATA").unlink()
    dist.rmdir()
    install(site, "rar-fake-package", "2.0")
    upgraded = fingerprint.installed_packages()
    assert upgraded["distributions"]["digest"] not in (
        before["distributions"]["digest"],
        with_fake["distributions"]["digest"],
    )

    for entry in site.iterdir():  # removed again: back to the first environment
        for file in entry.iterdir():
            file.unlink()
        entry.rmdir()
    assert fingerprint.environment_key() == before_key
    assert fingerprint.installed_packages() == before


def test_an_entry_changed_just_now_is_not_trusted(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counting(monkeypatch)
    dist = install(site, "rar-fresh-package", "1.0")
    _age(dist, 0)  # written a moment ago: within the clock's granularity
    assert fingerprint.environment_key() is None
    first = fingerprint.installed_packages()
    second = fingerprint.installed_packages()
    assert first == second and len(calls) == 2  # read every time, never cached
    assert not list((Path(os.environ[fingerprint.ENV_CACHE_DIR])).glob("fingerprint-*"))


def test_a_damaged_cache_file_is_read_around(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = fingerprint.installed_packages()
    for path in Path(os.environ[fingerprint.ENV_CACHE_DIR]).glob("fingerprint-*.json"):
        path.write_bytes(b"{not json")
    calls = counting(monkeypatch)
    assert fingerprint.installed_packages() == expected
    assert len(calls) == 1


def test_the_fingerprint_holds_what_it_did(site: Path) -> None:
    fingerprint.environment_fingerprint.cache_clear()
    try:
        found = fingerprint.environment_fingerprint()
    finally:
        fingerprint.environment_fingerprint.cache_clear()
    assert set(found) == {
        "python", "implementation", "platform", "machine", "rar", "packages", "distributions",
        "git",
    }  # fmt: skip
    assert found["distributions"]["count"] > 0
    assert found["packages"]["pydantic"]
