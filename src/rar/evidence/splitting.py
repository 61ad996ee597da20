"""Splitting a document's text into passages, and finding its title.

Rules (documented in ``docs/evidence.md``):

* line endings are normalised to ``\\n`` (a CRLF checkout gives the same passages and hashes);
* a *block* is a run of non-blank lines (a whitespace-only line is blank); a fenced code block
  (```` ``` ```` or ``~~~``) is one block even when it contains blank lines;
* a *heading block* is a block made only of headings: ATX lines (``# Title``), or one line with a
  setext / reStructuredText underline (``Title`` / ``=====``, optionally overlined);
* a heading block attaches to the block after it (consecutive headings all attach), so a
  passage carries its section title; a heading at the very end forms its own passage;
* a block with no letter or digit (a thematic break ``---``, a lone ``***``) is no passage;
* a passage's text is its blocks' lines exactly as written, blocks joined by one blank line.
"""

from __future__ import annotations

import re

_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")
_CONTENT = re.compile(r"[^\W_]")
_ATX_TEXT = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def _blocks(text: str) -> list[tuple[int, list[str]]]:
    """(1-based first line, lines) of each block."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    fence: str | None = None
    for number, line in enumerate(lines, start=1):
        if fence is not None:
            current.append(line)
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        if not line.strip():
            if current:
                blocks.append((start, current))
                current = []
            continue
        if not current:
            start = number
        current.append(line)
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
    if current:
        blocks.append((start, current))
    return blocks


def _is_heading(lines: list[str], rst: bool) -> bool:
    if all(_ATX.match(line) for line in lines):
        return True
    if len(lines) == 2 and lines[0].strip() and not _ATX.match(lines[0]):
        return bool(_SETEXT.match(lines[1]) or (rst and _RST_ADORNMENT.match(lines[1])))
    if rst and len(lines) == 3:
        return bool(_RST_ADORNMENT.match(lines[0]) and _RST_ADORNMENT.match(lines[2]))
    return False


def split_passages(text: str, *, rst: bool = False) -> list[tuple[int, str]]:
    """(1-based start line, text) of each passage of a document, in order."""
    passages: list[tuple[int, str]] = []
    pending: list[tuple[int, list[str]]] = []
    for start, lines in _blocks(text):
        if not any(_CONTENT.search(line) for line in lines):
            continue
        pending.append((start, lines))
        if not _is_heading(lines, rst):
            passages.append((pending[0][0], "\n\n".join("\n".join(b) for _, b in pending)))
            pending = []
    if pending:
        passages.append((pending[0][0], "\n\n".join("\n".join(b) for _, b in pending)))
    return passages


def title_of(text: str, *, markdown: bool, rst: bool) -> str:
    """The first heading (markdown or reStructuredText), else the first non-blank line."""
    blocks = _blocks(text)
    if markdown or rst:
        for _, lines in blocks:
            for index, line in enumerate(lines):
                if markdown:
                    match = _ATX_TEXT.match(line)
                    if match and match.group(1).strip():
                        return _clean(match.group(1))
                following = lines[index + 1] if index + 1 < len(lines) else ""
                underline = (_SETEXT.match(following) and markdown) or (
                    rst and _RST_ADORNMENT.match(following)
                )
                if (
                    underline
                    and line.strip()
                    and not _RST_ADORNMENT.match(line)
                    and not _FENCE.match(line)
                ):
                    return _clean(line)
    for _, lines in blocks:
        for line in lines:
            cleaned = _clean(line)
            if cleaned:
                return cleaned
    return ""


def _clean(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= 200 else line[:199].rstrip() + "…"
