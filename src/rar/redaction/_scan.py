"""Finding credentials in a string: the pre-check, the detectors, and the decoding layers.

**Pre-check.** Nearly every string RAR records holds no credential, so the common case must be
cheap: :meth:`Scanner.maybe` projects the string onto bytes (one byte per character) and asks a
few questions C answers fast: is there a *token run* of 16+ letters, digits or ``+/=_.~-`` (every
key, JWT, base64 blob and PEM body has one), a ``%`` (URL encoding), a ``://…@`` (URL user-info),
one of the words that introduce a short credential (``pass``, ``pwd``, ``auth``), or a literal
secret too short for a run? Only then does :meth:`Scanner.redact` look closer. (So a credential
under 16 characters is found only after a password-like name or ``Authorization``, in a URL, or
as a literal secret: API keys, tokens and ``secret=`` values are longer in practice.)

**Detectors**, each giving spans ``(start, end, priority, kind, tag source)``:

* literal secrets (environment values, ``extra_secrets``), also base64-encoded;
* in every token run: the vendor formats of :mod:`._formats`, and base64 text that decodes to
  printable text holding a credential (the whole base64 text is replaced);
* ``Bearer``/``Basic`` credentials, URL user-info, PEM private key blocks, ``curl -u user:pw``;
* ``name=value`` / ``name: value`` / ``"name": "value"`` where the name says "secret"
  (:mod:`._named`, with the rules of :mod:`._names`);
* URL-encoded text: the detectors run again on the decoded text, and what they find is mapped
  back onto the encoded characters (tagged with the decoded secret, so the tag is the same).
  The decoding itself is in :mod:`._decode`; merging spans into markers in :mod:`._spans`.

Overlapping spans merge (nothing of a credential survives between two markers); the
higher-priority kind names the marker. Replacing can expose a neighbour ("AKIA…" glued to
another key only matches once its neighbour became a marker), so redaction repeats until stable.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

from ._decode import (
    B64_CHARS,
    B64_RE,
    PERCENT_RE,
    STD_B64_RE,
    base64_cores,
    could_be_base64_text,
    decode_base64,
    is_basic_credential,
    percent_view,
)
from ._formats import INFIX_RES, SEARCHERS
from ._named import named_spans
from ._names import is_placeholder, looks_random
from ._spans import BASE64, LITERAL, PEM, SCHEME, USERINFO, VENDOR, Span, apply_spans
from ._tags import MARKER_PREFIX, MARKER_RE

MAX_DEPTH: Final = 2  # base64 inside URL encoding inside base64, and no deeper
_MAX_PASSES: Final = 32

_TOKEN_CHARS: Final = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_.~-"
)
_RUN_TABLE: Final = bytes(0x61 if i in _TOKEN_CHARS else 0x20 for i in range(256))
LONG_RUN: Final = 16  # the pre-check's run: a 16-character token may follow "Bearer"
_LONG: Final = b"a" * LONG_RUN
# The runs searched for formats and base64: every format is 20+ characters (AKIA + 16), and
# base64 of a shorter secret is found as a literal's base64 or after its name.
_FORMAT_RUN: Final = b"a" * 20
# Words that introduce a credential too short to make a token run: a password, or the value of
# an Authorization header ("Authorization: Basic dXM6cA==", "Authorization: Bearer abc123").
_SHORT_WORDS: Final = (b"pass", b"pwd", b"auth")
_VENDOR_LEAD: Final = 12  # how far before a run a format may start ("123456789:AA…")
_CLEAN_LENGTH: Final = 64  # texts up to this long that passed the pre-check are remembered
_CLEAN_COUNT: Final = 4096  # ... this many at most (then forgotten, and remembered anew)
_LONG_RUN_SCAN: Final = 1024  # past this, a run of binary base64 (an image) is not searched
# Every format has a digit or a capital in it (and so has base64): runs without are skipped.
_SHAPED: Final = re.compile(r"[0-9A-Z]")
_HEX_RE: Final = re.compile(r"[0-9a-f]+")
_WORD_TABLE: Final = bytes(0x20 if chr(i) in " \t\r\n\"'<>`" else 0x61 for i in range(256))

# (Each regex starts with a literal character, so that the engine skips to candidates fast.)
_SCHEME_RE: Final = re.compile(
    r"(?P<s>[Bb](?<![A-Za-z0-9][Bb])(?:[Ee][Aa][Rr][Ee][Rr]|[Aa][Ss][Ii][Cc]))[ \t]+"
    r"(?P<v>[A-Za-z0-9_.~+/=-]{8,})"
)
# A token, not a word: letters and a digit, or base64's +/=, or 16+ letters of mixed case
# ("Bearer test_token" and "Bearer authentication" are prose or fixtures).
_BEARER_TOKEN: Final = re.compile(
    r"(?=.*[A-Za-z])(?=.*[0-9])|.*[+/=]|(?=[A-Za-z._~-]{16})(?=[a-z._~-]*[A-Z])(?=[A-Z._~-]*[a-z])"
)
_USERINFO_RE: Final = re.compile(r"""://(?P<v>[^\s/?#\[\]"'<>\\]+)@""")
_URL_SCHEME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")
_PEM_LABEL: Final = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_RE: Final = re.compile(
    rf"-----BEGIN{_PEM_LABEL}(?:(?s:.*?)-----END{_PEM_LABEL}|[A-Za-z0-9+/=\s\\:,.-]*)"
)
_PEM_BODY_RE: Final = re.compile(r"[A-Za-z0-9+/]{12}")
_CURL_USER_RE: Final = re.compile(
    r"""-(?<![^\s]-)(?:u|-user)(?:[ \t]+|=)(?P<q>["']?)(?P<v>[^\s:"']{1,64}:[^\s"']{3,256})(?P=q)"""
)


def ascii_view(text: str) -> bytes:
    """``text`` as bytes, one per character (others become ``?``): indices stay the same."""
    return text.encode("ascii", "replace")


def has_long_run(data: bytes) -> bool:
    return _LONG in data.translate(_RUN_TABLE)


class Scanner:
    """The detectors, with the literal secrets of one redactor.

    ``literals`` maps each literal secret to its kind (``env`` or ``secret``).
    """

    __slots__ = ("_clean", "_cores", "_literal_re", "_literals", "_short_re")

    def __init__(self, literals: dict[str, str]) -> None:
        self._literals = literals
        self._cores: dict[str, str] = {}  # base64 core -> the literal secret it encodes
        for secret in literals:
            if len(secret) >= 8:
                for core in base64_cores(secret):
                    self._cores.setdefault(core, secret)
        needles = sorted({*literals, *self._cores}, key=lambda s: (-len(s), s))
        self._literal_re: re.Pattern[str] | None = (
            re.compile("|".join(map(re.escape, needles))) if needles else None
        )
        # Literals the run test cannot see (short, or broken up by spaces and symbols).
        short = [s for s in needles if not has_long_run(ascii_view(s))]
        self._short_re: re.Pattern[str] | None = (
            re.compile("|".join(map(re.escape, short))) if short else None
        )
        # Short texts the pre-check passed: model and provider names, header values and the
        # like come again in every record, and a dict lookup is ~20x cheaper than the check.
        self._clean: dict[str, None] = {}

    # -- the pre-check ------------------------------------------------------------------------

    def maybe(self, text: str) -> bool:
        """False when ``text`` certainly holds no credential this scanner would find."""
        short = len(text) <= _CLEAN_LENGTH
        if short and text in self._clean:
            return False
        data = text.encode("ascii", "replace")
        if _LONG in data.translate(_RUN_TABLE) or b"%" in data:
            return True
        if b"@" in data and b"://" in data:
            return True
        folded = data.lower()
        for word in _SHORT_WORDS:
            if word in folded:
                return True
        if self._short_re is not None and self._short_re.search(text) is not None:
            return True
        if short:
            if len(self._clean) >= _CLEAN_COUNT:
                self._clean.clear()
            self._clean[text] = None
        return False

    # -- redaction ----------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` with every credential replaced (``text`` itself when none)."""
        current = text
        # A pass that changes something turns text outside markers into a marker, and marker
        # text is never searched again, so this ends (normally after one or two passes).
        for _ in range(_MAX_PASSES):
            new = self._redact_once(current)
            if new == current:
                break
            current = new
        return text if current == text else current

    def _redact_once(self, text: str) -> str:
        if MARKER_PREFIX not in text:
            spans = self.spans(text)
            return apply_spans(text, spans) if spans else text
        parts: list[str] = []
        last = 0
        for m in MARKER_RE.finditer(text):
            if m.start() > last:
                parts.append(self._redact_once_plain(text[last : m.start()]))
            parts.append(m.group())
            last = m.end()
        if last < len(text):
            parts.append(self._redact_once_plain(text[last:]))
        return "".join(parts)

    def _redact_once_plain(self, text: str) -> str:
        if not self.maybe(text):
            return text
        spans = self.spans(text)
        return apply_spans(text, spans) if spans else text

    def spans(self, text: str, depth: int = 0) -> list[Span]:
        """Every credential span in ``text`` (which holds no marker), unmerged."""
        data = ascii_view(text)
        folded = data.lower()
        found: list[Span] = []
        if self._literal_re is not None:
            self._literal_spans(text, found)
        runs = data.translate(_RUN_TABLE)
        at = runs.find(_FORMAT_RUN)
        while at >= 0:
            end = runs.find(b" ", at)
            end = len(text) if end < 0 else end
            self._run_spans(text, at, end, depth, found)
            at = runs.find(_FORMAT_RUN, end)
        if b"private key" in folded:
            for m in _PEM_RE.finditer(text):
                body = text.find("-----", m.start() + 10) + 5  # after the BEGIN line
                if _PEM_BODY_RE.search(text, body, m.end()):  # a header alone holds no key
                    found.append((m.start(), m.end(), PEM, "private_key", None))
        if b"bearer" in folded or b"basic" in folded:
            self._scheme_spans(text, found)
        if b"@" in data and b"://" in data:
            self._userinfo_spans(text, found)
        if b"-u" in folded:
            for m in _CURL_USER_RE.finditer(text):
                if not is_placeholder(m.group("v").partition(":")[2]):
                    found.append((m.start("v"), m.end("v"), USERINFO, "userinfo", None))
        if b"=" in data or b":" in data:
            named_spans(text, data, folded, found)
        if depth < MAX_DEPTH and b"%" in data:
            self._percent_spans(text, data, depth, found)
        return found

    def _percent_spans(self, text: str, data: bytes, depth: int, found: list[Span]) -> None:
        """Credentials in URL-encoded text: each stretch without spaces or quotes that holds an
        escape is decoded and searched again; what is found maps back onto the escapes."""
        words = data.translate(_WORD_TABLE)
        last_end = 0
        for m in PERCENT_RE.finditer(text):
            if m.start() < last_end:
                continue
            start = words.rfind(b" ", 0, m.start()) + 1
            end = words.find(b" ", m.end())
            end = len(text) if end < 0 else end
            last_end = end
            stretch = text[start:end]
            if not self.maybe(unquote(stretch)):  # the quick look, before mapping offsets
                continue
            view = percent_view(stretch)
            if view is None:
                continue
            decoded, offsets = view
            for s_start, s_end, priority, kind, tagged in self.spans(decoded, depth + 1):
                source = decoded[s_start:s_end] if tagged is None else tagged
                found.append(
                    (start + offsets[s_start], start + offsets[s_end], priority, kind, source)
                )

    # -- the detectors ------------------------------------------------------------------------

    def _literal_spans(self, text: str, found: list[Span]) -> None:
        assert self._literal_re is not None
        for m in self._literal_re.finditer(text):
            needle = m.group()
            kind = self._literals.get(needle)
            if kind is not None:
                found.append((m.start(), m.end(), LITERAL, kind, None))
                continue
            secret = self._cores[needle]  # base64 of a literal: replace its whole base64 text
            start, end = m.span()
            while start > 0 and text[start - 1] in B64_CHARS:
                start -= 1
            while end < len(text) and (text[end] in B64_CHARS or text[end] == "="):
                end += 1
            found.append((start, end, LITERAL, self._literals[secret], secret))

    def _run_spans(self, text: str, start: int, end: int, depth: int, found: list[Span]) -> None:
        """Vendor formats and base64-encoded credentials in the token run ``text[start:end]``."""
        run = text[start:end]
        if _SHAPED.search(run) is None or _HEX_RE.fullmatch(run):
            return  # lower case without digits (a name, a path) or hex (a digest): no format
        if (
            end - start > _LONG_RUN_SCAN
            and STD_B64_RE.fullmatch(run)
            and ("+" in run or "/" in run)
            and decode_base64(run[:_LONG_RUN_SCAN]) is None
        ):
            return  # one long base64 blob of binary data (an image): nothing to read in it
        lead = max(0, start - _VENDOR_LEAD)
        before = len(found)
        for finder, formats in SEARCHERS:
            search = finder.search
            m = search(text, lead, end)
            while m is not None:
                at = m.start()
                for fmt, pattern in formats:  # the first format that matches here and passes
                    hit = pattern.match(text, at, end)
                    if hit is not None and (fmt.check is None or fmt.check(hit.group())):
                        span = hit.span("v") if "v" in pattern.groupindex else hit.span()
                        found.append((span[0], span[1], VENDOR, fmt.kind, None))
                        m = search(text, hit.end(), end)
                        break
                else:
                    m = search(text, at + 1, end)
        for infix, pattern, fmt in INFIX_RES:
            if infix in run or (infix == ":AA" and text.startswith(":AA", start - 1)):
                for m in pattern.finditer(text, lead, end):
                    found.append((m.start(), m.end(), VENDOR, fmt.kind, None))
        if depth >= MAX_DEPTH:
            return
        vendor = found[before:]
        for m in B64_RE.finditer(text, start, end):
            b_start, b_end = m.span()
            token = m.group()
            if not could_be_base64_text(token):
                continue
            if any(s <= b_start and b_end <= e for s, e, *_ in vendor):
                continue
            decoded = decode_base64(token)
            if decoded is None or not self.maybe(decoded):
                continue
            inner = self.spans(decoded, depth + 1)
            if not inner:
                continue
            if len(inner) == 1:  # exactly one credential: its own kind, priority and tag
                i_start, i_end, priority, kind, tagged = inner[0]
                if decoded[:i_start].strip() == "" and decoded[i_end:].strip() == "":
                    source = decoded[i_start:i_end] if tagged is None else tagged
                    found.append((b_start, b_end, priority, kind, source))
                    continue
            found.append((b_start, b_end, BASE64, "base64", None))

    def _scheme_spans(self, text: str, found: list[Span]) -> None:
        for m in _SCHEME_RE.finditer(text):
            token = m.group("v")
            if m.group("s")[1] in "Ee":
                if _BEARER_TOKEN.match(token):
                    found.append((m.start("v"), m.end("v"), SCHEME, "bearer", None))
            else:
                token = token.partition(".")[0]  # Basic base64 ends at the first non-base64
                if is_basic_credential(token):
                    v_start = m.start("v")
                    found.append((v_start, v_start + len(token), SCHEME, "basic", None))

    def _userinfo_spans(self, text: str, found: list[Span]) -> None:
        for m in _USERINFO_RE.finditer(text):
            secret = m.group("v")
            if ":" not in secret:
                # "token@host" is a credential for http(s) only, and only if it looks like one:
                # "ssh://git@host" and "https://alice@host" name a user.
                scheme = _URL_SCHEME_RE.search(text, max(0, m.start() - 32), m.start())
                if scheme is None or scheme.group().lower() not in ("http", "https"):
                    continue
                if not looks_random(secret):
                    continue
            elif not secret.partition(":")[2] or is_placeholder(secret.partition(":")[2]):
                continue
            found.append((m.start("v"), m.end("v"), USERINFO, "userinfo", None))
