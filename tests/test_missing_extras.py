"""A feature whose optional extra is not installed says which extra to install, before anything
is recorded (the import is blocked in a fresh process, as if the package were missing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rar_without(
    modules: list[str], args: list[str], cwd: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"for name in {modules!r}:\n"
        "    sys.modules[name] = None\n"
        f"sys.argv = ['rar', *{args!r}]\n"
        "from rar.cli import main\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def _recorded(store: Path) -> list[str]:
    if not store.is_dir():
        return []
    return [p.name for p in store.iterdir() if p.is_dir() and p.name not in ("blobs", "studies")]


def test_a_study_without_dask_names_the_extra(tmp_path: Path) -> None:
    result = _rar_without(
        ["distributed", "dask"],
        ["study", str(ROOT / "examples" / "reproducibility.yaml")],
        tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'rar[study]'" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert _recorded(tmp_path / "runs") == []


def test_a_postgresql_index_without_psycopg_names_the_extra(tmp_path: Path) -> None:
    result = _rar_without(
        ["psycopg"], ["demo"], tmp_path, RAR_INDEX_URL="postgresql://127.0.0.1:1/rar"
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'rar[postgres]'" in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert _recorded(tmp_path / "runs") == []
