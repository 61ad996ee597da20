"""The science runtime: answer quality over a question set, and `rar run` / `rar replay` times.

Part 1 (quality): every question of `tests/data/science_questions.yaml` (the demo corpus, one
question per document; two corpora in other fields with data tables; off-topic questions) is
answered offline, graded (`rar.science.evaluation`: the expected value within its tolerance and
unit, computed when it should be; the methods named; the causes stated; the off-topic question
answered honestly with the audit not passed) and replayed strictly. Part 2 (timing): a fresh
`python -m rar` process on a fresh store for a prose question and a Kissinger fit, and the
replay of each.

    python bench/science.py [--quick] [--only ID_PREFIX] [--mode MODE] [--show] [--timing-only]

Goals: every question passes and every run replays `reproducible`; `rar run` ≤ 5 s wall on
2 cores; `rar replay` of it ≤ 1 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import _common
from _common import median, table, temp_dir

from rar.replay import replay
from rar.science import ask_question
from rar.science.evaluation import Grade, grade, load_questions
from rar.store.store import Store

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "tests" / "data" / "science_questions.yaml"
SPECS = REPO / "src" / "rar" / "science" / "specs"
CASES = [
    (
        "prose question (owl_lite)",
        ["run", "Why do narrow temperature ranges make Arrhenius estimates uncertain?"],
    ),
    ("Kissinger fit in the sandbox (owl_dl)", ["run", "--spec", str(SPECS / "kissinger.yaml")]),
]


def timed(args: list[str], store: Path) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "rar", "--store", str(store), *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - started, out.stdout


def expected(grade_: Grade) -> str:
    expect = grade_.entry.expect
    if grade_.entry.kind == "off_topic":
        return "not answered"
    if "value" in expect:
        how = "computed" if expect.get("computed") else "stated"
        unit = expect.get("unit", "")
        return f"{expect['value']:g} ± {expect.get('tolerance', 0):g} {unit} ({how})"
    mentions = [str(m).split("|")[0] for m in expect.get("must_mention", [])]
    return ", ".join(mentions)[:48]


def quality(only: str | None, mode: str | None, show: bool) -> list[Grade]:
    entries = [e for e in load_questions(QUESTIONS) if not only or e.id.startswith(only)]
    rows, grades = [], []
    with temp_dir("science-quality") as tmp:
        store = Store(tmp / "store")
        for entry in entries:
            started = time.perf_counter()
            result = ask_question(
                entry.question, mode=mode or entry.mode, corpus=entry.corpus, store=store
            )
            seconds = time.perf_counter() - started
            graded = grade(entry, result)
            grades.append(graded)
            status = replay(result.run_id, store=store).replay_status
            got = (
                "not answered"
                if not result.claims
                else (
                    f"{graded.found_value:g}"
                    if graded.found_value is not None
                    else f"{len(result.claims)} claims"
                )
            )
            rows.append(
                [
                    entry.id,
                    entry.kind,
                    expected(graded),
                    got,
                    "pass" if graded.passed else "FAIL",
                    "passed" if result.audit.get("passed") else "not passed",
                    str(status),
                    f"{seconds:.2f}",
                ]
            )
            if show or not graded.passed:
                print(f"\n## {entry.id} ({result.status})\n{result.answer}")
                for problem in graded.problems:
                    print(f"  PROBLEM: {problem}")
    passed = sum(g.passed for g in grades)
    print(
        table(
            ["question", "kind", "expected", "answer gives", "grade", "audit", "replay", "run s"],
            rows,
            title=f"answer quality: {passed}/{len(grades)} questions pass "
            f"(mode: {mode or 'per question'})",
        )
    )
    return grades


def timing(reps: int) -> None:
    rows = []
    for label, command in CASES:
        runs, replays = [], []
        for rep in range(reps):
            with temp_dir("science") as tmp:
                store = tmp / f"store-{rep}"
                seconds, out = timed(command, store)
                runs.append(seconds)
                run_id = json.loads(out)["run_id"]
                seconds, out = timed(["replay", run_id], store)
                assert json.loads(out)["replay_status"] == "reproducible"
                replays.append(seconds)
        if label.startswith("Kissinger"):
            _common.summary("rar replay, science demo (Kissinger)", f"{median(replays):.2f} s",
                            f"rar run {median(runs):.2f} s", "<= 1 s", median(replays) <= 1)
        rows.append(
            [
                label,
                f"{median(runs):.2f}",
                "<= 5",
                _common.verdict(median(runs) <= 5),
                f"{median(replays):.2f}",
                "<= 1",
                _common.verdict(median(replays) <= 1),
            ]
        )
    print(
        table(
            [
                "question",
                "rar run s (median)",
                "goal",
                "met",
                "rar replay s (median)",
                "goal",
                "met",
            ],
            rows,
            title=f"science: {reps} cold runs each, fresh store and process every time",
        )
    )


def main() -> None:
    args = _common.parse_args(
        __doc__.splitlines()[0],
        [
            ("--only", {"default": None, "help": "only questions whose id starts with this"}),
            ("--mode", {"default": None, "help": "answer every question in this mode"}),
            ("--show", {"action": "store_true", "help": "print every answer"}),
            ("--no-timing", {"action": "store_true", "help": "skip the cold-process timings"}),
            ("--timing-only", {"action": "store_true", "help": "skip the answer-quality part"}),
        ],
    )
    if not args.timing_only:
        quality(args.only, args.mode, args.show)
    if not args.no_timing:
        timing(2 if args.quick else 5)


if __name__ == "__main__":
    main()
