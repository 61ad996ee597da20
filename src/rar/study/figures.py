"""The report's figures, drawn with matplotlib (no display needed), as PNG and SVG.

* ``agreement``: per group (G1, G2, … as in the report's table), the exact and normalised answer
  agreement and the evidence overlap, each between 0 and 1;
* ``distributions``: every finished run's cost, tokens and latency, one panel each.

Nothing in the files depends on when they were drawn (no date in the metadata, fixed SVG ids).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_METADATA = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None}}


def _save(figure: Any, out: Path, stem: str) -> dict[str, Path]:
    import matplotlib

    written: dict[str, Path] = {}
    with matplotlib.rc_context({"svg.hashsalt": "rar-study", "svg.fonttype": "none"}):
        for fmt in ("png", "svg"):
            path = out / f"{stem}.{fmt}"
            figure.savefig(path, format=fmt, metadata=_METADATA[fmt], dpi=100)
            written[f"{stem}_{fmt}"] = path
    return written


def agreement_figure(report: dict[str, Any]) -> Any:
    from matplotlib.figure import Figure

    groups = report["groups"]
    names = [f"G{n}" for n in range(1, len(groups) + 1)]
    series = (
        ("agreement_exact", "answer agreement (exact)"),
        ("agreement_normalised", "answer agreement (normalised)"),
        ("evidence_jaccard", "evidence overlap (Jaccard)"),
    )
    figure = Figure(figsize=(7, 1.8 + 0.45 * len(groups) * len(series) / 2))
    axes = figure.add_subplot()
    height = 0.8 / len(series)
    for index, (key, label) in enumerate(series):
        values = [g[key] if g[key] is not None else 0.0 for g in groups]
        positions = [n + index * height for n in range(len(groups))]
        axes.barh(positions, values, height=height, label=label)
    axes.set_yticks([n + height for n in range(len(groups))], names)
    axes.invert_yaxis()
    axes.set_xlim(0, 1.05)
    axes.set_xlabel("share of runs (1 = all seeds agree)")
    # below the axes: inside, it hid the bars of the last group
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.32), ncol=3, fontsize="small")
    figure.tight_layout()
    return figure


def distributions_figure(report: dict[str, Any]) -> Any:
    from matplotlib.figure import Figure

    cells = [c for c in report["cells"] if "latency_s" in c]
    panels = (("cost", "cost (USD)"), ("tokens", "tokens (input + output)"),
              ("latency_s", "latency (s)"))  # fmt: skip
    figure = Figure(figsize=(9, 3))
    for index, (key, label) in enumerate(panels, start=1):
        axes = figure.add_subplot(1, len(panels), index)
        values = [float(c[key]) for c in cells]
        if values:
            axes.boxplot(values, widths=0.5)
            axes.scatter([1] * len(values), values, s=8, alpha=0.6)
        axes.set_title(label, fontsize="small")
        axes.set_xticks([])
    figure.tight_layout()
    return figure


def write_figures(report: dict[str, Any], out: Path) -> dict[str, Path]:
    """Draw both figures into ``out``; return ``{agreement_png: path, ...}``."""
    written = _save(agreement_figure(report), out, "agreement")
    written.update(_save(distributions_figure(report), out, "distributions"))
    return written
