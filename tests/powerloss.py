"""A power-loss simulation: replay a journal of file operations to a cut point, as a disk would.

``tests/scripts/journaled_writer.py`` records runs and journals every file operation the store
makes (create, write, truncate, fsync, rename, mkdir, unlink) plus an ``ack`` after each effect
is handed back. :func:`machine_at` replays the journal up to a cut point on a model of a
filesystem with a page cache:

* a file's bytes are durable as of its last ``fsync``; writes after it are lost, or — with
  ``keep="some"`` — kept in part (a random prefix of what was appended, possibly ending in the
  middle of a write), as writeback may have happened before the power went;
* a directory entry (a new file, a new directory, a rename, an unlink) is durable only once the
  directory itself was fsynced after it; until then the entry may or may not survive;
* ``index.sqlite`` is never journaled (SQLite writes through its own layer): it is simply gone.

:func:`check_cut` materialises that machine in a directory and checks the promises of a durable
store: it opens and lists, ``verify`` finds nothing wrong (a torn tail is a note, not a problem),
every acknowledged effect is in its log, a run acknowledged as finished is finished, and a writer
can reopen every run's log.
"""

from __future__ import annotations

import base64
import os
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

SCRIPT = Path(__file__).resolve().parent / "scripts" / "journaled_writer.py"
SRC = Path(__file__).resolve().parents[1] / "src"
Keep = Literal["fsynced", "some"]


@dataclass
class _Node:
    is_dir: bool
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""


@dataclass
class Journal:
    ops: list[dict[str, Any]]
    root: Path  # the store directory the writer used

    @property
    def cuts(self) -> int:
        return len(self.ops) + 1


def record_journal(workdir: Path, *, seed: int, effects: int) -> Journal:
    """Run the journaled writer once (two durable runs of ``effects`` effects each)."""
    workdir.mkdir(parents=True, exist_ok=True)
    store, journal = workdir / "store", workdir / "journal.jsonl"
    path = os.pathsep.join(filter(None, (str(SRC), os.environ.get("PYTHONPATH"))))
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(store), str(journal), str(seed), str(effects)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the journaled writer failed: {done.stderr[-2000:]}")
    ops = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
    return Journal(ops, store)


def machine_at(journal: Journal, cut: int, *, keep: Keep, rng: random.Random) -> dict[str, Any]:
    """What the disk holds after a power loss just before ``journal.ops[cut]``.

    Returns ``{"files": {relative path: bytes}, "dirs": [relative paths], "acked": {...}}``
    for everything under the store directory, and what had been acknowledged by then.
    """
    nodes: dict[str, _Node] = {}  # current namespace: path -> node
    durable_names: dict[str, _Node] = {}  # namespace as of the last fsync of each directory
    acked: dict[str, dict[str, Any]] = {}
    base = str(journal.root.parent)
    for op in journal.ops[:cut]:
        kind = op["op"]
        if kind == "ack":
            entry = acked.setdefault(op["run"], {"effects": 0, "finished": False})
            if "effects" in op:
                entry["effects"] = op["effects"]
            if op.get("finished"):
                entry["finished"] = True
        elif kind in ("create", "mkdir"):
            nodes[op["path"]] = _Node(is_dir=kind == "mkdir")
        elif kind == "write":
            node = nodes.setdefault(op["path"], _Node(is_dir=False))
            data = base64.b64decode(op["data"])
            offset = int(op["offset"])
            if len(node.data) < offset:
                node.data.extend(b"\0" * (offset - len(node.data)))
            node.data[offset : offset + len(data)] = data
        elif kind == "truncate_path":
            if op["path"] in nodes:
                del nodes[op["path"]].data[int(op["size"]) :]
        elif kind == "fsync":
            path = op["path"]
            node = nodes.get(path)
            if node is not None and not node.is_dir:
                node.durable = bytes(node.data)
            if op.get("dir") or (node is not None and node.is_dir):
                prefix = path.rstrip("/") + "/"
                for name in [n for n in durable_names if _parent(n) == path]:
                    if name not in nodes or nodes[name] is not durable_names[name]:
                        del durable_names[name]
                for name, child in nodes.items():
                    if name.startswith(prefix) and _parent(name) == path:
                        durable_names[name] = child
        elif kind == "replace":
            moved = nodes.pop(op["src"], None)
            if moved is not None:
                nodes[op["dst"]] = moved
        elif kind == "unlink":
            nodes.pop(op["path"], None)
    files: dict[str, bytes] = {}
    dirs: list[str] = []
    names = dict(durable_names)
    if keep == "some":  # entries not yet durable may have reached the disk anyway
        for name, node in nodes.items():
            if name not in names and rng.random() < 0.5:
                names[name] = node
    for name, node in names.items():
        if not _reachable(name, names, base):
            continue
        rel = os.path.relpath(name, str(journal.root))
        if rel.startswith(".."):
            continue
        if node.is_dir:
            dirs.append(rel)
            continue
        content = node.durable
        if keep == "some" and bytes(node.data).startswith(content) and len(node.data) > len(
            content
        ):
            extra = len(node.data) - len(content)
            content = bytes(node.data[: len(content) + rng.randint(0, extra)])
        files[rel] = content
    return {"files": files, "dirs": sorted(dirs), "acked": acked}


def _parent(path: str) -> str:
    return os.path.dirname(path.rstrip("/"))


def _reachable(name: str, names: dict[str, _Node], base: str) -> bool:
    """Whether every directory between ``base`` (which survives) and ``name`` survived."""
    parent = _parent(name)
    while parent != base and len(parent) > len(base):
        if parent not in names or not names[parent].is_dir:
            return False
        parent = _parent(parent)
    return True


def materialize(machine: dict[str, Any], target: Path) -> Path:
    """Write the machine's store into ``target`` (the store directory); return it."""
    target.mkdir(parents=True)
    for rel in machine["dirs"]:
        (target / rel).mkdir(parents=True, exist_ok=True)
    for rel, data in machine["files"].items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(data)
    return target


@dataclass
class CutResult:
    cut: int
    acked_effects: int
    lost_effects: int = 0
    lost_finishes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.lost_effects and not self.lost_finishes


def check_cut(journal: Journal, cut: int, workdir: Path, *, keep: Keep, seed: int) -> CutResult:
    """Cut the power before ``journal.ops[cut]``; check the store that is left."""
    from rar.errors import RarError
    from rar.redaction import Redactor
    from rar.store.store import Store
    from rar.store.verify import verify_store
    from rar.store.writer import RunWriter

    machine = machine_at(journal, cut, keep=keep, rng=random.Random(seed))
    acked = machine["acked"]
    outcome = CutResult(cut, sum(a["effects"] for a in acked.values()))
    root = materialize(machine, workdir / f"cut-{cut}-{keep}")
    try:
        store = Store(root)
        store.list_runs()
        report = verify_store(store)
        outcome.problems += [f"verify: {p.what}: {p.detail}" for p in report.problems]
        for run_id, promised in acked.items():
            run_dir = root / run_id
            events = store.events(run_id) if (run_dir / "events.jsonl").exists() else []
            effects = sum(1 for e in events if e["type"] == "effect")
            outcome.lost_effects += max(0, promised["effects"] - effects)
            finished = any(e["type"] == "run.finished" for e in events)
            outcome.lost_finishes += int(promised["finished"] and not finished)
        for run_id in store.run_ids():
            writer = RunWriter(store, run_id, redactor=Redactor(env={}), create=False)
            writer.close()
        store.close()
    except (RarError, OSError, ValueError) as exc:
        outcome.problems.append(f"{type(exc).__name__}: {exc}")
    return outcome
