"""Values after a name that says "secret", in text: ``password=…``, ``"api_key": "…"``,
``X-Api-Key: …``, ``Authorization: Token …``, ``AccountKey=…;``, ``?key=…``.

Each occurrence of a secret word is widened to the name around it (letters, digits, ``_.-``),
judged by :func:`._names.name_strength`, and the value after ``=``, ``:``, ``:=`` or ``=>``
(quoted or bare) by :func:`._names.text_value_is_secret`.
"""

from __future__ import annotations

import re
from typing import Final

from ._names import (
    Strength,
    Where,
    is_placeholder,
    name_strength,
    text_value_is_secret,
    word_set,
)
from ._spans import NAMED, Span
from ._tags import kind_of_name

# The words a secret name contains ("pass" covers password, passwd, passphrase; "auth" covers
# authorization); the whole name is then judged by its last word.
_NAME_WORDS: Final = (
    b"pass",
    b"pwd",
    b"secret",
    b"token",
    b"key",
    b"auth",
    b"cred",
    b"cookie",
    b"sig",
)
_NAME_CHARS: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_NAME_TABLE: Final = bytes(0x61 if i in _NAME_CHARS else 0x20 for i in range(256))
_VALUE_RE: Final = re.compile(
    r"""(?P<nq>\\?["'])?[ \t]*(?P<sep>:=|=>|[:=])[ \t]*
        (?: (?P<q>\\?["'`])(?P<qv>(?:(?!(?P=q))[^\n]){1,512}?)(?P=q)
          | (?P<v>[^\s"'`,;&<>()\[\]{}:][^\s"'`,;&<>()\[\]{}]{0,511}) )""",
    re.VERBOSE,
)
_SEPARATOR_AHEAD: Final = re.compile(r"""\\?["']?[ \t]*[:=]""")
_AUTH_REST_RE: Final = re.compile(r"""[ \t]+(?P<v>[^\s"'`][^\n"'`]*)""")
_QUOTED_SCHEME_RE: Final = re.compile(r"([A-Za-z][A-Za-z0-9-]{2,19})[ \t]+(?=\S)")
# The scheme words of an Authorization header (RFC 9110 and the common vendor ones).
_AUTH_SCHEMES: Final = word_set(
    "bearer basic token digest negotiate ntlm apikey api-key key oauth sharedkey hmac "
    "aws4-hmac-sha256 signature dpop mac hoba mutual vapid sso"
)


def named_spans(text: str, data: bytes, folded: bytes, found: list[Span]) -> None:
    """Values after a secret name: ``password=…``, ``"api_key": "…"``, ``X-Api-Key: …``."""
    seen: set[int] = set()
    names: bytes | None = None
    for word in _NAME_WORDS:
        at = folded.find(word)
        while at >= 0:
            if names is None:
                names = data.translate(_NAME_TABLE)
            name_end = names.find(b" ", at)
            name_end = len(text) if name_end < 0 else name_end
            name_start = names.rfind(b" ", 0, at) + 1
            at = folded.find(word, name_end)
            if name_end in seen or name_end - name_start > 64:
                continue
            seen.add(name_end)
            if _SEPARATOR_AHEAD.match(text, name_end) is None:
                continue  # "pass" in code, "the key to": no value follows
            name = text[name_start:name_end].strip("-.")
            if not name or (text[name_start - 1 : name_start] == ":" and name_start):
                continue  # AWS::SecretsManager::Secret, arn:…:secret:x: an identifier
            strength = name_strength(name, Where.TEXT)
            if (
                strength is None
                and name.lower() == "key"
                and text[name_start - 1 : name_start] in ("?", "&")
            ):
                strength = Strength.TOKEN  # ?key=… in a URL: Google's API keys
            if strength is None:
                continue
            _named_value(text, name, name_end, strength, found)


def _named_value(text: str, name: str, at: int, strength: Strength, found: list[Span]) -> None:
    m = _VALUE_RE.match(text, at)
    if m is None:
        return
    group = "qv" if m.group("qv") is not None else "v"
    start, end = m.span(group)
    value = m.group(group)
    if group == "v" and text[end : end + 1] in ("(", "["):
        return  # an expression in code: get_password(), os.environ["…"]
    if group == "qv" and text[m.end() : m.end() + 3].lstrip(" ")[:1] in ("+", "%"):
        return  # a string being built in code: " --password=" + pw
    if name.lower().replace("-", "").replace("_", "").endswith("authorization"):
        scheme = value.lower() in _AUTH_SCHEMES
        rest = _AUTH_REST_RE.match(text, end) if group == "v" and scheme else None
        if rest is not None:  # "Authorization: Token abc…": keep the scheme word visible
            credential = rest.group("v").rstrip()
            if not is_placeholder(credential):
                r_start = rest.start("v")
                found.append((r_start, r_start + len(credential), NAMED, "authorization", None))
            return
        if group == "qv":
            scheme_m = _QUOTED_SCHEME_RE.match(value)
            if scheme_m is not None and scheme_m.group(1).lower() in _AUTH_SCHEMES:
                start += scheme_m.end()
                value = value[scheme_m.end() :]
    prose = (
        group == "v"
        and m.group("sep") == ":"
        and text[end : end + 1] == " "
        and text[end + 1 : end + 2].isalpha()
    )
    code = (
        group == "v" and m.group("sep") == "=" and text[m.start("sep") - 1 : m.start("sep")] == " "
    )
    if text_value_is_secret(value, strength, name=name, prose=prose, code=code):
        found.append((start, end, NAMED, kind_of_name(name), None))
