"""Markers and tags: what a redacted secret is replaced by."""

from __future__ import annotations

import hashlib
import re
from typing import Final

_TAG_PREFIX: Final = b"rar-redact:"

MARKER_PREFIX: Final = "[REDACTED:"
MARKER_RE: Final = re.compile(r"\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]")
is_marker: Final = MARKER_RE.fullmatch

_KIND_JUNK: Final = re.compile(r"[^a-z0-9]+")


def secret_tag(secret: str) -> str:
    """The 8-lowercase-hex tag of ``secret``: a prefix of ``sha256(b"rar-redact:" + secret)``.

    Unsalted on purpose: the same secret gets the same tag in every process, so two recordings
    of one key still match. (Lone surrogates, as ``os.environ`` may hold, are encoded with
    ``surrogatepass`` instead of raising; for every other string this is plain UTF-8.)
    """
    data = _TAG_PREFIX + secret.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:8]


def marker(kind: str, secret: str) -> str:
    """``[REDACTED:<kind>:<tag of secret>]``."""
    return f"[REDACTED:{kind}:{secret_tag(secret)}]"


def kind_of_name(name: str) -> str:
    """The marker kind for a secret found under ``name`` (a dict key, a ``name=value`` name):
    lowercased, ``-`` turned into ``_`` as before, any other character outside ``[a-z0-9_]``
    too, so that every marker stays recognisable (and redaction idempotent)."""
    kind = name.lower().replace("-", "_")
    if not kind.replace("_", "").isalnum() or not kind.isascii():
        kind = "_".join(part for part in _KIND_JUNK.split(name.lower()) if part)
    return kind[:48].strip("_") or "secret"
