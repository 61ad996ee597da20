"""A read-only store (an archive, a colleague's runs on a read-only mount) is read in full: listing,
showing, verifying, exporting and the viewer work without writing anything, and recording into it
(a replay writes a new run) is refused with a message naming the store and what to do.

Writes are really denied: the commands run in child processes where the store cannot be written,
either because its files were made read-only (``chmod -R a-w``; tests run as root here, so the
child drops the capabilities that let root write anyway, with ``setpriv``) or because it is a
read-only bind mount (``unshare -m``, root only). A probe in the same child checks the denial.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import record_small_run

from rar.demo import run_demo
from rar.errors import StoreNotWritableError
from rar.redaction import Redactor
from rar.runtime.start import record
from rar.store.store import Store

SRC = Path(__file__).resolve().parents[1] / "src"
TIMEOUT = 120
_CAPS = "-dac_override,-dac_read_search,-fowner"
MECHANISMS = ("no-write-permission", "read-only-mount")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    env.pop("RAR_HOME", None)
    return env


def _wrapped(mechanism: str, root: Path, argv: list[str]) -> list[str]:
    if mechanism == "read-only-mount":
        script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
        return ["unshare", "-m", "sh", "-c", script, str(root), *argv]
    if os.geteuid() == 0:
        return ["setpriv", f"--bounding-set={_CAPS}", f"--inh-caps={_CAPS}", *argv]
    return argv


def _run(mechanism: str, root: Path, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        _wrapped(mechanism, root, argv),
        capture_output=True,
        env=_env(),
        timeout=TIMEOUT,
        check=False,
    )


def _rar(mechanism: str, root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return _run(mechanism, root, [sys.executable, "-m", "rar", "--store", str(root), *args])


_PROBE = """
import os, sys
for path in (os.path.join(sys.argv[1], "probe"), os.path.join(sys.argv[1], "index.sqlite")):
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        print(exc.errno)
    else:
        print("written", path)
"""


def _available(mechanism: str, root: Path) -> str | None:
    """Why ``mechanism`` cannot deny writes here (None when it can)."""
    if mechanism == "read-only-mount" and (os.geteuid() != 0 or not shutil.which("unshare")):
        return "a read-only bind mount needs root and unshare"
    if mechanism == "no-write-permission" and os.geteuid() == 0 and not shutil.which("setpriv"):
        return "as root, dropping the capabilities to write anyway needs setpriv"
    proc = _run(mechanism, root, [sys.executable, "-c", _PROBE, str(root)])
    if proc.returncode != 0 or b"written" in proc.stdout:
        return f"{mechanism} did not deny writes: {proc.stdout!r} {proc.stderr!r}"
    return None


def _tree(root: Path) -> dict[str, str]:
    """Every file of the store with its content digest and mtime, every directory's mtime."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        rel = str(path.relative_to(root))
        if path.is_dir():
            found[rel] = f"dir:{st.st_mtime_ns}"
        else:
            found[rel] = f"{hashlib.sha256(path.read_bytes()).hexdigest()}:{st.st_mtime_ns}"
    return found


def _chmod(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two stores of the same runs, made read-only: one with its index, one without."""
    base = tmp_path_factory.mktemp("archive")
    root = base / "runs"
    store = Store(root, create=True)
    demo = run_demo(store)
    other = run_demo(store, seed=8)
    run = record("artifacts and blobs", store=store, seed=2, redactor=Redactor(env={}))
    with run:
        run.effect("tool", {"name": "big"}, lambda: {"text": "z" * 5000})
        run.artifact("report.txt", b"hello\n")
    record_small_run(store, steps=2)
    tree = [e for e in store.events(demo.id) if e["type"] == "snapshot"][0]["tree"]
    effect = [e for e in store.events(demo.id) if e["type"] == "effect"][0]
    listed = [row.as_dict() for row in store.list_runs()]
    store.close()
    bare = base / "bare"
    shutil.copytree(root, bare, symlinks=True)
    for path in bare.glob("index.sqlite*"):
        path.unlink()
    for path in (root, bare):
        _chmod(path, writable=False)
    try:
        yield {
            "stores": {"with-index": root, "without-index": bare},
            "demo": demo.id,
            "other": other.id,
            "artifacts": run.id,
            "tree": tree,
            "effect_seq": effect["seq"],
            "listed": listed,
            "out": base,
        }
    finally:
        for path in (root, bare):
            _chmod(path, writable=True)


@pytest.fixture(params=[(m, s) for m in MECHANISMS for s in ("with-index", "without-index")])
def denied(request: pytest.FixtureRequest, archive: dict[str, Any]) -> Iterator[dict[str, Any]]:
    mechanism, which = request.param
    root = archive["stores"][which]
    why = _available(mechanism, root)
    if why is not None:
        pytest.skip(why)
    before = _tree(root)
    yield {**archive, "mechanism": mechanism, "root": root}
    assert _tree(root) == before  # nothing in the store was written, created or touched


def test_writes_into_the_store_are_really_denied(denied: dict[str, Any]) -> None:
    argv = [sys.executable, "-c", _PROBE, str(denied["root"])]
    proc = _run(denied["mechanism"], denied["root"], argv)
    codes = proc.stdout.decode().split()
    assert codes and all(code in {"13", "30"} for code in codes), codes  # EACCES, EROFS


def test_list_reads_every_run(denied: dict[str, Any]) -> None:
    proc = _rar(denied["mechanism"], denied["root"], "list", "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    listed = orjson.loads(proc.stdout)
    assert [r["run_id"] for r in listed] == [r["run_id"] for r in denied["listed"]]
    assert [r["events"] for r in listed] == [r["events"] for r in denied["listed"]]
    assert b"warning" not in proc.stderr  # reading a read-only store is normal, not a fault
    human = _rar(denied["mechanism"], denied["root"], "list")
    assert human.returncode == 0 and denied["demo"].encode() in human.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["show", "{demo}"],
        ["show", "--json", "{artifacts}"],
        ["verify"],
        ["verify", "{demo}", "{artifacts}"],
        ["export", "{demo}"],
        ["export", "{artifacts}", "--format", "html", "-o", "{out}/page-{mechanism}.html"],
        ["lineage", "{demo}"],
        ["diff", "{demo}", "{other}"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_reading_commands_work(denied: dict[str, Any], command: list[str]) -> None:
    args = [part.format(**denied) for part in command]
    proc = _rar(denied["mechanism"], denied["root"], *args)
    assert proc.returncode in (0, 1 if command[0] == "diff" else 0), proc.stderr.decode()
    assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr


def test_verify_reports_the_runs_sound(denied: dict[str, Any]) -> None:
    proc = _rar(denied["mechanism"], denied["root"], "verify", "--json")
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    report = orjson.loads(proc.stdout)
    assert report["ok"] and report["runs"] == len(denied["listed"])


@pytest.mark.parametrize("command", [["replay", "{demo}"], ["branch", "{demo}", "--at", "3"]])
def test_a_replay_is_refused_naming_the_store_and_what_to_do(
    denied: dict[str, Any], command: list[str]
) -> None:
    args = [part.format(**denied) for part in command]
    proc = _rar(denied["mechanism"], denied["root"], *args)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert "read-only" in err and str(denied["root"]) in err
    assert "cp -a" in err and "--store DIR" in err
    assert "internal error" not in err


def test_recording_into_it_is_refused(denied: dict[str, Any]) -> None:
    proc = _rar(denied["mechanism"], denied["root"], "demo")
    err = proc.stderr.decode()
    assert proc.returncode == 3 and "read-only" in err and str(denied["root"]) in err, err


def test_saving_a_diff_into_it_is_refused_before_anything_is_printed(
    denied: dict[str, Any],
) -> None:
    proc = _rar(
        denied["mechanism"], denied["root"], "diff", denied["demo"], denied["other"], "--save"
    )
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert err.startswith("error: cannot save the diff") and str(denied["root"]) in err
    assert "--json > FILE" in err and "cp -a" in err
    assert proc.stdout == b""  # and the fixture checks that no file was written


_VIEWER = """
import asyncio, json, sys
import httpx2
from rar.viewer import create_app

async def main(root, paths):
    transport = httpx2.ASGITransport(app=create_app(root))
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answers = {}
        for path in paths:
            response = await client.get(path)
            json_body = response.headers.get("content-type", "").startswith("application/json")
            answers[path] = [response.status_code, response.json() if json_body else None]
    print(json.dumps(answers))

asyncio.run(main(sys.argv[1], sys.argv[2:]))
"""


def test_every_viewer_route_answers(denied: dict[str, Any]) -> None:
    """Before: every API call answered 500 on a read-only store."""
    demo, other, art = denied["demo"], denied["other"], denied["artifacts"]
    paths = [
        "/api/runs",
        "/api/runs?status=completed&sort=goal",
        f"/api/runs/{demo}",
        f"/api/runs/{demo}/events",
        f"/api/runs/{demo}/replays",
        f"/api/blobs/{denied['tree']}",
        f"/api/payload?run={demo}&seq={denied['effect_seq']}&field=request",
        f"/api/runs/{art}",
        f"/api/runs/{art}/artifacts/report.txt",
        f"/api/diff?a={demo}&b={other}",
        "/",
        f"/runs/{demo}",
    ]
    argv = [sys.executable, "-c", _VIEWER, str(denied["root"]), *paths]
    proc = _run(denied["mechanism"], denied["root"], argv)
    assert proc.returncode == 0, proc.stderr.decode()
    answers = json.loads(proc.stdout)
    assert {path: answer[0] for path, answer in answers.items()} == {path: 200 for path in paths}
    assert answers["/api/runs"][1]["total"] == len(denied["listed"])
    detail = answers[f"/api/runs/{demo}"][1]
    assert detail["status"] == "completed" and detail["verify"]["ok"] is True
    assert answers[f"/api/blobs/{denied['tree']}"][1]["value"]["format"] == "rar.tree/1"


# --- the Store API other readers build on --------------------------------------------------------


_STORE_API = """
import json, sys
from rar.store.store import Store
store = Store(sys.argv[1])
print(json.dumps({
    "writable": store.writable,
    "location": store.index.location,
    "runs": len(store.list_runs()),
    "notes": store.notes,
}))
"""


def test_the_store_says_it_is_read_only_and_keeps_its_index_elsewhere(
    denied: dict[str, Any],
) -> None:
    proc = _run(
        denied["mechanism"], denied["root"], [sys.executable, "-c", _STORE_API, str(denied["root"])]
    )
    assert proc.returncode == 0, proc.stderr.decode()
    answer = json.loads(proc.stdout)
    assert answer == {
        "writable": False,
        "location": "temporary",
        "runs": len(denied["listed"]),
        "notes": [],
    }


def test_a_store_opened_read_only_writes_nothing_even_when_it_could(store: Store) -> None:
    run = run_demo(store)
    store.close()
    before = _tree(store.root)
    reader = Store(store.root, read_only=True)
    try:
        assert not reader.writable
        assert [r.run_id for r in reader.list_runs()] == [run.id]
        assert reader.index.location == "temporary"
        for event in reader.events(run.id):
            if isinstance(event.get("result"), dict):
                reader.resolve_payload(event["result"])
        with pytest.raises(StoreNotWritableError, match="opened read-only"):
            record("nope", store=reader, redactor=Redactor(env={}))
    finally:
        reader.close()
    assert _tree(store.root) == before
