"""Blobs on an fsspec URL, against a real S3-compatible server on loopback (moto in server
mode) and a ``file://`` directory: packs staged locally, uploaded when sealed, read back by byte
range, verified, deduplicated, and never lost to a crash."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from rar.redaction import Redactor
from rar.replay.engine import execute, replay
from rar.runtime.run import Run
from rar.store.blobs import PackReader
from rar.store.catalog import ReadOnlyStore
from rar.store.remote import RemoteBlobsError
from rar.store.store import Store
from rar.store.verify import verify_store

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

KEY_ID = "AKIARARTESTKEY000001"
SECRET = "rar-test-secret-4f1d9c2b7e6a5d3c1b0a9f8e7d6c5b4a"
QUIET = Redactor(env={})
TESTS = Path(__file__).parent
_ENDPOINT: list[str] = []  # the moto server's, while the module's tests run


def document(seed: str, size: int = 60_000) -> str:
    """Text a pack holds (too large to be carried in a log line), different for each seed."""
    parts, total, state = [], 0, seed.encode()
    while total < size:
        state = hashlib.sha256(state).hexdigest().encode()
        parts.append(state.decode())
        total += len(state)
    return "".join(parts)


SHARED = document("shared")


def agent(run: Run, question: str) -> dict[str, Any]:
    """A recorded run with one blob every run shares and one of its own."""
    shared = run.effect("tool", {"name": "fetch", "q": "shared"}, lambda: SHARED)
    own = run.effect("tool", {"name": "fetch", "q": question}, lambda: document(question))
    return {"chars": len(shared) + len(own)}


# --- the server and the store ------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    _ENDPOINT[:] = [f"http://{host}:{port}"]
    yield _ENDPOINT[0]
    server.stop()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Dummy credentials in the environment only (the way a user gives them)."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name in ("RAR_BLOBS_URL", "RAR_INDEX_URL"):
            monkeypatch.delenv(name)
    env = {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def bucket(endpoint: str, aws: dict[str, str], request: pytest.FixtureRequest) -> str:
    name = "rar-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:20]
    s3().create_bucket(Bucket=name)
    return name


def s3() -> Any:
    """A client of the test server (credentials from the environment)."""
    return boto3.client("s3", endpoint_url=_ENDPOINT[0], region_name="us-east-1")


def configure(root: Path, url: str, options: dict[str, Any] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"format": 1, "blobs": url}
    if options:
        config["blobs_options"] = options
    (root / "store.json").write_bytes(orjson.dumps(config))
    return root


@pytest.fixture
def s3_store(tmp_path: Path, bucket: str, endpoint: str) -> Path:
    return configure(tmp_path / "runs", f"s3://{bucket}/rar", {"endpoint_url": endpoint})


def record_run(root: Path, question: str) -> str:
    store = Store(root)
    try:
        return execute(agent, inputs={"question": question}, store=store, seed=1, redactor=QUIET).id
    finally:
        store.close()


def objects(bucket: str) -> dict[str, bytes]:
    listing = s3().list_objects_v2(Bucket=bucket, Prefix="rar/packs/").get("Contents", [])
    return {
        o["Key"].rsplit("/", 1)[-1]: s3().get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in listing
    }


def local_packs(root: Path) -> dict[str, bytes]:
    packs = root / "blobs" / "packs"
    return {p.name: p.read_bytes() for p in sorted(packs.glob("*.pack"))} if packs.is_dir() else {}


def rar(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(root), *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


def flip_byte(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


# --- recording, reading back ------------------------------------------------------------------


def test_a_sealed_pack_is_uploaded_with_the_same_bytes(s3_store: Path, bucket: str) -> None:
    record_run(s3_store, "q1")
    local = local_packs(s3_store)
    assert local, "the run wrote no pack"
    assert objects(bucket) == local  # the copy kept locally (a read cache) and the object agree
    config = orjson.loads((s3_store / "store.json").read_bytes())
    assert config["blobs"] == f"s3://{bucket}/rar"


def test_without_local_copies_a_fresh_store_and_process_read_and_replay(
    s3_store: Path, bucket: str
) -> None:
    run_id = record_run(s3_store, "q1")
    pushed = rar(s3_store, "store", "push", "--drop-local", "--json")
    assert pushed.returncode == 0, pushed.stderr
    assert orjson.loads(pushed.stdout)["dropped"]
    assert local_packs(s3_store) == {}
    (s3_store / "index.sqlite").unlink()  # rebuilt from the remote listing too

    store = Store(s3_store)
    results = [
        store.resolve_payload(e["result"]) for e in store.events(run_id) if e["type"] == "effect"
    ]
    assert results == [SHARED, document("q1")]
    report = replay(run_id, store=store, redactor=QUIET)
    assert report.replay_status == "reproducible" and report.mismatched == 0
    store.close()

    shown = rar(s3_store, "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    verified = rar(s3_store, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    replayed = rar(s3_store, "replay", run_id)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "reproducible" in replayed.stdout


def test_a_blob_two_runs_share_is_uploaded_once(s3_store: Path, bucket: str) -> None:
    record_run(s3_store, "q1")
    first = set(objects(bucket))
    record_run(s3_store, "q2")
    second = {k: v for k, v in objects(bucket).items() if k not in first}
    assert len(second) == 1, "the second run uploads its own pack"
    shared = "sha256:" + hashlib.sha256(orjson.dumps(SHARED)).hexdigest()
    own = "sha256:" + hashlib.sha256(orjson.dumps(document("q2"))).hexdigest()
    (name,) = second
    reader = PackReader(Path("/nonexistent"))
    records = reader._scan_bytes(name, second[name], 0).records
    digests = {r.digest for r in records}
    assert own in digests and shared not in digests


# --- verify -----------------------------------------------------------------------------------


@pytest.mark.parametrize("local_copy", ["kept", "dropped"])
def test_verify_passes_then_names_the_object_with_a_flipped_byte(
    s3_store: Path, bucket: str, local_copy: str
) -> None:
    record_run(s3_store, "q1")
    if local_copy == "dropped":
        assert rar(s3_store, "store", "push", "--drop-local").returncode == 0
    report = verify_store(ReadOnlyStore(s3_store))
    assert report.ok and not report.warnings, report.problems

    ((name, data),) = objects(bucket).items()
    s3().put_object(Bucket=bucket, Key=f"rar/packs/{name}", Body=flip_byte(data, len(data) - 100))

    url = f"s3://{bucket}/rar/packs/{name}"
    report = verify_store(ReadOnlyStore(s3_store))
    assert not report.ok
    assert any(p.path == url and p.what in ("blob-corrupt", "pack") for p in report.problems)
    cli = rar(s3_store, "verify")
    assert cli.returncode == 1 and url in cli.stdout + cli.stderr


def test_a_local_pack_not_uploaded_is_a_warning_naming_what_to_do(
    s3_store: Path, bucket: str
) -> None:
    record_run(s3_store, "q1")
    for key in objects(bucket):  # as if its writer had died before uploading it
        s3().delete_object(Bucket=bucket, Key=f"rar/packs/{key}")
    report = verify_store(ReadOnlyStore(s3_store))
    assert report.ok
    assert [w.what for w in report.warnings] == ["not-uploaded"]
    assert "rar store push" in report.warnings[0].detail


# --- crashes ----------------------------------------------------------------------------------

CRASHING_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from rar.redaction import Redactor
    from rar.runtime.start import record
    from rar.store.store import Store
    from test_store_remote import document

    run = record("crash", store=Store(sys.argv[1]), seed=1, redactor=Redactor(env={}))
    run.effect("tool", {"name": "fetch", "q": "crash"}, lambda: document("crash"))
    print("acknowledged", flush=True)
    signal.pause()
    """
)


def test_a_writer_killed_before_uploading_leaves_its_pack_and_the_next_writer_uploads_it(
    s3_store: Path, bucket: str
) -> None:
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING_WRITER, str(s3_store)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "acknowledged"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    orphans = local_packs(s3_store)
    assert len(orphans) == 1 and objects(bucket) == {}  # the kill came before the upload

    verified = rar(s3_store, "verify", "--json")
    assert verified.returncode == 0, verified.stdout
    assert "not-uploaded" in verified.stdout

    record_run(s3_store, "q1")  # the next writer's close uploads the orphan too
    uploaded = objects(bucket)
    for name, data in orphans.items():
        assert uploaded[name] == data
    report = verify_store(ReadOnlyStore(s3_store))
    assert report.ok and not report.warnings


# --- file:// -----------------------------------------------------------------------------------


def test_a_file_url_works_like_a_bucket(tmp_path: Path, aws: dict[str, str]) -> None:
    remote = tmp_path / "elsewhere"
    root = configure(tmp_path / "runs", remote.as_uri())
    run_id = record_run(root, "q1")
    copies = {p.name: p.read_bytes() for p in (remote / "packs").glob("*.pack")}
    assert copies == local_packs(root)
    assert rar(root, "store", "push", "--drop-local").returncode == 0
    assert local_packs(root) == {}

    store = Store(root)
    assert replay(run_id, store=store, redactor=QUIET).replay_status == "reproducible"
    store.close()
    assert verify_store(ReadOnlyStore(root)).ok

    ((name, data),) = copies.items()
    (remote / "packs" / name).write_bytes(flip_byte(data, len(data) - 100))
    report = verify_store(ReadOnlyStore(root))
    assert any(str(remote / "packs" / name) in (p.path or "") for p in report.problems)


# --- errors -----------------------------------------------------------------------------------


def _one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def assert_nothing_recorded(root: Path) -> None:
    """No run directory and no pack: the refusal came before anything was written."""
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) in ([], ["blobs"])
    assert not list(root.rglob("*.pack")) and not list(root.rglob("events.jsonl"))


def test_recording_refuses_to_start_when_the_server_is_down(
    tmp_path: Path, aws: dict[str, str]
) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    options = {
        "endpoint_url": f"http://127.0.0.1:{port}",
        "config_kwargs": {"retries": {"max_attempts": 1}},
    }
    root = configure(tmp_path / "runs", "s3://rar-down/rar", options)
    with pytest.raises(RemoteBlobsError, match="cannot be reached") as caught:
        record_run(root, "q1")
    assert "s3://rar-down/rar" in caught.value.message
    assert_nothing_recorded(root)
    line = _one_line_error(rar(root, "demo"), "s3://rar-down/rar", "cannot be reached")
    assert SECRET not in line and KEY_ID not in line


def test_recording_refuses_to_start_when_the_bucket_is_missing(
    tmp_path: Path, endpoint: str, aws: dict[str, str]
) -> None:
    root = configure(tmp_path / "runs", "s3://rar-no-such-bucket/rar", {"endpoint_url": endpoint})
    result = rar(root, "demo")
    assert result.returncode == 3
    _one_line_error(result, "s3://rar-no-such-bucket/rar", "does not exist", "mb")
    assert_nothing_recorded(root)


def test_reading_a_remote_only_blob_with_the_server_down_is_one_clear_line(
    tmp_path: Path, s3_store: Path, aws: dict[str, str]
) -> None:
    run_id = record_run(s3_store, "q1")
    assert rar(s3_store, "store", "push", "--drop-local").returncode == 0
    config = orjson.loads((s3_store / "store.json").read_bytes())
    config["blobs_options"] = {
        "endpoint_url": "http://127.0.0.1:9",
        "config_kwargs": {"retries": {"max_attempts": 1}},
    }
    (s3_store / "store.json").write_bytes(orjson.dumps(config))
    (s3_store / "index.sqlite").unlink()
    result = rar(s3_store, "show", run_id, "--trace")
    if result.returncode == 0:  # show needs no blob: verify does
        result = rar(s3_store, "verify", run_id)
    assert result.returncode == 3
    _one_line_error(result, config["blobs"], "cannot be reached")


def test_a_url_with_a_password_is_refused_without_repeating_it(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    result = rar(root, "list", env={"RAR_BLOBS_URL": "s3://user:hunter2pass@bucket/rar"})
    assert result.returncode == 2
    line = _one_line_error(result, "RAR_BLOBS_URL", "password")
    assert "hunter2pass" not in line


def test_blobs_options_holding_a_secret_are_refused(tmp_path: Path) -> None:
    root = configure(tmp_path / "runs", "s3://bucket/rar", {"secret": "x", "endpoint_url": "y"})
    line = _one_line_error(rar(root, "list"), "blobs_options.secret", "credential")
    assert "AWS_SECRET_ACCESS_KEY" in line


def test_no_file_of_the_store_holds_a_credential(s3_store: Path, bucket: str) -> None:
    run_id = record_run(s3_store, "q1")
    rar(s3_store, "store", "push", "--drop-local")
    replay(run_id, store=Store(s3_store), redactor=QUIET)
    seen = 0
    for path in s3_store.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            seen += 1
            assert SECRET.encode() not in data and KEY_ID.encode() not in data, path
    assert seen > 5


def test_reading_fetches_a_pack_once(
    s3_store: Path, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = record_run(s3_store, "q1")
    assert rar(s3_store, "store", "push", "--drop-local").returncode == 0
    store = Store(s3_store)
    remote = store.remote
    assert remote is not None
    calls: list[str] = []
    original = remote.fs.cat_file  # (fsspec shares the instance: restored after the test)
    monkeypatch.setattr(
        remote.fs, "cat_file", lambda *a, **k: calls.append(a[0]) or original(*a, **k)
    )
    started = time.perf_counter()
    for event in store.events(run_id):
        if event["type"] == "effect":
            store.resolve_payload(event["result"])
    assert time.perf_counter() - started < 30
    assert len(calls) == 1, calls  # one request for the (small) pack, then served from memory
