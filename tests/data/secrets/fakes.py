"""Fake credentials, one generator per format, drawn from a seeded ``random.Random``.

Nothing here is a real secret, and no secret-looking string is committed: every value is built
at test time from the vendor's published shape (prefix, alphabet, length) and random characters,
so push-protection scanners have nothing to flag. The same seed gives the same fakes in every
process (``random.Random`` seeds strings deterministically).

A :class:`Fake` has the ``text`` an agent would meet (the credential with the context it needs,
such as ``Authorization: Bearer`` or ``aws_secret_access_key =``), the ``parts`` that must not
survive redaction, and, for credentials found by their name, the dict ``key`` it sits under.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field

DIGITS = string.digits
LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper()
PASSWORD_CHARS = ALNUM + "!#^*-_.+@~"


@dataclass(frozen=True)
class Fake:
    format: str
    text: str  # the credential as it appears in text, with the context it needs
    parts: tuple[str, ...]  # what must not survive, in any encoding
    key: str | None = None  # found by name only: the dict key / variable it sits under
    value: str | None = None  # ... and the value under that key (default: text)
    env: dict[str, str] = field(default_factory=dict)  # environment the redactor must see

    @property
    def dict_value(self) -> str:
        return self.text if self.value is None else self.value


def chars(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` random characters of ``alphabet``, with a digit and a letter when it has both
    (real keys of 16+ characters almost always do; the fakes always do)."""
    out = [rng.choice(alphabet) for _ in range(n)]
    digits = [c for c in alphabet if c.isdigit()]
    letters = [c for c in alphabet if c.isalpha()]
    if n >= 8 and digits and letters:
        out[rng.randrange(n // 2)] = rng.choice(digits)
        out[n // 2 + rng.randrange(n - n // 2)] = rng.choice(letters)
    return "".join(out)


def mixed_letters(rng: random.Random, n: int) -> str:
    out = [rng.choice(string.ascii_letters) for _ in range(n)]
    out[0], out[1] = rng.choice(UPPER), rng.choice(LOWER)
    rng.shuffle(out)
    return "".join(out)


def password(rng: random.Random, n: int = 14) -> str:
    """A human-made password: letters, digits and a few symbols, not starting with a symbol."""
    body = chars(rng, PASSWORD_CHARS, n - 1)
    return rng.choice(string.ascii_letters) + body


def _token(fmt: str, text: str, *parts: str) -> Fake:
    return Fake(fmt, text, parts or (text,))


def _pem(rng: random.Random) -> Fake:
    lines = [chars(rng, B64, 64) for _ in range(6)] + [chars(rng, B64, 20) + "=="]
    text = (
        "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----"
    )
    return Fake("pem_private_key", text, tuple(lines[:-1]))


def _jwt(rng: random.Random) -> Fake:
    def seg(data: str) -> str:
        return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")

    header = seg('{"alg":"HS256","typ":"JWT"}')
    claims = f'{{"sub":"{chars(rng, ALNUM, 12)}","iat":{rng.randrange(10**9, 2 * 10**9)}}}'
    signature = chars(rng, URLSAFE, 43)
    text = f"{header}.{seg(claims)}.{signature}"
    return Fake("jwt", text, (signature, text[len(header) + 1 :]))


def _basic(rng: random.Random) -> Fake:
    secret = password(rng, 12)
    token = base64.b64encode(f"svc-{chars(rng, LOWER, 5)}:{secret}".encode()).decode()
    return Fake("basic_header", f"Authorization: Basic {token}", (token,))


def _userinfo(rng: random.Random) -> Fake:
    secret = chars(rng, ALNUM + "-_.", 18)
    return Fake("url_userinfo", f"postgres://app_user:{secret}@db.internal:5432/orders", (secret,))


def _aws_secret(rng: random.Random) -> Fake:
    secret = chars(rng, B64, 40)
    return Fake("aws_secret_access_key", f"aws_secret_access_key = {secret}", (secret,))


def _azure_storage(rng: random.Random) -> Fake:
    key = base64.b64encode(rng.randbytes(64)).decode()
    text = (
        f"DefaultEndpointsProtocol=https;AccountName={chars(rng, LOWER, 12)};"
        f"AccountKey={key};EndpointSuffix=core.windows.net"
    )
    return Fake("azure_storage_key", text, (key.rstrip("="),))


def _password_line(rng: random.Random) -> Fake:
    secret = password(rng, 15)
    return Fake("password_assignment", f"export DB_PASSWORD={secret}", (secret,))


def _password_json(rng: random.Random) -> Fake:
    secret = password(rng, 13)
    return Fake("password_json", f'{{"user": "svc", "password": "{secret}"}}', (secret,))


def _db_password_key(rng: random.Random) -> Fake:
    secret = password(rng, 16)
    return Fake(
        "dict_key_db_password", f'db_password: "{secret}"', (secret,), "db_password", secret
    )


def _github_token_key(rng: random.Random) -> Fake:
    secret = chars(rng, HEX, 40)  # an old-style GitHub OAuth token: 40 hex, no prefix
    return Fake(
        "dict_key_github_token", f"github_token={secret}", (secret,), "github_token", secret
    )


def _env_value(rng: random.Random) -> Fake:
    secret = password(rng, 18)
    name = f"{chars(rng, UPPER, 5)}_MY_DB_PASSWORD"  # one variable per case
    return Fake("env_value", secret, (secret,), env={name: secret})


def _curl(rng: random.Random) -> Fake:
    secret = password(rng, 12)
    return Fake("curl_user", f"curl -u deploy:{secret} https://ci.example.com/api/jobs", (secret,))


def _slack_webhook(rng: random.Random) -> Fake:
    secret = chars(rng, ALNUM, 24)
    text = (
        f"https://hooks.slack.com/services/T{chars(rng, UPPER + DIGITS, 8)}"
        f"/B{chars(rng, UPPER + DIGITS, 10)}/{secret}"
    )
    return Fake("slack_webhook", text, (secret,))


def _discord_webhook(rng: random.Random) -> Fake:
    secret = chars(rng, URLSAFE, 68)
    text = f"https://discord.com/api/webhooks/{chars(rng, DIGITS, 18)}/{secret}"
    return Fake("discord_webhook", text, (secret,))


def _bearer(rng: random.Random) -> Fake:
    secret = chars(rng, ALNUM, 40)
    return Fake("bearer_header", f"Authorization: Bearer {secret}", (secret,))


def _simple(
    fmt: str, prefix: str, make: Callable[[random.Random], str]
) -> Callable[[random.Random], Fake]:
    """A token of a fixed ``prefix`` and a random body; the body must not survive."""

    def generate(rng: random.Random) -> Fake:
        body = make(rng)
        return Fake(fmt, prefix + body, (body,))

    return generate


#: format name -> generator: 51 formats, those the review found leaking first.
GENERATORS: dict[str, Callable[[random.Random], Fake]] = {
    "slack_bot_token": _simple(
        "slack_bot_token",
        "xoxb-",
        lambda r: f"{chars(r, DIGITS, 12)}-{chars(r, DIGITS, 13)}-{chars(r, ALNUM, 24)}",
    ),
    "stripe_live_key": _simple("stripe_live_key", "sk_live_", lambda r: chars(r, ALNUM, 99)),
    "huggingface_token": _simple("huggingface_token", "hf_", lambda r: mixed_letters(r, 34)),
    "azure_storage_key": _azure_storage,
    "gitlab_pat": _simple("gitlab_pat", "glpat-", lambda r: chars(r, URLSAFE, 20)),
    "groq_key": _simple("groq_key", "gsk_", lambda r: chars(r, ALNUM, 52)),
    "replicate_token": _simple("replicate_token", "r8_", lambda r: chars(r, ALNUM, 37)),
    "npm_token": _simple("npm_token", "npm_", lambda r: chars(r, ALNUM, 36)),
    "dict_key_db_password": _db_password_key,
    "dict_key_github_token": _github_token_key,
    "env_value": _env_value,
    "pem_private_key": _pem,
    "bearer_header": _bearer,
    "basic_header": _basic,
    "url_userinfo": _userinfo,
    "openai_project_key": _simple(
        "openai_project_key",
        "sk-proj-",
        lambda r: f"{chars(r, URLSAFE, 74)}T3BlbkFJ{chars(r, URLSAFE, 74)}",
    ),
    "openai_legacy_key": _simple(
        "openai_legacy_key", "sk-", lambda r: f"{chars(r, ALNUM, 20)}T3BlbkFJ{chars(r, ALNUM, 20)}"
    ),
    "anthropic_key": _simple(
        "anthropic_key", "sk-ant-api03-", lambda r: chars(r, URLSAFE, 93) + "AA"
    ),
    "google_api_key": _simple("google_api_key", "AIza", lambda r: chars(r, URLSAFE, 35)),
    "google_oauth_token": _simple("google_oauth_token", "ya29.", lambda r: chars(r, URLSAFE, 120)),
    "aws_access_key_id": _simple(
        "aws_access_key_id", "AKIA", lambda r: chars(r, UPPER + "234567", 16)
    ),
    "aws_secret_access_key": _aws_secret,
    "github_pat": _simple("github_pat", "ghp_", lambda r: chars(r, ALNUM, 36)),
    "github_fine_grained_pat": _simple(
        "github_fine_grained_pat",
        "github_pat_",
        lambda r: f"{chars(r, ALNUM, 22)}_{chars(r, ALNUM, 59)}",
    ),
    "slack_webhook": _slack_webhook,
    "azure_ad_client_secret": _simple(
        "azure_ad_client_secret",
        "",
        lambda r: f"{chars(r, ALNUM, 3)}{r.choice(DIGITS)}Q~{chars(r, ALNUM + '_~.-', 34)}",
    ),
    "pypi_token": _simple("pypi_token", "pypi-AgEIcHlwaS5vcmc", lambda r: chars(r, URLSAFE, 150)),
    "perplexity_key": _simple("perplexity_key", "pplx-", lambda r: chars(r, ALNUM, 48)),
    "xai_key": _simple("xai_key", "xai-", lambda r: chars(r, ALNUM, 80)),
    "sendgrid_key": _simple(
        "sendgrid_key", "SG.", lambda r: f"{chars(r, URLSAFE, 22)}.{chars(r, URLSAFE, 43)}"
    ),
    "twilio_api_key": _simple("twilio_api_key", "SK", lambda r: chars(r, HEX, 32)),
    "mailgun_key": _simple("mailgun_key", "key-", lambda r: chars(r, HEX, 32)),
    "digitalocean_pat": _simple("digitalocean_pat", "dop_v1_", lambda r: chars(r, HEX, 64)),
    "shopify_token": _simple("shopify_token", "shpat_", lambda r: chars(r, HEX, 32)),
    "databricks_token": _simple("databricks_token", "dapi", lambda r: chars(r, HEX, 32)),
    "jwt": _jwt,
    "telegram_bot_token": _simple(
        "telegram_bot_token", "", lambda r: f"{chars(r, DIGITS, 10)}:AA{chars(r, URLSAFE, 33)}"
    ),
    "discord_webhook": _discord_webhook,
    "vault_token": _simple("vault_token", "hvs.", lambda r: chars(r, URLSAFE, 90)),
    "doppler_token": _simple("doppler_token", "dp.pt.", lambda r: chars(r, ALNUM, 43)),
    "grafana_token": _simple(
        "grafana_token", "glsa_", lambda r: f"{chars(r, ALNUM, 32)}_{chars(r, HEX, 8)}"
    ),
    "tailscale_key": _simple(
        "tailscale_key", "tskey-auth-", lambda r: f"{chars(r, ALNUM, 12)}-{chars(r, ALNUM, 33)}"
    ),
    "linear_key": _simple("linear_key", "lin_api_", lambda r: chars(r, ALNUM, 40)),
    "postman_key": _simple(
        "postman_key", "PMAK-", lambda r: f"{chars(r, HEX, 24)}-{chars(r, HEX, 34)}"
    ),
    "square_token": _simple("square_token", "sq0atp-", lambda r: chars(r, URLSAFE, 22)),
    "age_secret_key": _simple("age_secret_key", "AGE-SECRET-KEY-1", lambda r: chars(r, BECH32, 58)),
    "sentry_user_token": _simple("sentry_user_token", "sntryu_", lambda r: chars(r, HEX, 64)),
    "supabase_token": _simple("supabase_token", "sbp_", lambda r: chars(r, HEX, 40)),
    "password_assignment": _password_line,
    "password_json": _password_json,
    "curl_user": _curl,
}


def fake(fmt: str, seed: str) -> Fake:
    """The fake of ``fmt`` for ``seed`` (any string: the case's name)."""
    return GENERATORS[fmt](random.Random(f"{fmt}:{seed}"))
