"""One store with its blobs on S3 (moto in server mode) and its index on PostgreSQL (a private
cluster): a study runs into it on a LocalCluster, and list, verify, replay and the study report
work there, also with the local pack copies dropped."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from pg_helpers import pg_server, pg_url  # noqa: F401  (fixtures)
from test_store_remote import aws, bucket, endpoint, objects, rar  # noqa: F401  (fixtures)

pytest.importorskip("distributed")

TESTS = Path(__file__).parent
SPEC = """\
name: together
questions:
  - What activation energy do the Kissinger DSC data in the corpus give?
  - Why do narrow temperature ranges make Arrhenius estimates uncertain?
seeds: [1]
modes: [owl_lite]
models: [planner:rule-based]
corpora: [demo]
"""


@pytest.fixture
def scaled_store(
    tmp_path: Path,
    bucket: str,  # noqa: F811
    endpoint: str,  # noqa: F811
    pg_url: str,  # noqa: F811
) -> Iterator[tuple[Path, dict[str, str]]]:
    root = tmp_path / "runs"
    root.mkdir()
    config = {
        "format": 1,
        "blobs": f"s3://{bucket}/rar",
        "blobs_options": {"endpoint_url": endpoint},
        "index": pg_url,
    }
    (root / "store.json").write_bytes(orjson.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    yield root, env


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr[-2000:]
    return orjson.loads(result.stdout)


@pytest.mark.slow
def test_a_study_on_s3_blobs_and_a_postgresql_index(
    scaled_store: tuple[Path, dict[str, str]],
    bucket: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    root, env = scaled_store
    spec = tmp_path / "together.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    study = _json(rar(root, "study", "run", str(spec), "--workers", "2", "--json"))
    assert study["counts"]["completed"] == 2 and study["counts"]["failed"] == 0
    cell_runs = {cell["run_id"] for cell in study["cells"]}
    assert len(cell_runs) == 2
    # the index lives on the server, the blobs' packs in the bucket
    assert not (root / "index.sqlite").exists()
    assert objects(bucket), "no pack was uploaded"
    listed = {row["run_id"] for row in _json(rar(root, "list", "--json"))}
    assert cell_runs | {study["run_id"]} <= listed
    verified = rar(root, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # without the local copies every blob is read from the bucket
    pushed = rar(root, "store", "push", "--drop-local")
    assert pushed.returncode == 0, pushed.stderr
    assert not list((root / "blobs" / "packs").glob("*.pack"))
    verified = rar(root, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = _json(rar(root, "study", "report", study["run_id"], "--json"))
    text = orjson.dumps(report).decode()
    assert "non-reproducible" not in text and "reproducible" in text
    # nothing secret was written into the store's own files
    secrets = [env["AWS_SECRET_ACCESS_KEY"], env.get("PGPASSWORD") or "\0no password\0"]
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(secret.encode() in data for secret in secrets), path
