"""The redactor: JSON values in, the same values with credentials replaced out."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ._formats import FORMAT_KINDS
from ._names import COMPOUND_NAMES, Where, env_value_is_secret, is_placeholder, name_strength
from ._scan import Scanner
from ._tags import is_marker, kind_of_name, marker

#: Bumped whenever a change makes the same input redact differently.
POLICY_VERSION: Final = 2

#: Dict keys whose values are replaced whole, written as one word (compared lowercased,
#: ignoring ``-`` and ``_``). Any other key whose last word says "secret" counts too (see
#: :mod:`rar.redaction._names`): ``db_password``, ``github_token``, ``X-Vault-Token``.
SENSITIVE_KEYS: Final[frozenset[str]] = frozenset(
    key.replace("-", "").replace("_", "")
    for key in (
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
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
        "aws_secret_access_key",
        "secret_access_key",
        "aws_session_token",
        "session_token",
        "x-amz-security-token",
        "x-auth-token",
        "private-token",
    )
)

#: Every kind a marker can carry, besides the kinds named after a dict key or a ``name=``.
KINDS: Final[tuple[str, ...]] = (
    *FORMAT_KINDS,
    "bearer",
    "basic",
    "private_key",
    "userinfo",
    "base64",
    "env",
    "secret",
)

_SCHEME_KEYS: Final = frozenset({"authorization", "proxyauthorization"})
# "Bearer abc" -> ("Bearer", " ", "abc"): the scheme word of an Authorization header value.
# The word must start with 3+ letters/digits so that "sk-abc def" does not leave "sk-abc" visible.
_AUTH_SCHEME_RE: Final = re.compile(
    r"([A-Za-z][A-Za-z0-9]{2,19}(?:-[A-Za-z0-9]{1,19}){0,3})(\s+)(\S.*)", re.DOTALL
)
_MIN_LEN: Final = 6  # the shortest text any detector can match ("a://:@", "pwd=x")

# raw key -> kind ("" when the key is not sensitive). Shared by all redactors: it depends on the
# key only. Bounded so that payloads with unbounded key sets cannot grow it without limit.
_KEY_KINDS: dict[str, str] = {}
_KEY_KINDS_MAX: Final = 4096


def _key_kind(key: object) -> str:
    if type(key) is not str:
        return ""
    normalized = key.lower().replace("-", "").replace("_", "")
    sensitive = normalized in SENSITIVE_KEYS or normalized in COMPOUND_NAMES
    kind = kind_of_name(key) if sensitive or name_strength(key, Where.KEY) else ""
    if len(_KEY_KINDS) < _KEY_KINDS_MAX:
        _KEY_KINDS[key] = kind
    return kind


def env_secrets(env: Mapping[str, str]) -> list[str]:
    """The values of ``env`` redacted as literal secrets: those of variables whose name says
    "secret" (``*_TOKEN``, ``*_KEY``, ``*PASSWORD*``, ...) and whose value could be one."""
    return [
        value
        for name, value in env.items()
        if isinstance(name, str)
        and isinstance(value, str)
        and name_strength(name, Where.ENV) is not None
        and env_value_is_secret(value)
    ]


class Redactor:
    """Replaces credentials in JSON values with ``[REDACTED:<kind>:<tag>]`` markers.

    ``extra_secrets`` are literal strings always redacted (kind ``secret``). ``env`` is a mapping
    like :data:`os.environ`: the value of every variable whose name says "secret" (see
    :func:`env_secrets`) is redacted literally wherever it occurs (kind ``env``), also
    base64- or URL-encoded; ``None`` means none. Instances are immutable after construction and
    safe to share between threads.
    """

    __slots__ = ("_literal_count", "_maybe", "_min_len", "_scanner")

    def __init__(
        self, *, extra_secrets: Iterable[str] = (), env: Mapping[str, str] | None = None
    ) -> None:
        literal_kind: dict[str, str] = dict.fromkeys(env_secrets(env) if env else (), "env")
        if isinstance(extra_secrets, str):
            extra_secrets = (extra_secrets,)  # one secret, not one per character
        for secret in extra_secrets:
            if not isinstance(secret, str):
                from rar.errors import ConfigError  # rar.errors routes its messages through here

                raise ConfigError(
                    f"extra_secrets must hold strings, not {type(secret).__name__}: pass the "
                    "secret's text",
                    value_type=type(secret).__name__,
                )
            if secret:
                literal_kind[secret] = "secret"  # an explicit secret wins over "env"
        self._literal_count = len(literal_kind)
        self._scanner = Scanner(literal_kind)
        self._maybe = self._scanner.maybe
        self._min_len = min([_MIN_LEN, *map(len, literal_kind)])

    @property
    def literal_secret_count(self) -> int:
        """How many literal secrets (environment values and ``extra_secrets``) are redacted."""
        return self._literal_count

    # -- text ---------------------------------------------------------------------------------

    def redact_text(self, text: str) -> str:
        """``text`` with every credential in it replaced by a marker (``text`` itself if none)."""
        if len(text) < self._min_len or not self._maybe(text):
            return text
        return self._scanner.redact(text)

    # -- JSON values --------------------------------------------------------------------------

    def redact(self, value: Any) -> Any:
        """``value`` with every credential in it redacted; the same object if nothing changed.

        Walks dicts, lists, tuples and strings; other values pass through. Containers are
        copied only along the path to a change (a changed dict or list subclass comes back as a
        plain ``dict``/``list``). Dict keys are never altered.
        """
        t = type(value)
        if t is str:
            if len(value) < self._min_len or not self._maybe(value):
                return value
            return self._scanner.redact(value)
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
        maybe = self._maybe
        nv: Any
        for k, v in d.items():
            kind = key_kinds.get(k)
            if kind is None:
                kind = _key_kind(k)
            if kind:
                nv = self._redact_sensitive(kind, v)
            elif type(v) is str:
                if len(v) < min_len or not maybe(v):
                    continue
                nv = self._scanner.redact(v)
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
        maybe = self._maybe
        nv: Any
        for i, v in enumerate(items):
            if type(v) is str:
                if len(v) < min_len or not maybe(v):
                    continue
                nv = self._scanner.redact(v)
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
    """Replace a whole value found under a sensitive key (a reference such as ``env:VAR`` or
    ``${VAR}``, a placeholder and an existing marker stay)."""
    if not value or is_marker(value) or is_placeholder(value):
        return value
    if kind.replace("_", "") in _SCHEME_KEYS:
        m = _AUTH_SCHEME_RE.fullmatch(value)
        # Keep "Bearer"/"Basic"/"AWS4-HMAC-SHA256" visible.
        if m is not None:
            rest = m.group(3)
            if is_marker(rest) or is_placeholder(rest):
                return value
            return f"{m.group(1)}{m.group(2)}{marker(kind, rest)}"
    return marker(kind, value)


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
        "sensitive_names": "last word password|passwd|pwd|passphrase|secret|credentials|"
        "cookie|authorization, <x>_pass, <x>_auth, <x>_token, <credential>_key",
        "encodings": ["raw", "base64", "url"],
        "literal_secrets": redactor.literal_secret_count,
    }


class _DefaultRedactor:
    """``default_redactor()``: the process-wide redactor, built from ``os.environ`` and rebuilt
    when the environment changes (a secret exported after the first run is still redacted)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._environ: dict[Any, Any] | None = None
        self._redactor: Redactor | None = None

    def __call__(self) -> Redactor:
        # os.environ keeps its raw contents in _data; comparing that dict is a few µs, where
        # decoding every variable again would cost tens.
        raw = getattr(os.environ, "_data", None)
        current: dict[Any, Any] = raw if isinstance(raw, dict) else dict(os.environ)
        with self._lock:
            if self._redactor is None or self._environ != current:
                self._redactor = Redactor(env=os.environ)
                self._environ = dict(current)
            return self._redactor

    def cache_clear(self) -> None:
        """Forget the redactor, so the next call reads ``os.environ`` again."""
        with self._lock:
            self._redactor = None
            self._environ = None


default_redactor: Final = _DefaultRedactor()


def redact_output(text: str) -> str:
    """``text`` as RAR may print, log, raise or serve it: through :func:`default_redactor`.

    The one function every output path uses (the CLI's error line, exception messages, the
    viewer's error answers), so that what RAR shows is redacted as what it writes.
    """
    return default_redactor().redact_text(text)
