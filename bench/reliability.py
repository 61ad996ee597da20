"""Reliability figures: the long part of the suite that keeps the record honest.

Each section drives the real store the way the review did and counts what must stay zero:

* ``crash``      — writers killed with SIGKILL at random moments (``--kills``, default 500):
  acknowledged effects lost, runs that no longer verify, bytes changed by ``rar verify``;
* ``powerloss``  — every cut point of journaled writers on a disk that keeps only what was
  fsynced, or that plus a random part of the rest (``tests/powerloss.py``): effects lost,
  stores that do not open or verify;
* ``faults``     — ENOSPC / EIO injected into write, pwrite and fsync with libfiu (``fiu-run``):
  faults that fired, acknowledged effects lost, runs that do not verify;
* ``bitflips``   — one bit flipped in every kind of file (log lines, pack headers and payloads,
  manifests): flips not detected by ``rar verify``, bytes verify changed or deleted;
* ``concurrent`` — ``rar verify`` in a loop while writers record: false alarms;
* ``readonly``   — list, show, verify, export and the viewer's API on a read-only store:
  internal errors;
* ``secrets``    — the redaction corpus (formats × encodings × places): leaks, false redactions;
* ``badinput``   — hostile numbers, dates and text in every viewer parameter and CLI option:
  internal errors (HTTP 5xx, exit code 4).

    python bench/reliability.py [--quick] [--only crash,powerloss,...] [--write-docs]

``--write-docs`` replaces the figures table in ``docs/reliability.md``.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common
from _common import REPO, table, temp_dir

TESTS = REPO / "tests"
sys.path[:0] = [str(TESTS), str(REPO)]  # the tests' helpers, and tests.servers for the viewer
DOC = REPO / "docs" / "reliability.md"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
Row = dict[str, Any]


def _row(section: str, trials: int, lost: int, unverified: int, changed: int, internal: int) -> Row:
    values = (section, trials, lost, unverified, changed, internal)
    return dict(zip(COLUMNS, values, strict=True))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(_common.SRC), env.get("PYTHONPATH"))))
    return env


def checksums(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (what ``rar verify`` must leave alone)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def rar_verify(store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(store), "verify", "--json"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )


# --- crash: SIGKILL at random moments ---------------------------------------------------------


def crash(quick: bool, kills: int) -> Row:
    from rar.store.store import Store

    script = TESTS / "scripts" / "crash_writer.py"
    kills = 40 if quick else kills
    lost = unverified = changed = internal = 0
    rng = random.Random(7)
    with temp_dir("crash") as work:
        store_path = work / "store"
        for n in range(kills):
            run_id = f"20240101-000000-{n:06x}"
            out = work / f"ack-{n}"
            with open(out, "wb") as handle:
                proc = subprocess.Popen(
                    [sys.executable, str(script), str(store_path), run_id, str(n), "1"],
                    stdout=handle,
                    stderr=subprocess.PIPE,
                    env=_env(),
                )
            deadline = time.monotonic() + 60
            while out.stat().st_size == 0 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(rng.uniform(0.0, 0.15))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            lines = out.read_bytes().decode().split("\n")[:-1]
            acknowledged = int(lines[-1]) if lines else 0
            store = Store(store_path)
            try:
                effects = sum(1 for e in store.events(run_id) if e["type"] == "effect")
            except Exception:
                effects = 0
            finally:
                store.close()
            lost += max(0, acknowledged - effects)
            before = checksums(store_path)
            done = rar_verify(store_path)
            unverified += int(done.returncode != 0)
            internal += int(done.returncode == 4 or "internal error" in done.stderr)
            changed += int(checksums(store_path) != before)
    return _row("crash (kill -9)", kills, lost, unverified, changed, internal)


# --- power loss: every cut point of journaled writers -----------------------------------------


def powerloss(quick: bool) -> Row:
    import powerloss as pl

    seeds = (1,) if quick else (1, 2, 3, 4, 5)
    trials = lost = broken = 0
    with temp_dir("powerloss") as work:
        for seed in seeds:
            journal = pl.record_journal(work / f"j{seed}", seed=seed, effects=8 if quick else 25)
            cuts = range(0, journal.cuts, 3) if quick else range(journal.cuts)
            for keep in ("fsynced", "some"):
                for cut in cuts:
                    outcome = pl.check_cut(journal, cut, work / f"c{seed}", keep=keep, seed=cut)  # type: ignore[arg-type]
                    trials += 1
                    lost += outcome.lost_effects + outcome.lost_finishes
                    broken += int(bool(outcome.problems))
                    _remove(work / f"c{seed}" / f"cut-{cut}-{keep}")
    return _row("power loss (cut points)", trials, lost, broken, 0, 0)


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# --- bit flips ----------------------------------------------------------------------------------


def _small_store(path: Path, runs: int = 3) -> None:
    """A few finished runs with inline payloads, blobs (results above the inline limit) and a
    conversation (message chains), so that every kind of file holds something to flip."""
    from helpers import record_small_run

    from rar.redaction import Redactor
    from rar.runtime.start import record
    from rar.store.store import Store

    store = Store(path, create=True)
    for n in range(runs):
        record_small_run(store, steps=4, seed=n)
        with record(f"blobs {n}", store=store, seed=n, redactor=Redactor(env={})) as run:
            for i in range(3):
                run.effect("tool", {"i": i}, lambda i=i: {"data": f"{i}" * 1500})
    store.close()


def bitflips(quick: bool) -> Row:
    import shutil

    flips = 30 if quick else 300
    missed = changed = internal = 0
    rng = random.Random(5)
    by_kind: dict[str, int] = {}
    with temp_dir("bitflips") as work:
        pristine = work / "pristine"
        _small_store(pristine)
        files = [p for p in pristine.rglob("*") if p.is_file() and _kind(p) is not None]
        for n in range(flips):
            target_store = work / f"s{n}"
            shutil.copytree(pristine, target_store)
            victim = target_store / rng.choice(files).relative_to(pristine)
            data = bytearray(victim.read_bytes())
            if not data:
                continue
            position = rng.randrange(len(data))
            data[position] ^= 1 << rng.randrange(8)
            victim.write_bytes(bytes(data))
            kind = _kind(victim) or "other"
            by_kind[kind] = by_kind.get(kind, 0) + 1
            before = checksums(target_store)
            done = rar_verify(target_store)
            missed += int(done.returncode == 0)
            internal += int(done.returncode == 4 or "internal error" in done.stderr)
            changed += int(checksums(target_store) != before)
            shutil.rmtree(target_store)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items()))
    return _row(f"bit flips ({kinds})", flips, 0, missed, changed, internal)


def _kind(path: Path) -> str | None:
    if path.name == "events.jsonl":
        return "log"
    if path.suffix == ".pack":
        return "pack"
    if path.name == "manifest.json":
        return "manifest"
    return None


# --- injected I/O faults (libfiu) ----------------------------------------------------------------


def faults(quick: bool) -> Row:
    import json

    import test_faults as tf
    from rar.store.store import Store
    from rar.store.verify import verify_store

    if not tf._fiu_available():
        return _row("I/O faults (fiu-run not installed)", 0, 0, 0, 0, 0)
    rounds = 1 if quick else 5
    trials = lost = unverified = fired_total = 0
    with temp_dir("faults") as work:
        for case, commands in sorted(tf.FIU_CASES.items()):
            for n in range(rounds):
                store_path, acks = work / f"{case}-{n}", work / f"{case}-{n}.acks"
                args = [tf.FIU_RUN, "-x"]
                for command in commands:
                    args += ["-c", command]
                args += [
                    sys.executable,
                    str(TESTS / "scripts" / "fiu_writer.py"),
                    str(store_path),
                    str(acks),
                    str(tf.FIU_RUNS),
                    str(tf.FIU_EFFECTS),
                ]
                subprocess.run(args, capture_output=True, env=_env(), timeout=600, check=False)
                lines = acks.read_text().splitlines()
                fired = json.loads(lines.pop()[len("faults ") :]) if lines else {}
                fired_total += sum(sum(where.values()) for where in fired.values())
                acked: dict[str, set[int]] = {}
                for line in lines:
                    word, run_id, *rest = line.split(" ", 3)
                    if word == "ack":
                        acked.setdefault(run_id, set()).add(int(rest[0]))
                store = Store(store_path)
                try:
                    for run_id, numbers in acked.items():
                        trials += len(numbers)
                        recorded = {
                            tf._request_i(store, e)
                            for e in store.events(run_id)
                            if e["type"] == "effect"
                        }
                        lost += len(numbers - recorded)
                        unverified += int(not verify_store(store, [run_id]).ok)
                finally:
                    store.close()
    return _row(f"I/O faults ({fired_total} fired)", trials, lost, unverified, 0, 0)


# --- verify while writers write -------------------------------------------------------------------


def concurrent(quick: bool) -> Row:
    from rar.store.store import Store
    from rar.store.verify import verify_store

    verifies = 20 if quick else 100
    alarms = 0
    with temp_dir("concurrent") as work:
        root = work / "runs"
        scripts = TESTS / "scripts"
        slow = subprocess.Popen(
            [
                sys.executable,
                str(scripts / "crash_writer.py"),
                str(root),
                "20240105-000000-00510a",
                "7",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=_env(),
        )
        writers = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(scripts / "concurrent_writer.py"),
                    str(root),
                    str(w),
                    "40" if not quick else "10",
                    "-",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_env(),
            )
            for w in range(4)
        ]
        try:
            while not list(root.glob("*/events.jsonl")):
                time.sleep(0.005)
            for _ in range(verifies):
                store = Store(root)
                try:
                    alarms += len(verify_store(store).problems)
                finally:
                    store.close()
        finally:
            slow.kill()
            slow.wait()
            for proc in writers:
                proc.wait(timeout=600)
    return _row("verify during writes (5 writers)", verifies, 0, alarms, 0, 0)


# --- a read-only store ----------------------------------------------------------------------------


def readonly(quick: bool) -> Row:
    import test_readonly_store as tr

    commands = [["list"], ["list", "--json"], ["verify"], ["verify", "--json"]]
    trials = failures = internal = changed = 0
    with temp_dir("readonly") as work:
        root = work / "runs"
        _small_store(root)
        why = tr._available("read-only-mount", root)
        if why is not None:
            return _row(f"read-only store (skipped: {why})", 0, 0, 0, 0, 0)
        from rar.store.store import Store

        ids = Store(root).run_ids()
        commands += [
            ["show", ids[0]],
            ["export", ids[0], "--format", "trajectory", "-o", str(work / "run.json")],
            ["lineage", ids[0]],
        ]
        before = checksums(root)
        for command in commands:
            done = tr._rar("read-only-mount", root, *command)
            trials += 1
            failures += int(done.returncode != 0)
            internal += int(done.returncode == 4 or b"internal error" in done.stderr)
        changed = int(checksums(root) != before)
    return _row("read-only store (CLI)", trials, 0, failures, changed, internal)


# --- secrets ---------------------------------------------------------------------------------


def secrets(quick: bool) -> Row:
    import redaction_corpus

    figures = redaction_corpus.measure()
    cases = int(figures.get("cases", 0))
    leaks = int(figures.get("leaks", 0))
    benign = int(figures.get("benign", 0))
    false = int(figures.get("false_redactions", 0))
    return _row(
        f"secrets ({cases} leak checks, {benign} benign; columns: leaks, false)",
        cases + benign,
        leaks,
        false,
        0,
        0,
    )


# --- bad input --------------------------------------------------------------------------------


def badinput(quick: bool) -> Row:
    """Every hostile value of tests/test_bad_input.py against a real viewer and the CLI."""
    import httpx2
    from click.testing import CliRunner
    from helpers import record_small_run

    import test_bad_input as bad
    from browser import ViewerServer
    from rar.cli import cli
    from rar.store.store import Store

    trials = internal = 0
    with temp_dir("badinput") as work:
        root = work / "runs"
        store = Store(root, create=True)
        run_id = record_small_run(store).id
        store.close()
        with ViewerServer(root) as server, httpx2.Client(base_url=server.base_url) as client:
            requests: list[tuple[str, dict[str, str]]] = []
            for route, name in bad.TEXT_ROUTES:
                path = route.format(run=run_id)
                base = {"run": run_id, "seq": "1", "field": "request"} if "payload" in path else {}
                requests += [(path, {**base, name: value}) for value in bad.HOSTILE_TEXT]
            for name in ("offset", "limit"):
                path = f"/api/runs/{run_id}/events"
                requests += [(path, {name: value}) for value in bad.NOT_WHOLE_NUMBERS]
            for name in ("since", "until"):
                requests += [("/api/runs", {name: value}) for value in bad.NOT_DATES]
            for value in bad.NOT_WHOLE_NUMBERS:
                requests.append(("/api/payload", {"run": run_id, "seq": value, "field": "request"}))
            for path, params in requests:
                trials += 1
                internal += int(client.get(path, params=params).status_code >= 500)
        for line, _option, _low in bad.WHOLE_OPTIONS:
            for value in bad.CLI_NOT_WHOLE:
                outcome = CliRunner().invoke(cli, ["--store", str(work / "cli"), *line, value])
                trials += 1
                internal += int(outcome.exit_code == 4 or "internal error" in outcome.output)
    return _row("bad input (viewer and CLI)", trials, 0, 0, 0, internal)


SECTIONS: dict[str, Callable[..., Row]] = {
    "crash": crash,
    "powerloss": powerloss,
    "faults": faults,
    "bitflips": bitflips,
    "concurrent": concurrent,
    "readonly": readonly,
    "secrets": secrets,
    "badinput": badinput,
}
COLUMNS = ("section", "trials", "lost", "not verified", "changed by verify", "internal errors")


def write_docs(rows: list[Row]) -> None:
    """Replace the rows of the sections just run in docs/reliability.md's table; keep the rest."""
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    kept = {line.split("|")[1].strip(): line for line in old.strip().splitlines()[2:]}
    fresh = {str(row["section"]): _line(row) for row in rows}
    by_name: dict[str, str] = {}
    for label, line in {**kept, **fresh}.items():
        name = next((n for n, prefix in PREFIXES.items() if label.startswith(prefix)), label)
        if label in fresh or name not in {r["name"] for r in rows}:
            by_name[name] = line
    order = [n for n in SECTIONS if n in by_name] + [n for n in by_name if n not in SECTIONS]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += [by_name[n] for n in order]
    DOC.write_text(f"{head}{BEGIN}\n" + "\n".join(lines) + f"\n{END}{tail}")


def _line(row: Row) -> str:
    return "| " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + " |"


# how each section's row begins (its label may carry figures after that)
PREFIXES = {
    "crash": "crash",
    "powerloss": "power loss",
    "faults": "I/O faults",
    "bitflips": "bit flips",
    "concurrent": "verify during writes",
    "readonly": "read-only store",
    "secrets": "secrets",
    "badinput": "bad input",
}


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [
            ("--only", {"default": ",".join(SECTIONS), "help": "sections, comma-separated"}),
            ("--kills", {"type": int, "default": 500, "help": "crash: how many kills"}),
            ("--write-docs", {"action": "store_true", "help": "update docs/reliability.md"}),
        ],
    )
    rows = []
    for name in args.only.split(","):
        started = time.perf_counter()
        row = crash(args.quick, args.kills) if name == "crash" else SECTIONS[name](args.quick)
        row["seconds"] = f"{time.perf_counter() - started:.0f}"
        row["name"] = name
        rows.append(row)
        print(f"{name}: done in {row['seconds']} s", file=sys.stderr)
    headers = [*COLUMNS, "seconds"]
    print(table(headers, [[row.get(c, "") for c in headers] for row in rows]))
    if args.write_docs:
        write_docs(rows)


if __name__ == "__main__":
    main()
