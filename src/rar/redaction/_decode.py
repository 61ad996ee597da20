"""The encodings a credential hides in: base64 (standard and URL-safe) and URL escapes."""

from __future__ import annotations

import binascii
import codecs
import re
from typing import Final

B64_RE: Final = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9_-]{16,}={0,2}")
STD_B64_RE: Final = re.compile(r"[A-Za-z0-9+/]+={0,2}")
B64_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
# The first character of every 4 in the base64 of an ASCII byte 0x20-0x7e: its top 6 bits.
_TEXT_LEADS: Final = frozenset("IJKLMNOPQRSTUVWXYZabcdef")
_URLSAFE: Final = str.maketrans("-_", "+/")
PERCENT_RE: Final = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def base64_cores(secret: str) -> list[str]:
    """The base64 characters that encode ``secret`` wherever it starts in a 3-byte group
    (standard and URL-safe alphabets): the encoded forms of a literal secret."""
    raw = secret.encode("utf-8", "surrogatepass")
    cores: set[str] = set()
    for lead in range(3):
        full = binascii.b2a_base64(bytes(lead) + raw, newline=False).decode("ascii")
        core = full[(8 * lead + 5) // 6 : (8 * (lead + len(raw))) // 6]
        cores.update((core, core.replace("+", "-").replace("/", "_")))
    return sorted(cores)


def decode_base64(token: str) -> str | None:
    """The printable text ``token`` decodes to (standard or URL-safe base64), else None."""
    core = token.rstrip("=")
    if len(core) % 4 == 1:
        core = core[:-1]
    if "-" in core or "_" in core:
        if "+" in core or "/" in core:
            return None
        core = core.translate(_URLSAFE)
    try:
        if len(core) > 256:  # an image or an archive: look at its start before decoding it all
            head = binascii.a2b_base64(core[:128], strict_mode=True)
            codecs.getincrementaldecoder("utf-8")().decode(head)  # may end mid-character
        raw = binascii.a2b_base64(core + "=" * (-len(core) % 4), strict_mode=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if not text.replace("\n", "").replace("\r", "").replace("\t", "").isprintable():
        return None
    return text


def is_basic_credential(token: str) -> bool:
    """Whether ``token`` is base64 of printable text with a colon, as ``user:password`` is
    (which keeps "Basic Identical" prose). A token cut short still counts if the colon
    survived."""
    core = token.rstrip("=")
    if len(core) % 4 == 1:
        core = core[:-1]
    try:
        raw = binascii.a2b_base64((core + "=" * (-len(core) % 4)).encode("ascii"), strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    for cut in range(4):  # a cut-short token may end inside a multi-byte character
        try:
            text = raw[: len(raw) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return ":" in text and text.isprintable()
    return False


def percent_view(text: str) -> tuple[str, list[int]] | None:
    """``text`` with its ``%XX`` escapes decoded, and for every decoded character (plus the end)
    the index in ``text`` where it starts; None when nothing decodes."""
    parts: list[str] = []
    offsets: list[int] = []
    last = 0
    for m in PERCENT_RE.finditer(text):
        try:
            decoded = bytes.fromhex(m.group().replace("%", "")).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not decoded.replace("\n", "").replace("\r", "").replace("\t", "").isprintable():
            continue  # "%02d" in a format string is no escape
        parts.append(text[last : m.start()])
        offsets.extend(range(last, m.start()))
        at = m.start()
        for ch in decoded:
            offsets.append(at)
            at += 3 * len(ch.encode("utf-8", "surrogatepass"))
        parts.append(decoded)
        last = m.end()
    if not parts:
        return None
    parts.append(text[last:])
    offsets.extend(range(last, len(text) + 1))
    return "".join(parts), offsets


def could_be_base64_text(token: str) -> bool:
    """A cheap test before decoding: base64 of text has both cases, and most of the first
    characters of its 4-character groups encode a printable ASCII byte."""
    if token.islower() or token.isupper():
        return False  # a name or a number
    leads = token[::4]
    return sum(c in _TEXT_LEADS for c in leads) * 4 >= 3 * len(leads)
