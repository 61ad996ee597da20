"""Spans: where a credential is in a string, and how found spans become markers."""

from __future__ import annotations

from ._tags import marker

# (start, end, priority, kind, the text the tag is computed from; None: text[start:end])
Span = tuple[int, int, int, str, str | None]

# Which kind names the marker when spans overlap: the most specific finding.
LITERAL, PEM, VENDOR, SCHEME, NAMED, USERINFO, BASE64 = 90, 85, 80, 65, 60, 40, 30


def apply_spans(text: str, spans: list[Span]) -> str:
    """``text`` with each span replaced by its marker; overlapping spans are merged first."""
    # Leftmost first, then longest, then highest priority, then one tagged from its decoded
    # form (a URL-encoded key gets the tag of the key itself).
    spans.sort(key=lambda s: (s[0], -s[1], -s[2], s[4] is None))
    merged: list[Span] = []
    for span in spans:
        if merged and span[0] < merged[-1][1]:
            prev = merged[-1]
            if span[1] > prev[1]:
                kind = prev[3] if prev[2] >= span[2] else span[3]
                merged[-1] = (prev[0], span[1], max(prev[2], span[2]), kind, None)
            continue
        merged.append(span)
    parts: list[str] = []
    last = 0
    for start, end, _, kind, tagged in merged:
        parts.append(text[last:start])
        parts.append(marker(kind, text[start:end] if tagged is None else tagged))
        last = end
    parts.append(text[last:])
    return "".join(parts)
