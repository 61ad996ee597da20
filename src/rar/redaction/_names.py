"""Which names say their value is a secret: dict keys, ``name=value`` pairs in text, and
environment variables; and which values under such a name are not secrets after all.

A name is split into lowercase components (``dbPassword`` → ``db password``, ``X-Api-Key`` →
``x api key``, ``AWS_SECRET_ACCESS_KEY`` → ``aws secret access key``), and its *last* component
decides: ``password``, ``passwd``, ``pwd``, ``passphrase``, ``secret``, ``credentials``,
``cookie``, ``authorization`` always; ``pass`` and ``auth`` after a qualifier (``db_pass``,
``basic_auth``); ``token`` after a qualifier that does not name a counter or a cursor
(``github_token`` but not ``max_tokens``, ``next_page_token``, ``eos_token``); ``key`` after a
qualifier that names a credential (``api_key``, ``secret_access_key``, ``AccountKey``, but not
``sort_key`` or ``public_key``). ``TOKENIZER_NAME`` ends in ``name``: not a secret.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Final


class Where(Enum):
    """Where a name was found; the rules differ slightly."""

    KEY = "key"  # a dict key: ``{"token": "Hello"}`` is a logprob, not a credential
    TEXT = "text"  # ``name=value`` / ``name: value`` inside a string
    ENV = "env"  # an environment variable: ``OPENAI_KEY`` is a credential


class Strength(Enum):
    """What a value under a secret name must look like to be redacted in text."""

    PASSWORD = "password"  # anything but a placeholder: passwords are often plain words
    WORDY = "wordy"  # secret, credentials, cookie, auth: not a plain lowercase word
    TOKEN = "token"  # must look random (mixed characters): token, key, sig


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_COMPONENTS: Final = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

_ALWAYS: Final[dict[str, Strength]] = {
    "password": Strength.PASSWORD,
    "passwd": Strength.PASSWORD,
    "pwd": Strength.PASSWORD,
    "passphrase": Strength.PASSWORD,
    "secret": Strength.WORDY,
    "credential": Strength.WORDY,
    "credentials": Strength.WORDY,
    "creds": Strength.WORDY,
    "cookie": Strength.WORDY,
    "authorization": Strength.WORDY,
}
_QUALIFIED: Final[dict[str, Strength]] = {"pass": Strength.PASSWORD, "auth": Strength.WORDY}

# "<x>_token" is a credential unless <x> names a count, a cursor or a tokenizer's token.
_NOT_SECRET_TOKENS: Final = word_set(
    "next page continuation pagination cursor sync resume stop eos bos pad unk sep cls "
    "mask special start end first last max min num input output total prompt completion "
    "cached reasoning new csrf xsrf cancellation update idempotency change sequence"
)
# "<x>_key" is a credential when <x> names one (for dict keys and lower-case text names).
_CREDENTIAL_KEYS: Final = word_set(
    "api access secret private signing sign master account client encryption enc app auth "
    "session shared subscription service license licence admin root webhook consumer "
    "storage deploy hmac jwt"
)
# ... and for environment variables (and SCREAMING_SNAKE names in text) any <x> but these.
_NOT_SECRET_KEYS: Final = word_set(
    "public primary sort partition foreign cache idempotency object row hash range lookup "
    "map gpg pgp host group message routing shard bucket index composite natural unique "
    "dedup dedupe file registry"
)
# Names written as one word (normalized: lowercased, without "-" and "_").
COMPOUND_NAMES: Final = word_set(
    "apikey apitoken accesstoken authtoken refreshtoken idtoken sessiontoken bearertoken "
    "secretkey privatekey accesskey clientsecret xapikey password passwd passphrase "
    "secret authorization proxyauthorization cookie setcookie secretaccesskey "
    "awssecretaccesskey awssessiontoken xamzsecuritytoken xauthtoken privatetoken "
    "xgoogapikey"
)
# Environment variable names that look secret and are not (in any context: env dumps).
_ENV_NOT_SECRETS: Final = frozenset({"PWD", "OLDPWD"})


def components(name: str) -> list[str]:
    """``name`` split into lowercase words: ``APIKey`` → ``["api", "key"]``."""
    return [part.lower() for part in _COMPONENTS.findall(name)]


# bounded caches of name_strength, one per place (keyed by the name alone: hashing the enum
# member would cost a Python call per look-up)
_STRENGTHS: dict[Where, dict[str, Strength | None]] = {where: {} for where in Where}
_STRENGTHS_MAX: Final = 4096


_TEXT_STRENGTHS = _STRENGTHS[Where.TEXT]


def name_strength(name: str, where: Where) -> Strength | None:
    """How strongly ``name`` says its value is a secret, or ``None`` when it does not."""
    cache = _TEXT_STRENGTHS if where is Where.TEXT else _STRENGTHS[where]
    if name in cache:
        return cache[name]
    strength = _name_strength(name, where)
    if len(cache) < _STRENGTHS_MAX:
        cache[name] = strength
    return strength


def _name_strength(name: str, where: Where) -> Strength | None:
    if name in _ENV_NOT_SECRETS:  # the shell's working directories, not passwords
        return None
    parts = components(name)
    if not parts or "public" in parts:  # public_key, publicKeyToken, public_token: published
        return None
    last = parts[-1]
    if last in _ALWAYS:
        return _ALWAYS[last]
    qualifier = parts[-2] if len(parts) > 1 else None
    if last in _QUALIFIED:
        return _QUALIFIED[last] if qualifier is not None or where is Where.ENV else None
    if last == "token":
        if qualifier is None:
            return None if where is Where.KEY else Strength.TOKEN
        return None if qualifier in _NOT_SECRET_TOKENS else Strength.TOKEN
    if last == "key":
        if qualifier is None:
            return Strength.TOKEN if where is Where.ENV else None
        env_style = where is Where.ENV or (where is Where.TEXT and name.isupper())
        if env_style:
            return None if qualifier in _NOT_SECRET_KEYS else Strength.TOKEN
        return Strength.TOKEN if qualifier in _CREDENTIAL_KEYS else None
    if last == "sig" and where is Where.TEXT:  # Azure shared access signatures: &sig=...
        return Strength.TOKEN
    normalized = name.lower().replace("-", "").replace("_", "")
    return Strength.TOKEN if normalized in COMPOUND_NAMES else None


# --- values that are not secrets even under a secret name -----------------------------------

_PLACEHOLDER_WORDS: Final = word_set(
    "none null nil true false undefined include omit same-origin required optional redacted "
    "hidden masked string str bytes int bool secretstr any object unknown n/a na empty "
    "return self this await yield lambda function new not and or if else "
    # the name itself, as in password=password (a keyword argument), and documentation's
    # stand-ins (gitleaks allows the same)
    "password passwd pwd pass passphrase secret token key apikey api_key credential "
    "credentials creds cookie auth authorization changeme change-me change_me changeit"
)
_PLACEHOLDER_RE: Final = re.compile(
    r"""(?x)
      \$\{[^}]*\} | \$[A-Za-z_][A-Za-z0-9_]* | \{\{.*\}\} | <[^>]*> | %\([^)]*\)s | %s
    | env:[A-Za-z_][A-Za-z0-9_]* | \[REDACTED:.* | (.)\1*
    | your[-_ ].* | .*[-_ ]here | example[-_.].* | .*EXAMPLE(?:KEY)?
    | (?:string|str|int|number|bool|boolean|object|any)\? | .*(?:xxxx|XXXX).*
    """
)
# Values that are code, not data: names made of words (settings.SECRET_KEY, .credential,
# user_pass, GOOGLE_APPLICATION_CREDENTIALS, ClientSecret, OAuth2Credentials), header names
# (Access-Control-Allow-Credentials) and URLs. A word here is letters with digits only at its
# end and, in CamelCase, lower-case runs of two or more: "tJjirg2ywqeUpnd" and "c4.qPmUXCUhEb"
# are random, not names. (A CamelCase value alone must have no digit: "Hunter22" is a password.)
_SNAKE: Final = r"_*[a-z]+[0-9]*(?:_+[a-z]+[0-9]*)*_*"
_SCREAMING: Final = r"_*[A-Z]+[0-9]*(?:_+[A-Z]+[0-9]*)*_*"
_CAMEL: Final = r"_*(?:[a-z]{2,}[0-9]*)?(?:[A-Z]+[a-z]{2,}[0-9]*)+(?:[A-Z]+[0-9]*)?"
_WORDLIKE_RE: Final = re.compile(f"{_SNAKE}|{_SCREAMING}|{_CAMEL}")
_DOTTED_RE: Final = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CODE_RE: Final = re.compile(
    r"""(?x)
      _*[a-z]+[0-9]*(?:_+[a-z]+[0-9]*)+_* | _*[A-Z]+[0-9]*(?:_+[A-Z]+[0-9]*)+_*
    | _*(?:[a-z]{2,})?(?:[A-Z]+[a-z]{2,})+[A-Z]*
    | [A-Z][a-z]*(?:-[A-Z][a-z]*)+ | [A-Za-z][A-Za-z0-9+.-]*://.*
    """
)
_IDENTIFIER_RE: Final = re.compile(r"[A-Za-z_][A-Za-z_]*")
# A reverse-DNS or module name in lower case: com.github.googlei18n.cu2qu.curve_type.
_DOTTED_LOWER_RE: Final = re.compile(r"[a-z_][a-z0-9_-]*(?:\.[a-z0-9_-]+){2,}")
# Format strings and other templates: "--password=%s", "{user}:{password}".
_TEMPLATE_RE: Final = re.compile(r"%[sd(]|\{[A-Za-z0-9_]*\}")
_PATH_RE: Final = re.compile(r"(?:~|\.{1,2})?/[^\s]*/[^\s]*|[A-Za-z]:\\.*")
_PLAIN_WORD_RE: Final = re.compile(r"[a-z]+(?:[-_][a-z]+)*")
_RUN_RE: Final = re.compile(r"[A-Za-z0-9]{10,}")
_LOWER_RUN_RE: Final = re.compile(r"[a-z]+")


def _is_path(value: str) -> bool:
    """A file path (``/home/a/.config/key.json``), not base64 that starts with ``/``."""
    return _PATH_RE.fullmatch(value) is not None and not looks_random(value, strict=True)


def is_placeholder(value: str) -> bool:
    """A value that stands for a secret without being one: ``${VAR}``, ``env:VAR``,
    ``<your key>``, ``********``, ``None``, ``your-api-key-here``, AWS's ``...EXAMPLE``."""
    return value.lower() in _PLACEHOLDER_WORDS or _PLACEHOLDER_RE.fullmatch(value) is not None


def _random_run(run: str) -> bool:
    """A run of 10+ letters and digits that looks generated: letters with two or more digits,
    or upper and lower case mixed more often than in CamelCase names (``IndexFault``,
    ``OAuth2Credentials`` are names)."""
    digits = sum(c.isdigit() for c in run)
    if digits == len(run):
        return False
    if digits >= 2:
        return True
    if run.islower() or run.isupper():
        return False
    lower_runs = [len(part) for part in _LOWER_RUN_RE.findall(run)]
    return sum(lower_runs) < 3 * len(lower_runs)


def looks_random(value: str, *, strict: bool = False) -> bool:
    """Whether ``value`` looks generated: it has a run of 10+ letters and digits that does (see
    :func:`_random_run`), or (unless ``strict``) lower case, upper case and digits anywhere in
    it. ``reports/2024/annual-summary.pdf`` and ``your-api-key-here`` do not."""
    if any(_random_run(m.group()) for m in _RUN_RE.finditer(value)):
        return True
    if strict:
        return False
    lower = upper = digit = False
    for c in value:
        lower = lower or c.islower()
        upper = upper or c.isupper()
        digit = digit or c.isdigit()
    return lower and upper and digit


def text_value_is_secret(
    value: str, strength: Strength, *, name: str = "", prose: bool = False, code: bool = False
) -> bool:
    """Whether ``value``, found after the secret ``name`` in text, is to be redacted. ``prose``:
    the value is a bare word after ``name:`` and more words follow ("password: changed
    successfully", "client_secret: Configuration options for…"): a sentence, not a setting.
    ``code``: a bare value after `` = `` (spaced, as code is written; ``.env`` files are not),
    where a name without digits is a variable (``username, password = credentials``)."""
    if is_placeholder(value) or _is_path(value):
        return False
    if code and _IDENTIFIER_RE.fullmatch(value):
        return False
    if value.rpartition(".")[2] in (name, name.rpartition(".")[2]):
        return False  # password=password, self.key = key, Key = module.Key
    if "." in value and _DOTTED_RE.fullmatch(value):
        if all(_WORDLIKE_RE.fullmatch(part) for part in value.lstrip(".").split(".")):
            return False  # settings.SECRET_KEY, os.environ, .credential: code
    elif _CODE_RE.fullmatch(value) and not looks_random(value, strict=True):
        return False  # user_pass, GOOGLE_APPLICATION_CREDENTIALS, ClientSecret: code
    if _DOTTED_LOWER_RE.fullmatch(value) or _TEMPLATE_RE.search(value):
        return False
    if strength is Strength.TOKEN:
        return len(value) >= 16 and looks_random(value)
    if prose and value.isalpha():
        return False
    if strength is Strength.PASSWORD:
        return len(value) >= 6
    # secret, credentials, auth: not a plain word, and not a number ("1.3.6.1.5.5.7.3.1")
    return (
        len(value) >= 8
        and _PLAIN_WORD_RE.fullmatch(value) is None
        and any(c.isalpha() for c in value)
    )


def env_value_is_secret(value: str) -> bool:
    """Whether the value of a secret-looking environment variable is redacted wherever it occurs.

    At least 8 characters, and not a shape that would redact ordinary text everywhere: a path,
    a number, a placeholder, one repeated character, or plain lower-case words of up to 24
    letters (``postgres``, ``bert-base-uncased``).
    """
    if len(value) < 8 or value.isdigit() or len(set(value)) < 4:
        return False
    if is_placeholder(value) or _is_path(value):
        return False
    return not (len(value) <= 24 and _PLAIN_WORD_RE.fullmatch(value))
