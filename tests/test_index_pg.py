"""The store's index on a real PostgreSQL server (``RAR_INDEX_URL``, ``rar.store.index_pg``).

Every test gets a fresh database on a private server (tests/pg_helpers.py). The CLI runs in
fresh processes, as a user runs it; the index stays derived: whatever happens to the tables or
the server, ``rar list`` answers what the runs' files say.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import record_small_run

from rar.llm import Message, ScriptedModel
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.config import CONFIG_NAME, load_config
from rar.store.index_pg import TABLES, PgIndex
from rar.store.store import Store
from rar.store.verify import verify_store

pytest_plugins = ["pg_helpers"]  # the pg_server and pg_url fixtures

SRC = Path(__file__).resolve().parents[1] / "src"
SCRIPTS = Path(__file__).resolve().parent / "scripts"
TIMEOUT = 180  # bounds a hung child only


def _env(url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAR_INDEX_URL", "RAR_HOME")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    if url is not None:
        env["RAR_INDEX_URL"] = url
    env.update(extra)
    return env


def _rar(
    store: Path, *args: str, url: str | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(store), *args],
        capture_output=True,
        text=True,
        env=_env(url, **extra),
        timeout=TIMEOUT,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def _listed(store: Path, url: str | None = None) -> list[dict[str, Any]]:
    done = _rar(store, "list", "--json", url=url)
    rows: list[dict[str, Any]] = json.loads(_ok(done))
    return rows


def _truth(store: Path, tmp_path: Path) -> list[dict[str, Any]]:
    """What a store's files say: `rar list` on a copy that keeps its index in SQLite."""
    copy = tmp_path / f"truth-{time.monotonic_ns()}"
    shutil.copytree(store, copy, ignore=shutil.ignore_patterns(CONFIG_NAME, "index.sqlite*"))
    return _listed(copy)


def _sql(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql.encode(), params or None)
        return cursor.fetchall() if cursor.description else []


def _store_id(store: Path) -> str:
    store_id = load_config(store, environ={}).store_id
    assert store_id is not None
    return store_id


def _demo(store: Path, url: str, seed: int) -> str:
    out = _ok(_rar(store, "demo", "--seed", str(seed), "--json", url=url))
    run_id: str = json.loads(out)["run_id"]
    return run_id


# --- the CLI on a store indexed on PostgreSQL ---------------------------------------------------


def test_list_show_verify_and_replay_work_with_the_index_on_postgres(
    pg_url: str, tmp_path: Path
) -> None:
    store = tmp_path / "runs"
    first, second = _demo(store, pg_url, 1), _demo(store, pg_url, 2)

    # store.json names the index, so later commands need no RAR_INDEX_URL; no index.sqlite
    config = json.loads((store / CONFIG_NAME).read_text())
    assert config["index"] == pg_url and len(config["store_id"]) == 32
    assert not list(store.glob("index.sqlite*"))
    listed = _listed(store)
    assert sorted(r["run_id"] for r in listed) == sorted([first, second])
    assert listed == _truth(store, tmp_path)
    rows = _sql(
        pg_url, "SELECT run_id, status FROM rar_runs WHERE store_id = %s", config["store_id"]
    )
    assert sorted(rows) == sorted([(first, "completed"), (second, "completed")])

    shown = json.loads(_ok(_rar(store, "show", first, "--json")))
    assert len(shown["events"]) == shown["manifest"]["events"] > 0
    _ok(_rar(store, "verify"))
    replayed = json.loads(_ok(_rar(store, "replay", first, "--json")))
    assert replayed["replay_status"] == "reproducible", replayed
    assert len(_listed(store)) == 3  # the replay is a run too, indexed on the server
    (count,) = _sql(pg_url, "SELECT count(*) FROM rar_runs WHERE store_id = %s", config["store_id"])
    assert count == (3,)
    assert not list(store.glob("index.sqlite*"))


def test_blob_locations_live_on_the_server_and_read_back(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAR_INDEX_URL", pg_url)
    store = Store(tmp_path / "runs", create=True)
    try:
        run = record_small_run(store, steps=4)
        assert isinstance(store.index, PgIndex)
        store_id = _store_id(store.root)
    finally:
        store.close()
    indexed = dict(_sql(pg_url, "SELECT digest, pack FROM rar_blobs WHERE store_id = %s", store_id))
    reader = Store(tmp_path / "runs")  # store.json says where the index is
    try:
        assert isinstance(reader.index, PgIndex)
        for event in reader.events(run.id):
            for ref in (event.get("request"), event.get("result")):
                if isinstance(ref, dict) and "value" not in ref:
                    assert ref["digest"] in indexed
                    assert reader.resolve_payload(ref) is not None
        assert reader.notes == []
        assert verify_store(reader).ok
    finally:
        reader.close()


# --- many writers at once -----------------------------------------------------------------------

WORKERS = 8
RUNS = 4


def _writer(store: Path, url: str, worker: int, go: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(SCRIPTS / "pg_writer.py"),
            str(store),
            str(worker),
            str(RUNS),
            str(go),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(url),
    )


def test_eight_processes_recording_at_once_lose_no_row(pg_url: str, tmp_path: Path) -> None:
    store_path = tmp_path / "runs"
    go = tmp_path / "go"
    procs = [_writer(store_path, pg_url, worker, go) for worker in range(WORKERS)]
    deadline = time.monotonic() + TIMEOUT
    while not all((tmp_path / f"go.ready{w}").exists() for w in range(WORKERS)):
        assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
        time.sleep(0.005)
    go.touch()  # every worker starts recording (and first uses the fresh store) at once
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err.decode()
        assert b"warning" not in err, err.decode()
        results += [json.loads(line) for line in out.decode().splitlines()]
    assert len(results) == WORKERS * RUNS
    store_id = _store_id(store_path)  # all workers agreed on one id (else rows were split)
    assert _sql(pg_url, "SELECT DISTINCT store_id FROM rar_runs") == [(store_id,)]

    # every run was indexed by its own writer, before anyone listed the store
    rows = _sql(
        pg_url, "SELECT run_id, status, events, head FROM rar_runs WHERE store_id = %s", store_id
    )
    expected = {(r["run_id"], r["status"], r["events"], r["head"]) for r in results}
    assert set(rows) == expected and len(rows) == WORKERS * RUNS

    store = Store(store_path)
    try:
        # every blob record of every pack has its location on the server, and it is right
        in_packs = {}
        for name in store.reader.iter_pack_names():
            for record_ in store.reader.scan(name).records:
                in_packs.setdefault(record_.digest, set()).add((name, record_.location.offset))
        indexed = _sql(
            pg_url, "SELECT digest, pack, pack_offset FROM rar_blobs WHERE store_id = %s", store_id
        )
        assert {d for d, _, _ in indexed} == set(in_packs)
        assert all((pack, offset) in in_packs[d] for d, pack, offset in indexed)
        # the cache: every answer the model gave is a row, each served back intact
        asked = sum(r["calls"] for r in results)
        cached = sum(r["cached"] for r in results)
        assert asked + cached == 2 * WORKERS * RUNS
        assert asked >= WORKERS * RUNS + RUNS  # own questions, and each shared one at least once
        cache_rows = _sql(pg_url, "SELECT key FROM rar_llm_cache WHERE store_id = %s", store_id)
        assert len(cache_rows) == WORKERS * RUNS + RUNS  # one row per distinct question
        for (key,) in cache_rows:
            row = store.index.cache_get(key)
            assert row is not None
            assert store.resolve_payload(json.loads(row[0]))["response"]["content"].startswith(
                "answer to "
            )
        listed = store.list_runs()
        assert sorted(r.run_id for r in listed) == sorted(r["run_id"] for r in results)
        assert {(r.run_id, r.status, r.events, r.head) for r in listed} == expected
        report = verify_store(store)
        assert report.ok, report.problems
        assert store.notes == []
    finally:
        store.close()
    assert sorted(r["run_id"] for r in _listed(store_path)) == sorted(r["run_id"] for r in results)


# --- derived: rebuilt from the files ------------------------------------------------------------


def _ask(store: Path, prompt: str, url: str | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(
        _ok(_rar(store, "ask", "-m", "scripted:echo", "--json", prompt, url=url))
    )
    return answer


@pytest.mark.parametrize("how", ["truncate", "drop"])
def test_the_index_is_rebuilt_from_the_logs_after_its_tables_are_emptied_or_dropped(
    pg_url: str, tmp_path: Path, how: str
) -> None:
    store = tmp_path / "runs"
    for seed in (1, 2, 3):
        _demo(store, pg_url, seed)
    assert _ask(store, "what is cached?")["cached"] is False
    before = _listed(store)
    store_id = _store_id(store)
    if how == "truncate":
        _sql(pg_url, f"TRUNCATE {', '.join(TABLES)}")
    else:
        _sql(pg_url, f"DROP TABLE {', '.join(TABLES)}, rar_stores")

    assert _listed(store) == before  # from the files, indexing them again
    (runs,) = _sql(pg_url, "SELECT count(*) FROM rar_runs WHERE store_id = %s", store_id)
    assert runs == (len(before),)
    assert _listed(store) == before == _truth(store, tmp_path)  # now served from the rows
    # blob locations and the cache come back too
    _ok(_rar(store, "verify"))
    shown = json.loads(_ok(_rar(store, "show", before[0]["run_id"], "--json")))
    assert shown["manifest"]["run_id"] == before[0]["run_id"]
    assert _ask(store, "what is cached?")["cached"] is True
    (blobs,) = _sql(pg_url, "SELECT count(*) FROM rar_blobs WHERE store_id = %s", store_id)
    assert blobs[0] > 0


def test_two_stores_in_one_database_never_see_each_others_rows(pg_url: str, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    a = _demo(one, pg_url, 1)
    b = _demo(two, pg_url, 1)  # the same run recorded again: same blobs, same cache keys
    assert _ask(one, "only in the first store", url=pg_url)["cached"] is False
    assert _store_id(one) != _store_id(two)
    # the second store's cache has nothing the first recorded; the first's serves it
    assert _ask(two, "only in the first store")["cached"] is False
    assert _ask(one, "only in the first store")["cached"] is True
    listed = {store: {r["run_id"] for r in _listed(store)} for store in (one, two)}
    assert a in listed[one] and b in listed[two] and not listed[one] & listed[two]
    assert len(listed[one]) == 3 and len(listed[two]) == 2
    for store in (one, two):
        rows = _sql(pg_url, "SELECT run_id FROM rar_runs WHERE store_id = %s", _store_id(store))
        assert {r for (r,) in rows} == listed[store]
        packs = _sql(pg_url, "SELECT name FROM rar_packs WHERE store_id = %s", _store_id(store))
        assert {name.split(".")[0].removeprefix("log/") for (name,) in packs} <= listed[store]
    assert _sql(pg_url, "SELECT count(*) FROM rar_stores") == [(2,)]


# --- faults -------------------------------------------------------------------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_server_that_is_down_is_done_without_with_one_warning(tmp_path: Path) -> None:
    url = f"postgresql://rar@127.0.0.1:{_closed_port()}/rar"
    secret = "pg-secret-never-shown-42"
    store = tmp_path / "runs"
    demo = _rar(store, "demo", "--json", url=url, PGPASSWORD=secret)
    run_id = json.loads(_ok(demo))["run_id"]  # recording goes on: the record is the truth
    listed = _rar(store, "list", "--json", PGPASSWORD=secret)  # store.json names the server
    rows = json.loads(_ok(listed))
    assert [r["run_id"] for r in rows] == [run_id] and rows[0]["status"] == "completed"
    assert rows == _truth(store, tmp_path)
    for done in (demo, listed):
        warnings = [line for line in done.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1, done.stderr
        assert url in warnings[0] and "cannot be reached" in warnings[0]
        assert secret not in done.stderr + done.stdout
    _ok(_rar(store, "verify", PGPASSWORD=secret))
    assert not list(store.glob("index.sqlite*"))  # no silent switch to another index


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://rar:hunter2-in-url@127.0.0.1:5432/rar",
        "postgresql://rar@127.0.0.1:5432/rar?password=hunter2-in-url",
    ],
)
def test_an_index_url_with_a_password_is_refused_clearly(tmp_path: Path, url: str) -> None:
    store = tmp_path / "runs"
    for args in (("demo",), ("list",)):
        done = _rar(store, *args, url=url)
        assert done.returncode != 0
        assert "Traceback" not in done.stderr
        assert "password" in done.stderr and "PGPASSWORD" in done.stderr
        assert "hunter2-in-url" not in done.stderr + done.stdout
    assert not (store / CONFIG_NAME).exists()  # nothing written with the password
    assert not [p for p in store.glob("*") if p.name != "blobs"]  # and no run was started


def test_a_dropped_connection_is_opened_again_without_a_warning(
    pg_url: str, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAR_INDEX_URL", pg_url)
    store = Store(tmp_path / "runs", create=True)
    try:
        record_small_run(store)
        assert len(store.list_runs()) == 1
        _sql(
            pg_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'rar' AND pid <> pg_backend_pid()",
        )
        record_small_run(store, seed=2)
        assert len(store.list_runs()) == 2
        assert store.notes == [] and not store.index.faulted
    finally:
        store.close()
    assert "warning" not in capfd.readouterr().err


def test_tables_of_another_schema_version_are_left_alone(pg_url: str, tmp_path: Path) -> None:
    _demo(tmp_path / "runs", pg_url, 1)
    _sql(pg_url, "UPDATE rar_meta SET value = '99' WHERE store_id = '' AND key = 'schema'")
    (before,) = _sql(pg_url, "SELECT count(*) FROM rar_runs")
    done = _rar(tmp_path / "runs", "list", "--json")
    assert len(json.loads(_ok(done))) == 1
    assert "schema version '99'" in done.stderr
    assert _sql(pg_url, "SELECT count(*) FROM rar_runs") == [before]


# --- the model response cache through the server ------------------------------------------------


def test_a_second_identical_call_is_served_from_the_cache_on_the_server(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAR_INDEX_URL", pg_url)
    store = Store(tmp_path / "runs", create=True)
    calls: list[str] = []
    provider = ScriptedModel(lambda request: calls.append("") or "from the model", model="counting")
    try:
        for _ in range(2):
            with record("cache", store=store, redactor=Redactor(env={})) as run:
                client = Client(provider, run=run, profiles=Profiles())
                answer = client.complete(messages=[Message.user("same question")])
                assert answer.content == "from the model"
        assert len(calls) == 1 and client.stats.cached_calls == 1
        assert isinstance(store.index, PgIndex)
        rows = _sql(pg_url, "SELECT model, run_id FROM rar_llm_cache")
        assert rows == [("counting", store.list_runs()[-1].run_id)]
    finally:
        store.close()
    # and in fresh processes, through the CLI
    monkeypatch.delenv("RAR_INDEX_URL")
    cli_store = tmp_path / "cli"
    assert _ask(cli_store, "hello there", url=pg_url)["cached"] is False
    assert _ask(cli_store, "hello there")["cached"] is True
