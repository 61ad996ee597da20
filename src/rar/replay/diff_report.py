"""A run diff as a Markdown report, and both forms saved in the store (``rar diff A B --save``).

::

    diff = diff_runs(store, a, b)
    text = diff_markdown(diff)
    saved = save_diff(store, diff)   # <store>/diffs/<A>..<B>.json and .md
    saved.json, saved.markdown

Saved diffs live in ``<store>/diffs/``, outside every run directory (a run's files are sealed
by its hash chain and manifest): ``<A>..<B>.json`` holds :meth:`RunDiff.as_dict` (the shape of
``rar diff --json``), ``<A>..<B>.md`` the report below, with full run ids. Each file is written
to a temporary file and renamed over the old one, so a reader sees the previous diff or the new
one, never part of one; saving the same diff again gives the same bytes (nothing in them depends
on when it was saved). A store that cannot be written is refused before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from rar.errors import AppendError, StoreError, StoreNotWritableError
from rar.replay.fields import FieldDiff

if TYPE_CHECKING:
    from rar.replay.diff_model import RunDiff
    from rar.store.store import Store

DIFFS_DIR = "diffs"
MAX_ROWS = 200


@dataclass(frozen=True, slots=True)
class SavedDiff:
    json: Path
    markdown: Path


def diff_path(store: Store, a_id: str, b_id: str, suffix: str) -> Path:
    """Where the diff of runs ``a_id`` and ``b_id`` (full ids) is saved, ``suffix`` ``.json`` or
    ``.md``."""
    return store.root / DIFFS_DIR / f"{a_id}..{b_id}{suffix}"


def check_writable(store: Store) -> None:
    """Refuse, before any work, a store a diff cannot be saved in."""
    try:
        store.ensure_writable()
    except StoreNotWritableError as exc:
        cause = exc.__cause__
        why = (getattr(cause, "strerror", None) or str(cause)) if cause else "opened read-only"
        raise StoreError(
            f"cannot save the diff in the store at {store.root}: it cannot be written here "
            f"({why}). Print it instead (rar diff A B --json > FILE), or copy the store to a "
            f"writable place (cp -a {store.root} DIR) and save it there with --store DIR",
            path=store.root,
        ) from exc


def save_diff(store: Store, diff: RunDiff) -> SavedDiff:
    """Write ``diff`` as JSON and Markdown into ``<store>/diffs/`` (atomically, each file)."""
    from rar.store._fs import atomic_write, make_dirs

    check_writable(store)
    saved = SavedDiff(
        json=diff_path(store, diff.a.run_id, diff.b.run_id, ".json"),
        markdown=diff_path(store, diff.a.run_id, diff.b.run_id, ".md"),
    )
    data = orjson.dumps(diff.as_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    try:
        make_dirs(saved.json.parent)
        atomic_write(saved.json, data + b"\n")
        atomic_write(saved.markdown, diff_markdown(diff).encode("utf-8"))
    except OSError as exc:
        raise StoreError(
            f"cannot save the diff in {saved.json.parent}: {exc.strerror or exc}", path=store.root
        ) from exc
    except AppendError as exc:
        raise StoreError(f"cannot save the diff: {exc.message}", path=store.root) from exc
    return saved


# --- Markdown ------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    """A table cell: one line, pipes escaped, no raw HTML."""
    if value is None:
        text = "–"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    else:
        text = orjson.dumps(value).decode()
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;") or " "


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return lines


def _fence(text: str, info: str = "") -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, text, fence]


def _fields(fields: tuple[FieldDiff, ...], omitted: int) -> list[str]:
    rows: list[list[Any]] = [
        [
            item.path,
            "(absent)" if item.change == "added" else item.a,
            "(absent)" if item.change == "removed" else item.b,
        ]
        for item in fields
    ]
    if omitted:
        rows.append([f"… {omitted} more", "", ""])
    return _table(["field", "A", "B"], rows)


def _concurrent(groups: tuple[tuple[str, ...], ...]) -> list[str]:
    """The note naming the groups of sibling spans that ran concurrently."""
    names = []
    for group in groups[:MAX_ROWS]:
        shown = ", ".join(f"`{span}`" for span in group[:5])
        names.append(shown + (f" and {len(group) - 5} more" if len(group) > 5 else ""))
    more = [f"- … {len(groups) - MAX_ROWS} more groups"] if len(groups) > MAX_ROWS else []
    return [
        "Concurrent spans, compared span by span in the order they were opened (not as their "
        "steps interleaved in the log):",
        "",
        *(f"- {shown}" for shown in names),
        *more,
    ]


def diff_markdown(diff: RunDiff) -> str:
    """The diff as a Markdown document: the runs, the verdict (and the concurrent spans, if
    any), the first divergence, the steps that differ, the steps by span (when there are
    several spans), the answers, the evidence, usage and the manifest differences."""
    a, b = diff.a, diff.b
    lines = [f"# Diff of run {a.run_id} and run {b.run_id}", ""]
    lines += _table(
        ["", "run", "status", "events", "steps", "goal"],
        [
            ["A", a.run_id, a.status, a.events, a.steps, a.goal],
            ["B", b.run_id, b.status, b.events, b.steps, b.goal],
        ],
    )
    counts = ", ".join(f"{n} {status}" for status, n in diff.counts.items() if n) or "no steps"
    answer = "same answer" if diff.answer.equal else "answers differ"
    verdict = "equivalent" if diff.equivalent else "different"
    lines += ["", f"**{verdict}**: {counts}; {answer}."]
    if diff.concurrent:
        lines += ["", *_concurrent(diff.concurrent)]

    first = diff.first_divergence
    if first is not None:
        step = first.aligned.step
        sides = (("A", first.aligned.a), ("B", first.aligned.b))
        where = ", ".join(f"{name} seq {s.seq} #{s.ordinal}" for name, s in sides if s)
        lines += [
            "",
            "## First divergence",
            "",
            f"Step {first.index + 1} of {len(diff.steps)}: **{first.aligned.status}**, "
            f"`{step.span}` · {step.kind} · {where}.",
            "",
            f"Why: {_cell(first.reason)}.",
        ]
        if first.detail is not None:
            lines += ["", *_fence(first.detail)]
        if first.fields:
            lines += ["", f"The {first.compared} fields that differ:", ""]
            lines += _fields(first.fields, first.fields_omitted)

    changed = [(i, s) for i, s in enumerate(diff.steps) if s.status != "same"]
    if changed:
        lines += ["", "## Steps that differ", ""]
        lines.append(f"{len(diff.steps) - len(changed)} steps are the same and not listed.")
        lines.append("")
        rows = [
            [
                index + 1,
                aligned.status,
                aligned.step.span,
                aligned.step.kind,
                f"{aligned.a.seq}:{aligned.a.ordinal}" if aligned.a else None,
                f"{aligned.b.seq}:{aligned.b.ordinal}" if aligned.b else None,
            ]
            for index, aligned in changed[:MAX_ROWS]
        ]
        lines += _table(["#", "status", "span", "kind", "A seq:ord", "B seq:ord"], rows)
        if len(changed) > MAX_ROWS:
            lines += ["", f"… {len(changed) - MAX_ROWS} more (the JSON file lists every step)."]

    spans = diff.spans
    if len(spans) > 1:
        lines += ["", "## Steps by span", ""]
        rows = [
            [
                summary.first + 1,
                summary.span,
                summary.steps,
                "same" if summary.same else summary.describe(),
            ]
            for summary in spans[:MAX_ROWS]
        ]
        lines += _table(["first step", "span", "steps", "status"], rows)
        if len(spans) > MAX_ROWS:
            lines += ["", f"… {len(spans) - MAX_ROWS} more spans."]

    lines += ["", "## Answer", ""]
    if diff.answer.status_a != diff.answer.status_b:
        lines += [f"Status {diff.answer.status_a} → {diff.answer.status_b}.", ""]
    if diff.answer.diff:
        lines += _fence("\n".join(diff.answer.diff), "diff")
    else:
        lines += ["The same text in both runs:", "", *_fence(diff.answer.a or "", "text")]

    evidence = diff.evidence
    if evidence:
        lines += ["", "## Evidence", ""]
        rows = [
            [sign, anchor.get("doc_id"), anchor.get("location"), anchor.get("snippet")]
            for sign, anchors in (("added in B", evidence.added), ("only in A", evidence.removed))
            for anchor in anchors
        ]
        rows += [
            [
                "content changed",
                item.get("doc_id"),
                item.get("location"),
                f"{_cell(item.get('a'))[:19]} → {_cell(item.get('b'))[:19]}",
            ]
            for item in evidence.changed
        ]
        lines += _table(["", "document", "location", "passage"], rows)

    if diff.metrics:
        lines += ["", "## Usage, cost, latency, cache", "", "Never counted as divergence.", ""]
        lines += _table(
            ["metric", "A", "B", "Δ (B − A)"],
            [[m.name, m.a, m.b, m.delta or None] for m in diff.metrics],
        )

    lines += ["", "## Manifest differences", ""]
    if diff.manifest:
        lines += _fields(diff.manifest, diff.manifest_omitted)
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"
