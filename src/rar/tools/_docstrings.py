"""A tool's description and its arguments' descriptions, read from the function's docstring.

The maintained ``docstring_parser`` package reads the four common styles — Google (``Args:``),
NumPy (``Parameters`` over a ``----------`` rule), Sphinx/reST (``:param x:``) and Epydoc
(``@param x:``) — and the one that finds the most sections wins. The description the model sees
is the summary and the body text only: sections (arguments, returns, raises, examples, notes,
...) never leak into it; each argument's text goes to its JSON Schema property instead.
Wrapped lines are joined with spaces, blank-line paragraph breaks kept.
"""

from __future__ import annotations

import inspect
import re

from docstring_parser import Docstring, ParseError, epydoc, google, numpydoc, rest

_MULTIPLE, _SINGULAR = google.SectionType.MULTIPLE, google.SectionType.SINGULAR
#: Google sections beyond docstring_parser's defaults that Google's style guide and Napoleon
#: know: their text must not end up in the description either.
_GOOGLE = google.GoogleParser(
    [
        *google.DEFAULT_SECTIONS,
        *(
            google.Section(title, "param", _MULTIPLE)
            for title in ("Keyword Args", "Keyword Arguments", "Other Parameters")
        ),
        *(
            google.Section(title, title.lower().replace(" ", "_"), _SINGULAR)
            for title in (
                "Note",
                "Notes",
                "Warning",
                "Warnings",
                "See Also",
                "References",
                "Todo",
            )
        ),
    ]
)
_TITLES = (
    "Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|Returns?|"
    "Yields?|Raises|Exceptions?|Except|Examples?|Notes?|Warnings?|See Also|Attributes|Methods|"
    "References|Todo"
)
#: A line that opens a section in any of the styles: what is left of a docstring no parser could
#: read (a Google argument over two paragraphs, say) is cut there, so no section is described.
_SECTION_LINE = re.compile(
    rf"^(?:(?:{_TITLES})\s*:|[:@](?:param|type|arg|key|keyword|returns?|rtype|raises?)\b.*)$"
)
_NUMPY_TITLE = re.compile(rf"^(?:{_TITLES})$")
_NUMPY_RULE = re.compile(r"^-{3,}$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (summary and body, without sections) and each argument's description."""
    if not doc or not doc.strip():
        return "", {}
    text = inspect.cleandoc(doc)
    parsed = _best_parse(text)
    description = _description(parsed)
    arguments = {
        param.arg_name.lstrip("*"): _paragraphs(param.description.splitlines())
        for param in parsed.params
        if param.description and param.args[:1] != ["attribute"]
    }
    return description, {name: text for name, text in arguments.items() if text}


def _best_parse(text: str) -> Docstring:
    parses: list[Docstring] = []
    for parse, source in (
        (_GOOGLE.parse, _for_google(text)),
        (numpydoc.parse, text),
        (rest.parse, text),
        (epydoc.parse, text),
    ):
        try:
            parses.append(parse(source))
        except ParseError:
            continue
    if not parses:
        return rest.parse(text)  # reST reads any text as a description
    return max(parses, key=lambda parsed: len(parsed.meta))  # the first of the most sections


def _for_google(text: str) -> str:
    """``text`` as docstring_parser's Google parser reads it: within the sections, blank lines
    before indented lines go (an argument described in two paragraphs is otherwise refused);
    a docstring that opens with a section gets a blank first line (else the section's header
    would be taken for the summary)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _SECTION_LINE.match(line)), len(lines))
    if start == 0 and not any(line[:1].isspace() for line in lines):
        # cleandoc took the section's indentation away (it measures from the second line)
        lines = [line if _SECTION_LINE.match(line) else f"    {line}" for line in lines]
    kept = lines[:start]
    for index in range(start, len(lines)):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if lines[index].strip() or not following[:1].isspace():
            kept.append(lines[index])
    return "\n".join(["", *kept] if start == 0 else kept)


def _description(parsed: Docstring) -> str:
    lines = (parsed.short_description or "").splitlines()
    if parsed.long_description:
        if parsed.blank_after_short_description:
            lines.append("")
        lines.extend(parsed.long_description.splitlines())
    for index, line in enumerate(lines):
        stripped = line.strip()
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if _SECTION_LINE.match(stripped) or (
            _NUMPY_TITLE.match(stripped) and _NUMPY_RULE.match(following)
        ):
            lines = lines[:index]
            break
    return _paragraphs(lines)


def _paragraphs(lines: list[str]) -> str:
    """Join wrapped lines; keep blank-line paragraph breaks."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    return "\n\n".join(paragraphs)
