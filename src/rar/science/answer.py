"""The final answer as markdown: the question, one bullet per claim with numbered citations,
the sources, and what is uncertain.

::

    markdown, evidence_used = render_answer(question, claims, lead="…", notes=["…"])

Sources are numbered in order of first citation; a claim cites ``[n]`` for each anchor
reference it carries (``doc_id#location``). With no claim, the answer says plainly that the
corpus does not answer the question — never a list of unrelated sentences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NOT_ANSWERED = "The corpus does not answer this question"


def render_answer(
    question: str,
    claims: Sequence[Mapping[str, Any]],
    *,
    lead: str = "",
    notes: Iterable[str] = (),
    unanswered_reason: str = "",
) -> tuple[str, list[str]]:
    """(markdown, evidence_used) for the claims, each bullet citing its sources."""
    numbers: dict[str, int] = {}
    for claim in claims:  # sources numbered in order of first citation
        for ref in claim.get("anchors", []):
            numbers.setdefault(str(ref), len(numbers) + 1)
    lines = [f"**Question.** {question}", ""]
    if lead and claims:
        lines += [lead, ""]
    for claim in claims:
        cites = "".join(f"[{numbers[str(ref)]}]" for ref in claim.get("anchors", []))
        lines.append(f"- {claim['text']} {cites}".rstrip())
    if not claims:
        reason = f": {unanswered_reason}" if unanswered_reason else "."
        lines.append(f"{NOT_ANSWERED}{reason}")
    extra = [note for note in notes if note]
    if extra:
        lines += ["", *extra]
    if numbers:
        lines += ["", "**Sources.**"]
        lines += [
            f"- [{n}] {ref.partition('#')[0]}, {ref.partition('#')[2]}"
            for ref, n in numbers.items()
        ]
    return "\n".join(lines), list(numbers)
