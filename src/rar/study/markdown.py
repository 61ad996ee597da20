"""A study report as Markdown (``report.md``): the tables of ``report.json``, for people."""

from __future__ import annotations

from typing import Any


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            f"{value:.{digits}g}"
            if abs(value) >= 1000 or 0 < abs(value) < 0.001
            else (f"{value:.{digits}f}".rstrip("0").rstrip(".") or "0")
        )
    return str(value)


def _cell(value: Any) -> str:
    return _num(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def report_markdown(report: dict[str, Any]) -> str:
    study, counts, replay = report["study"], report["counts"], report["replay"]
    lines = [
        f"# Study {study['name'] or study['run_id']}",
        "",
        f"Study run `{study['run_id']}` ({study['status']}, strict replay: "
        f"{study['replay']['status']}). {counts['cells']} cells: {counts['completed']} completed, "
        f"{counts['failed']} failed, {counts['missing']} not run; {counts['reused']} reused from "
        "the store.",
        "",
        f"Replay: {replay['reproducible']} of {replay['runs']} runs replay `reproducible` "
        f"({'all' if replay['all_reproducible'] else 'NOT all'}). Audit pass rate: "
        f"{_num(report['audit_pass_rate'])}.",
        "",
        "## Agreement across seeds",
        "",
        "Agreement is the share of runs giving the group's most common answer; normalised, "
        "whitespace is collapsed and numbers are rounded to 4 significant digits. Evidence "
        "overlap is the mean Jaccard index of the runs' anchor sets over every pair.",
        "",
    ]
    groups = report["groups"]
    lines += _table(
        ["group", "question / flow", "runs", "failed", "exact", "normalised", "evidence",
         "audit", "distinct answers"],
        [[f"G{n}", g["label"], g["runs"], g["failed"], g["agreement_exact"],
          g["agreement_normalised"], g["evidence_jaccard"], g["audit_pass_rate"],
          g["distinct_answers"]] for n, g in enumerate(groups, start=1)],
    )  # fmt: skip
    values = [
        [f"G{n}", name, v["n"], v["mean"], v["spread"], v["stdev"], v["cv"]]
        for n, g in enumerate(groups, start=1)
        for name, v in g["values"].items()
    ]
    if values:
        lines += ["## Computed values", ""]
        lines += _table(["group", "quantity", "n", "mean", "spread", "stdev", "CV"], values)
    lines += ["## Cost, tokens and latency", ""]
    lines += _table(
        ["", "n", "min", "median", "mean", "max"],
        [[name, d["n"], d["min"], d["median"], d["mean"], d["max"]]
         for name, d in report["distributions"].items()],
    )  # fmt: skip
    files = report.get("files", {})
    for stem in ("agreement", "distributions"):
        if f"{stem}_png" in files:
            lines += [f"![{stem}]({files[f'{stem}_png']}) ([SVG]({files[f'{stem}_svg']}))", ""]
    lines += ["## Runs that disagree with their group's majority", ""]
    disagreeing = [(n, d, g) for n, g in enumerate(groups, start=1) for d in g["disagreeing"]]
    if not disagreeing:
        lines += ["None: every run gave its group's majority answer (normalised).", ""]
    for n, item, group in disagreeing:
        lines.append(
            f"- G{n} seed {item['seed']}: run `{item['run_id']}` vs majority run "
            f"`{group['majority_run']}`: [diff]({item['diff_markdown']}) "
            f"({item['first_divergence'] or 'no step diverges'})"
        )
    lines += ["", "## Cells", ""]
    lines += _table(
        ["cell", "seed", "run", "status", "replay", "error"],
        [[c["digest"].removeprefix("sha256:")[:12], c["params"].get("seed"), c.get("run_id"),
          c["status"], (c.get("replay") or {}).get("status"),
          f"{c['error']['type']}: {c['error']['message']}" if c.get("error") else None]
         for c in report["cells"]],
    )  # fmt: skip
    return "\n".join(lines)
