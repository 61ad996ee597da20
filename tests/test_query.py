"""``rar query`` / ``rar.store.query``: the tables hold what the logs hold, are kept up to date
incrementally, survive damage, never write a read-only store, and never let SQL write."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from helpers import record_small_run

from rar.cli import cli
from rar.demo import run_demo
from rar.hashing import Canonical
from rar.redaction import Redactor
from rar.replay.engine import execute, resume
from rar.runtime.start import record
from rar.store import _query_rows
from rar.store._query_schema import TABLES
from rar.store.query import QUERY_NAME, QueryError, query
from rar.store.store import Store

SPEC = Path(__file__).resolve().parents[1] / "src" / "rar" / "science" / "specs" / "arrhenius.yaml"


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store with two demo runs, a small run and an offline science run (`rar run`)."""
    root = tmp_path_factory.mktemp("query") / "runs"
    store = Store(root, create=True)
    demo = run_demo(store)
    other = run_demo(store, seed=8)
    small = record_small_run(store, steps=2, goal="a small run about zebras")
    store.close()
    code, out, err = rar(root, "run", "--spec", str(SPEC), "--json")
    assert code == 0, err
    science = orjson.loads(out)["run_id"]
    return {"root": root, "demo": demo.id, "other": other.id, "small": small.id, "science": science}


@pytest.fixture
def copy(recorded: dict[str, Any], tmp_path: Path) -> Path:
    """A private copy of the recorded store, to change."""
    root = tmp_path / "runs"
    shutil.copytree(recorded["root"], root, symlinks=True)
    return root


def _lines(root: Path, run_id: str) -> list[dict[str, Any]]:
    data = (root / run_id / "events.jsonl").read_bytes()
    return [orjson.loads(line) for line in data.splitlines()]


def _count(root: Path, sql: str, *params: Any) -> Any:
    return query(sql, root, params=params).rows[0][0]


# --- the tables hold what the logs hold -----------------------------------------------------------


def test_every_line_of_every_log_is_an_event_row(recorded: dict[str, Any]) -> None:
    root = recorded["root"]
    counts = dict(query("SELECT run_id, count(*) FROM events GROUP BY run_id", root).rows)
    logs = {run_id: _lines(root, run_id) for run_id in Store(root).run_ids()}
    assert counts == {run_id: len(lines) for run_id, lines in logs.items()}
    for run_id, lines in logs.items():
        effects = _count(root, "SELECT count(*) FROM effects WHERE run_id=?", run_id)
        assert effects == sum(1 for e in lines if e["type"] == "effect")
        types = query(
            "SELECT type FROM events WHERE run_id=? ORDER BY seq", root, params=[run_id]
        ).rows
        assert [t for (t,) in types] == [e["type"] for e in lines]


def test_usage_sums_are_what_rar_show_reports(recorded: dict[str, Any]) -> None:
    root = recorded["root"]
    for key in ("demo", "science"):
        run_id = recorded[key]
        code, out, _ = rar(root, "show", run_id, "--json")
        assert code == 0
        stats = orjson.loads(out)["manifest"]["stats"]["llm"]
        row = query(
            "SELECT count(*), sum(input_tokens), sum(output_tokens), sum(cached_input_tokens) "
            "FROM usage WHERE run_id=?",
            root,
            params=[run_id],
        ).rows[0]
        assert row == (
            stats["calls"],
            stats["input_tokens"],
            stats["output_tokens"],
            stats["cached_input_tokens"],
        )
        assert stats["input_tokens"] > 0


def test_the_runs_table_holds_each_manifest(recorded: dict[str, Any]) -> None:
    root = recorded["root"]
    rows = {r["run_id"]: r for r in query("SELECT * FROM runs", root).as_dicts()}
    assert set(rows) == {recorded[k] for k in ("demo", "other", "small", "science")}
    demo = rows[recorded["demo"]]
    manifest = orjson.loads((root / recorded["demo"] / "manifest.json").read_bytes())
    assert demo["status"] == "completed" and demo["goal"] == manifest["goal"]
    assert demo["kind"] == "demo" and demo["seed"] == 7 and demo["model"] == "scripted:demo"
    assert demo["head"] == manifest["head"] and demo["problem"] is None
    assert rows[recorded["science"]]["mode"] == "owl_lite"


def test_effects_name_the_tool_and_model_with_their_digests(recorded: dict[str, Any]) -> None:
    root, run_id = recorded["root"], recorded["demo"]
    rows = query(
        "SELECT * FROM effects WHERE run_id=? ORDER BY seq", root, params=[run_id]
    ).as_dicts()
    events = {e["seq"]: e for e in _lines(root, run_id) if e["type"] == "effect"}
    assert [r["seq"] for r in rows] == sorted(events)
    for row in rows:
        event = events[row["seq"]]
        assert row["request_digest"] == event["request"]["digest"]
        assert row["result_digest"] == event["result"]["digest"]
        assert row["duration_us"] == event["duration_us"] and row["status"] == "ok"
    assert {(r["kind"], r["name"]) for r in rows} == {("llm", "demo"), ("tool", "calculator")}
    assert {r["cached"] for r in rows if r["kind"] == "llm"} == {0}


def test_anchors_bind_each_claim_to_its_passage_hash(recorded: dict[str, Any]) -> None:
    root, run_id = recorded["root"], recorded["science"]
    events = Store(root).events(run_id)
    result = Store(root).resolve_payload(events[-1]["result"])
    hashes = {f"{a['doc_id']}#{a['location']}": a["content_hash"] for a in result["anchors"]}
    rows = query(
        "SELECT claim_index, claim, ref, content_hash FROM anchors "
        "WHERE run_id=? AND source='answer' ORDER BY claim_index, ref",
        root,
        params=[run_id],
    ).rows
    expected = sorted(
        (i, c["text"], ref, hashes[ref])
        for i, c in enumerate(result["claims"])
        for ref in c["anchors"]
    )
    assert sorted(rows) == expected and rows
    found = _count(
        root, "SELECT count(*) FROM anchors WHERE run_id=? AND source='evidence'", run_id
    )
    evidence = [e for e in events if e["type"] == "evidence"]
    assert found == sum(len(Store(root).resolve_payload(e["anchors"])) for e in evidence)


def test_messages_hold_each_distinct_message_once(recorded: dict[str, Any]) -> None:
    root, run_id = recorded["root"], recorded["demo"]
    rows = query(
        "SELECT source, role, text FROM messages WHERE run_id=? ORDER BY seq, id",
        root,
        params=[run_id],
    ).rows
    roles = [(source, role) for source, role, _ in rows]
    assert roles[:3] == [("request", "system"), ("request", "user"), ("response", "assistant")]
    assert len(rows) == len(set(rows))  # the conversation repeats; the rows do not
    assert any("55.3 kJ/mol" in text for _, _, text in rows)
    acl = _count(
        root, "SELECT count(*) FROM messages WHERE run_id=? AND source='acl'", recorded["science"]
    )
    assert acl > 0


# --- incremental updates --------------------------------------------------------------------------


def test_a_new_run_is_added_and_a_removed_run_dropped(copy: Path) -> None:
    before = _count(copy, "SELECT count(*) FROM runs")
    store = Store(copy)
    run = record_small_run(store, steps=1)
    store.close()
    assert _count(copy, "SELECT count(*) FROM runs") == before + 1
    assert _count(copy, "SELECT count(*) FROM events WHERE run_id=?", run.id) == len(
        _lines(copy, run.id)
    )
    shutil.rmtree(copy / run.id)
    assert _count(copy, "SELECT count(*) FROM runs") == before
    assert _count(copy, "SELECT count(*) FROM events WHERE run_id=?", run.id) == 0


def test_a_run_that_grows_is_read_from_where_indexing_stopped(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(store_path, create=True)
    wait = {"name": "wait_seconds", "seconds": 3600}
    from test_science import waiting_agent

    run = execute(waiting_agent, inputs={"question": "q", "wait": wait}, store=store)
    assert store.manifest(run.id).status == "waiting"
    before = len(_lines(store_path, run.id))
    assert _count(store_path, "SELECT count(*) FROM events WHERE run_id=?", run.id) == before
    added: list[int] = []
    real_add = _query_rows.RowMaker.add
    monkeypatch.setattr(
        _query_rows.RowMaker,
        "add",
        lambda self, line: (added.append(line.event["seq"]), real_add(self, line))[1],
    )
    resume(run.id, store=store, function=waiting_agent, early=True)
    store.close()
    lines = _lines(store_path, run.id)
    assert len(lines) > before
    rows = query(
        "SELECT seq, digest FROM events WHERE run_id=? ORDER BY seq", store_path, params=[run.id]
    ).rows
    assert [seq for seq, _ in rows] == list(range(1, len(lines) + 1))
    assert added == list(range(before + 1, len(lines) + 1))  # only the new lines were read
    status = _count(store_path, "SELECT status FROM runs WHERE run_id=?", run.id)
    assert status in ("completed", "completed_with_warnings")
    finished = _count(
        store_path, "SELECT count(*) FROM events WHERE run_id=? AND type='run.finished'", run.id
    )
    assert finished == 2


def test_a_rewritten_log_is_indexed_again_from_its_start(
    copy: Path, recorded: dict[str, Any]
) -> None:
    run_id = recorded["small"]
    query("SELECT 1", copy)
    path = copy / run_id / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]))  # a shorter log: not an append
    assert _count(copy, "SELECT count(*) FROM events WHERE run_id=?", run_id) == 3
    assert _count(copy, "SELECT events FROM runs WHERE run_id=?", run_id) == 3


def test_a_line_that_breaks_the_chain_is_never_indexed(
    copy: Path, recorded: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    run_id = recorded["small"]
    path = copy / run_id / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert b"reply 0" in lines[4]  # a model's answer, inline: edited in place
    lines[4] = lines[4].replace(b"reply 0", b"reply X")
    path.write_bytes(b"".join(lines))
    rows = query("SELECT seq FROM events WHERE run_id=?", copy, params=[run_id]).rows
    assert [s for (s,) in rows] == [1, 2, 3, 4]  # line 5 was changed, or line 6's prev
    problem = _count(copy, "SELECT problem FROM runs WHERE run_id=?", run_id)
    assert "line 6" in problem and "hash chain" in problem and "rar verify" in problem
    assert "reply X" not in str(query("SELECT text FROM messages", copy).rows)
    assert any("hash chain" in r.getMessage() for r in caplog.records)


def test_a_changed_last_line_of_a_finished_run_fails_its_manifest_head(
    copy: Path, recorded: dict[str, Any]
) -> None:
    run_id = recorded["small"]
    path = copy / run_id / "events.jsonl"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    last = orjson.loads(lines[-1])
    last["effects"] = 99
    lines[-1] = orjson.dumps(last, option=orjson.OPT_SORT_KEYS) + b"\n"
    path.write_bytes(b"".join(lines))
    assert _count(copy, "SELECT count(*) FROM events WHERE run_id=?", run_id) == len(lines) - 1
    assert "head" in _count(copy, "SELECT problem FROM runs WHERE run_id=?", run_id)


# --- the database is derived ----------------------------------------------------------------------


def test_a_deleted_query_database_is_built_again(copy: Path) -> None:
    expected = _count(copy, "SELECT count(*) FROM events")
    (copy / QUERY_NAME).unlink()
    assert _count(copy, "SELECT count(*) FROM events") == expected


def test_a_damaged_query_database_is_moved_aside_and_rebuilt(
    copy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected = _count(copy, "SELECT count(*) FROM events")
    for name in (QUERY_NAME + "-wal", QUERY_NAME + "-shm"):
        (copy / name).unlink(missing_ok=True)
    (copy / QUERY_NAME).write_bytes(b"this is not a database" * 200)
    assert _count(copy, "SELECT count(*) FROM events") == expected
    assert list(copy.glob(QUERY_NAME + ".corrupt-*"))
    assert any("moved aside" in r.getMessage() for r in caplog.records)


def test_a_query_database_with_wrong_rows_is_rebuilt_on_request(copy: Path) -> None:
    expected = _count(copy, "SELECT count(*) FROM events")
    conn = sqlite3.connect(copy / QUERY_NAME)
    conn.execute("DELETE FROM events")
    conn.commit()
    conn.close()
    code, out, err = rar(
        copy, "query", "SELECT count(*) AS n FROM events", "--rebuild", "--format", "json"
    )
    assert code == 0, err
    assert orjson.loads(out) == [{"n": expected}]


# --- never writing what must not be written -------------------------------------------------------


def test_a_store_opened_read_only_is_queried_without_writing_into_it(copy: Path) -> None:
    for path in copy.glob(QUERY_NAME + "*"):
        path.unlink()
    before = sorted((p.name, p.stat().st_mtime_ns) for p in copy.iterdir())
    store = Store(copy, read_only=True)
    assert query("SELECT count(*) FROM runs", store).rows == [(4,)]
    assert query("SELECT count(*) FROM runs", store).rows == [(4,)]
    assert sorted((p.name, p.stat().st_mtime_ns) for p in copy.iterdir()) == before
    code, out, err = rar(copy, "search", "zebras", "--read-only", "--json")
    assert code == 0, err and orjson.loads(out)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in copy.iterdir()) == before


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO runs (run_id, status, events, effects) VALUES ('x', 'completed', 0, 0)",
        "UPDATE events SET type = 'x'",
        "DELETE FROM usage",
        "DROP TABLE runs",
        "CREATE TABLE notes (a)",
        "ATTACH DATABASE '/etc/passwd' AS host",
        "PRAGMA writable_schema = 1",
        "PRAGMA query_only = 0",
        "SELECT load_extension('/tmp/x.so')",
        "VACUUM INTO '/tmp/copy.sqlite'",
        "INSERT INTO messages_fts (messages_fts) VALUES ('delete-all')",
    ],
)
def test_sql_that_would_write_is_refused_with_a_clear_message(copy: Path, sql: str) -> None:
    events = _count(copy, "SELECT count(*) FROM events")
    code, out, err = rar(copy, "query", sql)
    assert code == 2 and out == ""
    assert err.startswith("error: rar query only reads:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert _count(copy, "SELECT count(*) FROM events") == events
    assert _count(copy, "SELECT count(*) FROM runs") == 4
    assert not Path("/tmp/copy.sqlite").exists()


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELEC * FROM runs", 'near "SELEC": syntax error'),
        ("SELECT * FROM nowhere", "no such table: nowhere"),
        ("SELECT 1; SELECT 2", "one statement"),
    ],
)
def test_bad_sql_is_one_line_with_sqlites_message_and_exit_2(
    recorded: dict[str, Any], sql: str, said: str
) -> None:
    code, out, err = rar(recorded["root"], "query", sql)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and said in err and err.count("\n") == 1, err


def test_reading_pragmas_are_allowed(recorded: dict[str, Any]) -> None:
    rows = query("PRAGMA table_info(usage)", recorded["root"]).rows
    assert [row[1] for row in rows] == list(TABLES["usage"][1])


# --- rar search -----------------------------------------------------------------------------------


def test_search_finds_a_recorded_word_and_highlights_it(recorded: dict[str, Any]) -> None:
    code, out, err = rar(recorded["root"], "search", "zebras", "--json")
    assert code == 0, err
    hits = orjson.loads(out)
    assert hits and {h["run_id"] for h in hits} == {recorded["small"]}
    hit = hits[0]
    assert hit["role"] == "user" and hit["source"] == "request" and hit["seq"] > 0
    start, end = hit["matches"][0]
    assert hit["snippet"][start:end] == "zebras"
    code, out, _ = rar(recorded["root"], "search", "zebras")
    assert code == 0 and recorded["small"] in out and "zebras" in out


def test_search_in_one_run_does_not_find_another_runs_words(recorded: dict[str, Any]) -> None:
    root = recorded["root"]
    code, out, _ = rar(root, "search", "zebras", "--run", recorded["demo"], "--json")
    assert code == 0 and orjson.loads(out) == []
    code, out, _ = rar(root, "search", "calculator", "--run", recorded["demo"][-8:], "--json")
    hits = orjson.loads(out)
    assert code == 0 and hits and {h["run_id"] for h in hits} == {recorded["demo"]}
    code, out, _ = rar(root, "search", "calculator", "--limit", "1", "--json")
    assert code == 0 and len(orjson.loads(out)) == 1


def test_search_finds_messages_between_agents(recorded: dict[str, Any]) -> None:
    code, out, _ = rar(
        recorded["root"],
        "search",
        "activation",
        "--run",
        recorded["science"],
        "--json",
        "--limit",
        "200",
    )
    assert code == 0
    assert "acl" in {h["source"] for h in orjson.loads(out)}


def test_fts_syntax_errors_are_clear_and_plain_words_never_are(recorded: dict[str, Any]) -> None:
    root = recorded["root"]
    code, _, err = rar(root, "search", "--fts", "zebras AND")
    assert code == 2 and "not valid FTS5 syntax" in err and err.count("\n") == 1, err
    code, out, err = rar(root, "search", "zebras AND", "--json")  # words, not syntax
    assert code == 0, err
    code, out, err = rar(root, "search", '"zebras', "NEAR(", "--json")
    assert code == 0 and orjson.loads(out) == [], err
    code, out, _ = rar(root, "search", "--fts", "zebr*", "--json")
    assert code == 0 and orjson.loads(out)


# --- frames and output formats --------------------------------------------------------------------


def test_events_frame_has_the_tables_columns_and_rows(recorded: dict[str, Any]) -> None:
    from rar.store import events_frame

    root = recorded["root"]
    frame = events_frame(root)
    assert list(frame.columns) == list(TABLES["events"][1])
    assert len(frame) == sum(len(_lines(root, r)) for r in Store(root).run_ids())
    one = events_frame(root, run=recorded["demo"])
    assert len(one) == len(_lines(root, recorded["demo"])) and set(one.run_id) == {recorded["demo"]}
    assert list(one.seq) == list(range(1, len(one) + 1))
    usage = events_frame(root, table="usage")
    assert list(usage.columns) == list(TABLES["usage"][1]) and usage.input_tokens.sum() > 0


def test_events_frame_without_pandas_says_what_to_install(
    recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rar.store.query import events_frame

    monkeypatch.setitem(__import__("sys").modules, "pandas", None)
    with pytest.raises(QueryError, match=r"pip install 'rar\[query\]'"):
        events_frame(recorded["root"])


def test_query_output_formats_parse(recorded: dict[str, Any]) -> None:
    import csv
    import io

    root = recorded["root"]
    sql = "SELECT run_id, events, goal FROM runs ORDER BY run_id"
    expected = query(sql, root).rows
    code, out, _ = rar(root, "query", sql, "--format", "json")
    assert code == 0 and [tuple(r.values()) for r in orjson.loads(out)] == expected
    code, out, _ = rar(root, "query", sql, "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and rows[0] == ["run_id", "events", "goal"]
    assert [(a, int(b), c) for a, b, c in rows[1:]] == expected
    code, out, _ = rar(root, "query", sql)
    assert code == 0 and all(run_id in out for run_id, _, _ in expected)
    assert f"{len(expected)} row(s)" in out


def test_query_tables_lists_every_column(recorded: dict[str, Any]) -> None:
    code, out, _ = rar(recorded["root"], "query", "--tables", "--format", "json")
    listed = {(r["table"], r["column"]) for r in orjson.loads(out)}
    assert code == 0
    assert listed == {(t, c) for t, (_, cols) in TABLES.items() for c in cols}
    for table in TABLES:  # the database has the columns said
        names = [r[1] for r in query(f"PRAGMA table_info({table})", recorded["root"]).rows]
        assert names == list(TABLES[table][1])


def test_a_store_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    code, _, err = rar(tmp_path / "nowhere", "query", "SELECT 1")
    assert code == 2 and "no store" in err


def test_recorded_secrets_stay_redacted(store_path: Path) -> None:
    store = Store(store_path, create=True)
    secret = "sk-proj-" + "a1B2c3D4e5" * 4
    run = record("secrets", store=store, redactor=Redactor(env={"OPENAI_API_KEY": secret}))
    with run:
        run.effect(
            "llm",
            {
                "model": "m",
                "messages": [Canonical({"role": "user", "content": f"my key is {secret} ok"})],
            },
            lambda: {"response": {"content": "noted", "usage": {}}},
        )
    store.close()
    texts = str(query("SELECT text FROM messages", store_path).rows)
    assert secret not in texts and "REDACTED" in texts


@pytest.fixture(autouse=True)
def _no_rar_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("RAR_HOME", raising=False)
    yield


def test_a_store_without_write_permission_is_queried_in_a_private_copy(copy: Path) -> None:
    """Run as a process that really cannot write the store (chmod -R a-w; as root, without
    the capabilities that would let it write anyway)."""
    import os
    import subprocess
    import sys

    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("as root, denying writes needs setpriv")
    for path in copy.glob(QUERY_NAME + "*"):
        path.unlink()
    paths = [copy, *copy.rglob("*")]
    before = sorted((str(p), p.stat().st_mtime_ns) for p in paths)
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)
    caps = "-dac_override,-dac_read_search,-fowner"
    prefix = (
        ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"] if os.geteuid() == 0 else []
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    try:
        proc = subprocess.run(
            [
                *prefix,
                sys.executable,
                "-m",
                "rar",
                "--store",
                str(copy),
                "query",
                "SELECT count(*) AS n FROM events",
                "--format",
                "json",
            ],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)
    assert proc.returncode == 0, proc.stderr.decode()
    assert orjson.loads(proc.stdout)[0]["n"] == sum(
        len(_lines(copy, r)) for r in Store(copy).run_ids()
    )
    assert sorted((str(p), p.stat().st_mtime_ns) for p in [copy, *copy.rglob("*")]) == before


def test_docs_list_every_table_and_column() -> None:
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "scale.md").read_text()
    section = text.split("## Querying a store", 1)[1]
    documented: dict[str, list[str]] = {}
    names = re.findall(r"\*\*`(\w+)`\*\*", section)
    bodies = re.split(r"\*\*`\w+`\*\*", section)[1:]
    for name, body in zip(names, bodies, strict=True):
        documented[name] = re.findall(r"^\| `(\w+)` \|", body, flags=re.M)
    assert documented == {t: list(cols) for t, (_, cols) in TABLES.items()}
