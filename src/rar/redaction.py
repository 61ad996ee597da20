"""Credential redaction for everything RAR writes to a run record.

Every JSON value that goes into a run record (requests, responses, tool arguments and results,
errors, manifests) passes through :class:`Redactor` first. The policy:

* **Replacement.** A secret is replaced by a marker ``[REDACTED:<kind>:<tag>]`` where ``<tag>`` is
  :func:`secret_tag` of the secret part: the first 8 hex digits of
  ``sha256(b"rar-redact:" + secret)``. The tag is unsalted, so the same secret gives the same
  marker in every process and every run; two records can be compared ("same key?") without
  storing the key. A tag cannot give back a random API key, but it can confirm a guess of a
  weak password (32 bits, fast hash): weak passwords in records are only as safe as the records.
* **Sensitive keys.** In a dict, the value under a key such as ``Authorization``, ``x-api-key``,
  ``password`` or ``set-cookie`` (compared case-insensitively, ignoring ``-`` and ``_``; see
  :data:`SENSITIVE_KEYS`) is replaced whole, kind = the key lowercased with ``-`` turned into
  ``_``. For ``authorization`` and ``proxy-authorization`` the scheme word stays visible
  (``Bearer [REDACTED:authorization:…]``). A list of strings under such a key has each string
  replaced. Empty strings, existing markers and non-string values are not replaced (containers
  under a sensitive key are still walked with the ordinary rules). Dict keys are never altered.
* **Patterns in text.** Every string, wherever it is, is searched for well-known credential
  shapes: Anthropic (``sk-ant-``), OpenAI (``sk-``, ``sk-proj-``, ``sk-svcacct-``, 20+ characters
  after ``sk-``), Google API keys (``AIza…`` and the value of ``?key=``/``&key=`` in URLs), AWS
  access key ids (``AKIA``/``ASIA``) and secret access keys written next to their name
  (``aws_secret_access_key = …``, ``"SecretAccessKey": "…"``), GitHub tokens, JWTs, PEM private
  key blocks (also cut-short ones), the user-info of URLs (``scheme://user:password@host``, and
  ``https://token@host``), and ``Bearer``/``Basic`` credentials with the scheme word kept
  visible. To stay clear of prose, a ``Bearer`` token must contain a digit or one of ``_~+/=``
  (or be 16+ letters of mixed case), and a ``Basic`` token must decode as base64 to printable
  ``user:password`` text. Only the secret part of a match is replaced (``?key=``, ``Bearer ``,
  ``://`` and ``@host`` stay). See :data:`KINDS`.
* **Literal secrets.** The values of environment variables whose *name* looks secret (contains
  KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH, but not only as part of AUTHOR or
  AUTHORITY, and not ``*_SOCK``) and are at least 8 characters long are redacted wherever they
  occur (kind ``env``), as are the caller's ``extra_secrets`` (kind ``secret``). Literal secrets
  are replaced before patterns are searched, longest first.
* **What is left alone.** Digests (``sha256:`` + 64 hex, bare hex), UUIDs, AWS's documentation
  example credentials (``AKIAIOSFODNN7EXAMPLE`` and its secret ``wJalrXUtnFEMI/…EXAMPLEKEY``),
  prose ("the basic idea", "Bearer authentication"), short ``sk-`` strings, model names, paths,
  numbers, e-mail addresses, ``ssh://git@host``.
* **Idempotent, never nested.** Text already inside a marker is never searched again, and
  ``redact(redact(x)) == redact(x)``.
* **Identity when clean.** :meth:`Redactor.redact` returns the very same object when nothing in it
  changed; containers are copied only along the path to a change. Callers use
  ``redact(v) is v`` to skip copying.
* **Fast when clean.** All patterns form one regex whose alternatives each start with a literal
  character that is rare in prose and code (``B b k A ? & _ J :``; "sk-" is matched from its
  ``k``, "eyJ" from its ``J``, with lookbehinds for the rest), so a clean string costs one
  character-set scan in C. Literal secrets join that regex, each anchored at its rarest
  character. Only a string with a hit takes the slow path (literal pass, then patterns from
  the first hit on).

Redaction is a safety net, not a guarantee: a secret in a shape nobody told the redactor about
(an unknown vendor's key format in free text, a password in a numeric field) is recorded as is.
Pass such secrets as ``extra_secrets`` or through the environment.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from rar.errors import ConfigError

__all__ = [
    "KINDS",
    "POLICY_VERSION",
    "SENSITIVE_KEYS",
    "Redactor",
    "default_redactor",
    "redaction_policy",
    "secret_tag",
]

#: Bumped whenever a change makes the same input redact differently.
POLICY_VERSION: Final = 1

# ---------------------------------------------------------------------------------------------
# Tags and markers
# ---------------------------------------------------------------------------------------------

_TAG_PREFIX: Final = b"rar-redact:"


def secret_tag(secret: str) -> str:
    """The 8-lowercase-hex tag of ``secret``: a prefix of ``sha256(b"rar-redact:" + secret)``.

    Unsalted on purpose: the same secret gets the same tag in every process, so two recordings
    of one key still match. (Lone surrogates, as ``os.environ`` may hold, are encoded with
    ``surrogatepass`` instead of raising; for every other string this is plain UTF-8.)
    """
    data = _TAG_PREFIX + secret.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:8]


def _marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}:{secret_tag(secret)}]"


_MARKER_PREFIX: Final = "[REDACTED:"
_MARKER_RE: Final = re.compile(r"\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]")
_is_marker: Final = _MARKER_RE.fullmatch

# ---------------------------------------------------------------------------------------------
# Sensitive dict keys
# ---------------------------------------------------------------------------------------------

#: Dict keys whose values are replaced whole (compared lowercased, ignoring ``-`` and ``_``).
#: The first block is the documented policy; the second block adds the AWS credential fields
#: (``"AWS_SECRET_ACCESS_KEY": "…"``, STS ``SecretAccessKey``/``SessionToken``) and two more
#: common token headers.
SENSITIVE_KEYS: Final[frozenset[str]] = frozenset(
    key.replace("-", "").replace("_", "")
    for key in (
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "api_key",
        "apikey",
        "x-goog-api-key",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "access_token",
        "refresh_token",
        "id_token",
        "cookie",
        "set-cookie",
        "private_key",
        # additions
        "aws_secret_access_key",
        "secret_access_key",
        "aws_session_token",
        "session_token",
        "x-amz-security-token",
        "x-auth-token",
        "private-token",
    )
)

_SCHEME_KEYS: Final = frozenset({"authorization", "proxyauthorization"})

# raw key -> kind ("" when the key is not sensitive). Shared by all redactors: it depends on the
# key only. Bounded so that payloads with unbounded key sets cannot grow it without limit.
_KEY_KINDS: dict[str, str] = {}
_KEY_KINDS_MAX: Final = 4096


def _key_kind(key: object) -> str:
    if type(key) is not str:
        return ""
    kind = ""
    if key.lower().replace("-", "").replace("_", "") in SENSITIVE_KEYS:
        kind = key.lower().replace("-", "_")
    if len(_KEY_KINDS) < _KEY_KINDS_MAX:
        _KEY_KINDS[key] = kind
    return kind


# "Bearer abc" -> ("Bearer", " ", "abc"): the scheme word of an Authorization header value.
# The word must start with 3+ letters/digits so that "sk-abc def" does not leave "sk-abc" visible.
_AUTH_SCHEME_RE: Final = re.compile(
    r"([A-Za-z][A-Za-z0-9]{2,19}(?:-[A-Za-z0-9]{1,19}){0,3})(\s+)(\S.*)", re.DOTALL
)

# ---------------------------------------------------------------------------------------------
# Credential patterns in text
# ---------------------------------------------------------------------------------------------

#: Every kind a marker can carry, besides the kinds derived from sensitive dict keys.
KINDS: Final[tuple[str, ...]] = (
    "anthropic",
    "openai",
    "google",
    "google_key_param",
    "aws",
    "aws_secret",
    "github",
    "bearer",
    "basic",
    "jwt",
    "private_key",
    "userinfo",
    "env",
    "secret",
)

# Characters of a URL's authority part; "[" and "]" are excluded so a marker is never re-matched.
_AUTH_CH: Final = r"""[^\s/?#\[\]"'<>\\]"""
# The two halves of AWS's own documentation example credentials.
_AWS_EXAMPLE_ID: Final = "AKIAIOSFODNN7EXAMPLE"
_AWS_EXAMPLE_SECRET: Final = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
_PEM_LABEL: Final = r"[A-Z0-9 ]*PRIVATE[ ]KEY(?:[ ]BLOCK)?-----"  # [ ]: the patterns are VERBOSE
_SK_BODY: Final = r"[A-Za-z0-9_-]"
_KEY_PARAM_VALUE: Final = r"""(?P<V>[^&#\s"'<>\[\]\\]{8,})"""
# What follows the word "Bearer" / "Basic" (the word itself is matched by the caller).
_BEARER_TOKEN: Final = r"""
    [ \t]+
    (?P<V>
       # a token, not a word: it has a digit or one of _~+/=, or is >= 16 chars of mixed case
       (?= [A-Za-z.-]* [0-9_~+/=] | (?=[A-Za-z.-]{16}) (?=[a-z.-]*[A-Z]) (?=[A-Z.-]*[a-z]) )
       [A-Za-z0-9_.~+/=-]{8,}
    )
"""
_BASIC_TOKEN: Final = r"""
    [ \t]+
    (?P<V>
       # base64 of "user:password": a ":" byte encodes as "O[g-v]", "[DTjz][o-r]" or "6"
       # (by its offset in a 3-byte group). Prose almost never has these; the handler then
       # decodes the token to be sure.
       (?= [A-Za-z0-9+/]* (?: O[g-v] | [DTjz][o-r] | 6 ) )
       [A-Za-z0-9+/]{8,} ={0,2}
    ) (?![A-Za-z0-9+/=])
"""
_AWS_SECRET_VALUE: Final = rf"""
    \\?["']? [ \t]* [:=] [ \t]* \\?["']?
    (?!{re.escape(_AWS_EXAMPLE_SECRET)}(?![A-Za-z0-9/+=]))
    (?P<V>[A-Za-z0-9/+=]{{16,}})
"""
_PEM_BODY: Final = rf"""
    {_PEM_LABEL}
    (?: (?s:.*?) -----END{_PEM_LABEL}     # a whole block ...
      | [A-Za-z0-9+/=\s\\:,.-]* )         # ... or a truncated one, up to the first oddity
"""
_JWT_BODY: Final = r"[A-Za-z0-9_-]+ \. eyJ[A-Za-z0-9_-]+ \. [A-Za-z0-9_-]*"  # after "eyJ"
_CI_EARER: Final = "[Ee][Aa][Rr][Ee][Rr]"
_CI_ASIC: Final = "[Aa][Ss][Ii][Cc]"
_CI_ACCESS_KEY: Final = "[Aa][Cc][Cc][Ee][Ss][Ss]_[Kk][Ee][Yy]"


def _group(name: str, body: str) -> str:
    """A named group for a kind; its ``(?P<V>`` (the secret part) becomes ``<name>_v``."""
    return f"(?P<{name}>{body.replace('(?P<V>', f'(?P<{name}_v>')})"


# All credential patterns in one regex. Every top-level alternative starts with a literal
# character that is rare in prose and code (B b k A ? & _ J :), so the regex engine skips most
# positions with a single character-set test, and the next characters reject most of the rest
# before any lookbehind runs. A credential that starts with a common character ("sk-", "eyJ",
# "-----BEGIN", "ghp_") is matched from a later, rarer one; the part in front is checked with a
# lookbehind and belongs to the secret (its length is the group's lead, _LEAD_OF_GROUP).
# Group names are kinds, plus a digit where a kind has several alternatives; a <name>_v group
# is the secret inside a match whose other parts ("Bearer ", "?key=", "://…@") stay visible.
_PATTERN_SOURCE: Final = rf"""
  B (?: EGIN (?<=-----BEGIN) {_group("private_key", _PEM_BODY)}
      | {_CI_EARER} (?<!\wB{_CI_EARER}) {_group("bearer", _BEARER_TOKEN)}
      | {_CI_ASIC} (?<!\wB{_CI_ASIC}) {_group("basic", _BASIC_TOKEN)}
    )
| b (?: {_CI_EARER} (?<!\wb{_CI_EARER}) {_group("bearer2", _BEARER_TOKEN)}
      | {_CI_ASIC} (?<!\wb{_CI_ASIC}) {_group("basic2", _BASIC_TOKEN)}
    )
| k- (?<=sk-) (?<!{_SK_BODY}sk-)
     (?: {_group("anthropic", rf"ant-{_SK_BODY}{{16,}}")}
       | {_group("openai", rf"{_SK_BODY}{{20,}}")} )
| A (?: {_group("google", r"Iza[0-9A-Za-z_-]{35}")}
      | (?<![A-Z0-9]A) (?!{_AWS_EXAMPLE_ID[1:]}(?![A-Z0-9]))
        {_group("aws", r"(?:KIA|SIA)[A-Z0-9]{16}(?![A-Z0-9])")}
      | ccessKey (?<=[Ss]ecretAccessKey) {_group("aws_secret2", _AWS_SECRET_VALUE)}
    )
| \? key= {_group("google_key_param", _KEY_PARAM_VALUE)}
| &  key= {_group("google_key_param2", _KEY_PARAM_VALUE)}
| _ (?: {_CI_ACCESS_KEY} (?<=[Ss][Ee][Cc][Rr][Ee][Tt]_{_CI_ACCESS_KEY})
        {_group("aws_secret", _AWS_SECRET_VALUE)}
      | (?<=gh[pousr]_) {_group("github", r"[A-Za-z0-9]{36,}")}
      | pat_ (?<=github_pat_) {_group("github2", r"[A-Za-z0-9_]{22,}")}
    )
| J (?<=eyJ) {_group("jwt", _JWT_BODY)}
| :// {_group("userinfo", rf"(?P<V>{_AUTH_CH}+) @")}   # the handler checks the scheme
"""
_PATTERN_RE: Final = re.compile(_PATTERN_SOURCE, re.VERBOSE)
_KIND_OF_GROUP: Final[dict[str, str]] = {
    name: name.rstrip("0123456789") for name in _PATTERN_RE.groupindex if not name.endswith("_v")
}
# Characters of the secret in front of the match start (see above); 0 for the others.
_LEAD_OF_GROUP: Final[dict[str, int]] = {
    "private_key": len("-----"),
    "anthropic": len("s"),
    "openai": len("s"),
    "github": len("ghp"),
    "github2": len("github"),
    "jwt": len("ey"),
}
_HAS_SECRET_GROUP: Final = frozenset(
    name for name in _KIND_OF_GROUP if f"{name}_v" in _PATTERN_RE.groupindex
)

# The shortest text any pattern can match ("a://:@"; every other pattern needs more).
_PATTERN_MIN_LEN: Final = 6

# The URL scheme in front of "://" (searched in a window that ends at the "://").
_SCHEME_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")

_ENV_NAME_RE: Final = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
_ENV_MIN_LEN: Final = 8


def _env_name_is_secret(name: str) -> bool:
    """Whether an environment variable's name says its value is a secret.

    ``AUTH`` inside ``AUTHOR``/``AUTHORITY`` (``GIT_AUTHOR_NAME``, ``XAUTHORITY``) and
    ``SSH_AUTH_SOCK`` (a socket path) do not count.
    """
    if name.upper().endswith("_SOCK"):
        return False
    return any(
        not (m.group().upper() == "AUTH" and name[m.end() : m.end() + 2].upper() == "OR")
        for m in _ENV_NAME_RE.finditer(name)
    )


# Characters from most to least frequent in prose, JSON and code (roughly); others are rarer.
_COMMON_CHARS: Final = (
    ' etaoinsrhldcu"mfpgwybv,.:_-/0123456789kx\n{}[]()=jqzETAOINSRHLDCUMFPGWYBVKXJQZ'
)


def _literal_anchor(secret: str) -> str:
    """A pre-check alternative matching exactly ``secret`` that starts with its rarest character.

    ``"hunter2hunter2"`` becomes ``2(?<=hunter2)hunter2``: the regex engine then stops only at
    the rare ``2`` instead of at every ``h``. (Escaped for verbose mode.)
    """
    rank = len(_COMMON_CHARS)
    best = max(range(len(secret)), key=lambda i: _COMMON_CHARS.find(secret[i]) % (rank + 1))
    head = secret[: best + 1]
    lookbehind = f"(?<={re.escape(head)})" if best else ""
    return f"{re.escape(secret[best])}{lookbehind}{re.escape(secret[best + 1 :])}"


def _is_basic_credential(token: str) -> bool:
    """Whether ``token`` is base64 of printable text with a colon, as ``user:password`` is.

    This is what keeps "basic concepts" or "Basic Identical" prose: such words rarely decode to
    printable text, and almost never to text with a colon. A token cut short (``dXNlcjpw…``)
    still counts as long as the colon survived.
    """
    core = token.rstrip("=")
    if len(core) % 4 == 1:
        core = core[:-1]
    try:
        raw = binascii.a2b_base64((core + "=" * (-len(core) % 4)).encode("ascii"), strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    # A cut-short token may end inside a multi-byte character: allow up to 3 dangling bytes.
    for cut in range(4):
        try:
            text = raw[: len(raw) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return ":" in text and text.isprintable()
    return False


# ---------------------------------------------------------------------------------------------
# The redactor
# ---------------------------------------------------------------------------------------------


class Redactor:
    """Replaces credentials in JSON values with ``[REDACTED:<kind>:<tag>]`` markers.

    ``extra_secrets`` are literal strings always redacted (kind ``secret``). ``env`` is a mapping
    like :data:`os.environ`: the value of every variable whose name looks secret and whose value
    is at least 8 characters long is redacted literally (kind ``env``); ``None`` means none.
    Instances are immutable after construction and safe to share between threads.
    """

    __slots__ = ("_literal_kind", "_literal_re", "_min_len", "_prefilter")

    def __init__(
        self, *, extra_secrets: Iterable[str] = (), env: Mapping[str, str] | None = None
    ) -> None:
        literal_kind: dict[str, str] = {}
        if env is not None:
            for name, value in env.items():
                if (
                    isinstance(value, str)
                    and len(value) >= _ENV_MIN_LEN
                    and _env_name_is_secret(name)
                ):
                    literal_kind[value] = "env"
        if isinstance(extra_secrets, str):
            extra_secrets = (extra_secrets,)  # one secret, not one per character
        for secret in extra_secrets:
            if not isinstance(secret, str):
                raise ConfigError(
                    f"extra_secrets must hold strings, not {type(secret).__name__}: pass the "
                    "secret's text",
                    value_type=type(secret).__name__,
                )
            if secret:
                literal_kind[secret] = "secret"  # an explicit secret wins over "env"
        self._literal_kind: dict[str, str] = literal_kind
        # Longest first, so a secret that contains another is replaced whole.
        literals = sorted(literal_kind, key=lambda s: (-len(s), s))
        self._literal_re: re.Pattern[str] | None = (
            re.compile("|".join(map(re.escape, literals))) if literals else None
        )
        # The pre-check: the patterns themselves (they start with rare characters, so a clean
        # text costs one character-set scan) plus each literal secret, anchored at its rarest
        # character. Its first match is where the first credential can start.
        self._prefilter: Callable[[str], re.Match[str] | None] = (
            re.compile(
                "|".join([_PATTERN_SOURCE, *map(_literal_anchor, literals)]), re.VERBOSE
            ).search
            if literals
            else _PATTERN_RE.search
        )
        self._min_len: int = min([_PATTERN_MIN_LEN, *map(len, literals)])

    @property
    def literal_secret_count(self) -> int:
        """How many literal secrets (environment values and ``extra_secrets``) are redacted."""
        return len(self._literal_kind)

    # -- text ---------------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """``text`` with every credential in it replaced by a marker (``text`` itself if none)."""
        if len(text) < self._min_len or self._prefilter(text) is None:
            return text
        return self._redact_text_slow(text)

    def _redact_text_slow(self, text: str) -> str:
        current = text
        # Repeat until stable: replacing one secret can expose a neighbour ("AKIA…" directly
        # followed by another key only matches once its neighbour became a marker). A pass that
        # changes something turns at least 6 characters outside markers into a marker, and
        # marker text is never searched, so this ends; normally after one pass.
        while True:
            if _MARKER_PREFIX in current:
                new = self._redact_segments(current)
            else:
                new = self._redact_segment(current)
            if new == current:
                break
            current = new
        return text if current == text else current

    def _redact_segments(self, text: str) -> str:
        """Redact the text between existing markers; the markers themselves stay as they are."""
        parts: list[str] = []
        last = 0
        for m in _MARKER_RE.finditer(text):
            if m.start() > last:
                parts.append(self._redact_segment(text[last : m.start()]))
            parts.append(m.group())
            last = m.end()
        if last < len(text):
            parts.append(self._redact_segment(text[last:]))
        return "".join(parts)

    def _redact_segment(self, text: str) -> str:
        """Redact a string that holds no marker: literal secrets first, then patterns."""
        anchor = self._prefilter(text)
        if anchor is None:
            return text
        literal_re = self._literal_re
        if literal_re is not None:
            kinds = self._literal_kind
            replaced = literal_re.sub(lambda m: _marker(kinds[m.group()], m.group()), text)
            if replaced is not text and replaced != text:
                return self._redact_segments(replaced)  # patterns search only the gaps
        return _redact_patterns(text, anchor.start())

    # -- JSON values --------------------------------------------------------------------------

    def redact(self, value: Any) -> Any:
        """``value`` with every credential in it redacted; the same object if nothing changed.

        Walks dicts, lists, tuples and strings; other values pass through. Containers are
        copied only along the path to a change (a changed dict or list subclass comes back as a
        plain ``dict``/``list``). Dict keys are never altered.
        """
        t = type(value)
        if t is str:
            if len(value) < self._min_len or self._prefilter(value) is None:
                return value
            return self._redact_text_slow(value)
        if t is dict:
            return self._redact_dict(value)
        if t is list:
            return self._redact_list(value)
        if value is None or t is int or t is float or t is bool:
            return value
        if t is tuple:
            return self._redact_tuple(value)
        return self._redact_other(value)

    __call__ = redact

    def _redact_dict(self, d: Mapping[Any, Any]) -> Any:
        out: dict[Any, Any] | None = None
        key_kinds = _KEY_KINDS
        min_len = self._min_len
        prefilter = self._prefilter
        nv: Any
        for k, v in d.items():
            kind = key_kinds.get(k)
            if kind is None:
                kind = _key_kind(k)
            if kind:
                nv = self._redact_sensitive(kind, v)
            elif type(v) is str:
                if len(v) < min_len or prefilter(v) is None:
                    continue
                nv = self._redact_text_slow(v)
            else:
                t = type(v)
                if t is dict:
                    nv = self._redact_dict(v)
                elif t is list:
                    nv = self._redact_list(v)
                elif v is None or t is int or t is float or t is bool:
                    continue
                else:
                    nv = self.redact(v)
            if nv is not v:
                if out is None:
                    out = dict(d)
                out[k] = nv
        return d if out is None else out

    # _redact_list repeats _redact_dict's per-value dispatch on purpose: this runs on every
    # recorded payload, and a shared helper costs a call per element.
    def _redact_list(self, items: list[Any]) -> list[Any]:
        out: list[Any] | None = None
        min_len = self._min_len
        prefilter = self._prefilter
        nv: Any
        for i, v in enumerate(items):
            if type(v) is str:
                if len(v) < min_len or prefilter(v) is None:
                    continue
                nv = self._redact_text_slow(v)
            else:
                t = type(v)
                if t is dict:
                    nv = self._redact_dict(v)
                elif t is list:
                    nv = self._redact_list(v)
                elif v is None or t is int or t is float or t is bool:
                    continue
                else:
                    nv = self.redact(v)
            if nv is not v:
                if out is None:
                    out = list(items)
                out[i] = nv
        return items if out is None else out

    def _redact_tuple(self, items: tuple[Any, ...]) -> tuple[Any, ...]:
        new = [self.redact(v) for v in items]
        if all(a is b for a, b in zip(new, items, strict=True)):
            return items
        return _rebuild_tuple(items, new)

    def _redact_other(self, value: Any) -> Any:
        """Subclasses of the JSON container types; anything else passes through."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return self._redact_dict(value)
        if isinstance(value, list):
            return self._redact_list(value)
        if isinstance(value, tuple):
            return self._redact_tuple(value)
        return value

    def _redact_sensitive(self, kind: str, value: Any) -> Any:
        """The value under a sensitive key: strings (alone or in a list/tuple) are replaced."""
        if isinstance(value, str):
            return _mask_value(kind, value)
        if isinstance(value, list | tuple):
            new = [_mask_value(kind, v) if isinstance(v, str) else self.redact(v) for v in value]
            if all(a is b for a, b in zip(new, value, strict=True)):
                return value
            return new if isinstance(value, list) else _rebuild_tuple(value, new)
        return self.redact(value)


def _rebuild_tuple(old: tuple[Any, ...], items: list[Any]) -> tuple[Any, ...]:
    make = getattr(type(old), "_make", None)  # a namedtuple keeps its type
    if make is not None:
        try:
            rebuilt = make(items)
        except TypeError:
            pass
        else:
            if isinstance(rebuilt, tuple):
                return rebuilt
    return tuple(items)


def _mask_value(kind: str, value: str) -> str:
    """Replace a whole value found under a sensitive key."""
    if not value or _is_marker(value):
        return value
    if kind.replace("_", "") in _SCHEME_KEYS:
        m = _AUTH_SCHEME_RE.fullmatch(value)
        # Keep "Bearer"/"Basic"/"AWS4-HMAC-SHA256" visible.
        if m is not None:
            rest = m.group(3)
            if _is_marker(rest):
                return value
            return f"{m.group(1)}{m.group(2)}{_marker(kind, rest)}"
    return _marker(kind, value)


def _replacement(m: re.Match[str], floor: int) -> tuple[int, str] | None:
    """Where the credential of match ``m`` starts and what replaces it up to ``m.end()``, or
    ``None`` to reject the match. Nothing before ``floor`` (already replaced) is touched."""
    group = m.lastgroup
    assert group is not None
    kind = _KIND_OF_GROUP[group]
    text = m.string
    if group not in _HAS_SECRET_GROUP:
        start = max(m.start() - _LEAD_OF_GROUP.get(group, 0), floor)
        return start, _marker(kind, text[start : m.end()])
    v_start, v_end = m.span(group + "_v")
    secret = text[v_start:v_end]
    if kind == "basic" and not _is_basic_credential(secret):
        return None  # prose such as "Basic Identical"
    if kind == "userinfo" and ":" not in secret:
        # "token@host" is a credential for http(s) only: "ssh://git@host" names a user.
        scheme = _SCHEME_RE.search(text, max(0, m.start() - 32), m.start())
        if scheme is None or scheme.group().lower() not in ("http", "https"):
            return None
    start = m.start()
    return start, f"{text[start:v_start]}{_marker(kind, secret)}{text[v_end : m.end()]}"


def _redact_patterns(text: str, pos: int) -> str:
    """Replace every pattern match in ``text`` (which holds no marker) from ``pos`` on (the
    pre-check's first hit: no match starts earlier)."""
    search = _PATTERN_RE.search
    m = search(text, pos)
    if m is None:
        return text
    parts: list[str] = []
    last = 0
    while m is not None:
        found = _replacement(m, last)
        if found is None:
            # Rejected: look again one character later, so that a credential inside the
            # rejected span (or overlapping it) is still found.
            m = search(text, m.start() + 1)
            continue
        start, replacement = found
        parts.append(text[last:start])
        parts.append(replacement)
        last = m.end()
        m = search(text, last)
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def redaction_policy(redactor: Redactor) -> dict[str, Any]:
    """A JSON description of ``redactor``'s policy, for a run's manifest.

    It names the marker format, the kinds and the sensitive keys, and counts the literal
    secrets; it never holds a secret, nor a tag of one that did not occur.
    """
    return {
        "version": POLICY_VERSION,
        "marker": "[REDACTED:<kind>:<tag>]",
        "tag": "sha256('rar-redact:' + secret)[:8 hex]",
        "kinds": list(KINDS),
        "sensitive_keys": sorted(SENSITIVE_KEYS),
        "literal_secrets": redactor.literal_secret_count,
    }


@functools.cache
def default_redactor() -> Redactor:
    """The process-wide redactor: secrets from ``os.environ`` (read once, on first use)."""
    return Redactor(env=os.environ)
