"""Which names say "secret": dict keys, ``name=value`` in text, environment variables — and the
values under such names that are still not secrets.

The rule is about the name's last word (see ``rar/redaction/_names.py``): ``db_password`` and
``github_token`` are credentials, ``max_tokens``, ``next_page_token``, ``TOKENIZER_NAME`` and
``sort_key`` are not.
"""

from __future__ import annotations

import pytest

from rar.redaction import Redactor, env_secrets, secret_tag
from rar.redaction._names import Strength, Where, components, name_strength

VALUE = "Vq8" + "-not-a-real-" + "Zk3x7"  # looks like a credential: mixed, with digits


def marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}:{secret_tag(secret)}]"


@pytest.fixture
def r() -> Redactor:
    return Redactor(env={})


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("dbPassword", ["db", "password"]),
        ("X-Api-Key", ["x", "api", "key"]),
        ("AWS_SECRET_ACCESS_KEY", ["aws", "secret", "access", "key"]),
        ("APIKey", ["api", "key"]),
        ("TOKENIZER_NAME", ["tokenizer", "name"]),
        ("smtp.password", ["smtp", "password"]),
    ],
)
def test_names_split_into_lowercase_words(name: str, words: list[str]) -> None:
    assert components(name) == words


# --- dict keys ------------------------------------------------------------------------------------

SECRET_KEYS = [
    "db_password",
    "dbPassword",
    "github_token",
    "GITHUB_TOKEN",
    "X-Vault-Token",
    "X-Shopify-Access-Token",
    "bot_token",
    "smtp_pass",
    "basic_auth",
    "client_secret",
    "webhook_secret",
    "secret_key",
    "signing_key",
    "AccountKey",
    "subscription-key",
    "credentials",
    "new_password",
    "passphrase",
]
NOT_SECRET_KEYS = [
    "token",  # a logprob's token
    "tokens",
    "max_tokens",
    "input_tokens",
    "next_page_token",
    "page_token",
    "eos_token",
    "pad_token",
    "csrf_token",
    "public_token",
    "tokenizer",
    "tokenizer_name",
    "token_type",
    "token_count",
    "key",
    "sort_key",
    "public_key",
    "primary_key",
    "key_id",
    "AWS_ACCESS_KEY_ID",
    "secret_name",
    "password_hash",
    "password_min_length",
    "author",
    "authority",
    "pass",
    "PWD",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_keys_whose_last_word_says_secret_have_their_value_replaced(r: Redactor, key: str) -> None:
    kind = r.redact({key: VALUE})[key].split(":")[1]
    assert r.redact({key: VALUE}) == {key: marker(kind, VALUE)}
    assert kind.startswith(key.lower().replace("-", "_")[:4])


@pytest.mark.parametrize("key", NOT_SECRET_KEYS)
def test_keys_that_only_mention_a_secret_word_keep_their_value(r: Redactor, key: str) -> None:
    value = {key: "Hello"}
    assert r.redact(value) is value


def test_a_logprobs_answer_is_left_alone(r: Redactor) -> None:
    answer = {
        "logprobs": {
            "content": [{"token": " Paris", "logprob": -0.01, "top_logprobs": []}],
        },
        "usage": {"prompt_tokens": 9, "completion_tokens": 2},
    }
    assert r.redact(answer) is answer


# --- environment variables ------------------------------------------------------------------------

SECRET_ENV = [
    "MY_DB_PASSWORD",
    "DB_PASSWORD",
    "GITHUB_TOKEN",
    "HF_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_KEY",
    "STRIPE_SECRET",
    "AWS_SECRET_ACCESS_KEY",
    "SLACK_BOT_TOKEN",
    "GOOGLE_CREDENTIALS",
    "proxy_auth",
    "SMTP_PASS",
    "KEY",
]
NOT_SECRET_ENV = [
    "TOKENIZER_NAME",
    "TOKENIZERS_PARALLELISM",
    "GIT_AUTHOR_NAME",
    "XAUTHORITY",
    "SSH_AUTH_SOCK",
    "PWD",
    "OLDPWD",
    "MAX_TOKENS",
    "PUBLIC_KEY",
    "SORT_KEY",
    "GPG_KEY",
    "AWS_ACCESS_KEY_ID",
    "SECRET_NAME",
    "KEY_PREFIX",
    "GOOGLE_APPLICATION_CREDENTIALS_FILE",
]


@pytest.mark.parametrize("name", SECRET_ENV)
def test_environment_variables_whose_name_says_secret_are_literal_secrets(name: str) -> None:
    red = Redactor(env={name: VALUE})
    assert red.literal_secret_count == 1
    assert red.redact_text(f"<{VALUE}>") == f"<{marker('env', VALUE)}>"


@pytest.mark.parametrize("name", NOT_SECRET_ENV)
def test_environment_variables_that_only_mention_a_secret_word_are_not(name: str) -> None:
    red = Redactor(env={name: VALUE})
    assert red.literal_secret_count == 0
    assert red.redact_text(VALUE) == VALUE


def test_tokenizer_name_is_not_redacted_everywhere() -> None:
    # The review: TOKENIZER_NAME=bert-base-uncased made every "bert-base-uncased" a marker.
    red = Redactor(env={"TOKENIZER_NAME": "bert-base-uncased", "HF_TOKEN": VALUE})
    text = "Loaded bert-base-uncased from the hub"
    assert red.redact_text(text) is text


@pytest.mark.parametrize(
    "value",
    [
        "short",  # under 8 characters
        "/home/alice/.config/key.json",  # a path
        "12345678901",  # a number
        "xxxxxxxxxxxx",  # one repeated character
        "postgres",  # a plain lower-case word: replacing it everywhere would redact prose
        "bert-base-uncased",
        "${OTHER_SECRET}",  # a reference
        "changeme",
    ],
)
def test_secret_named_variables_with_values_that_cannot_be_secrets_are_skipped(value: str) -> None:
    assert env_secrets({"DB_PASSWORD": value}) == []


@pytest.mark.parametrize(
    "value", ["hunter22!", "Tr0ub4dor&3", "correcthorsebatterystaple", VALUE, "s3cr3t-p@ss"]
)
def test_secret_named_variables_with_plausible_values_are_kept(value: str) -> None:
    assert env_secrets({"DB_PASSWORD": value}) == [value]


# --- name = value in text -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "secret"),
    [
        ("password: hunter2!x", "password", "hunter2!x"),
        ('{"password": "hunter2!x"}', "password", "hunter2!x"),
        ("DB_PASSWORD=hunter2!x", "db_password", "hunter2!x"),
        ("mysql --password=hunter2!x", "password", "hunter2!x"),
        ("Server=db;User Id=sa;Password=hunter2!x;", "password", "hunter2!x"),
        ("spring.datasource.password=hunter2!x", "spring_datasource_password", "hunter2!x"),
        (f"X-Api-Key: {VALUE}", "x_api_key", VALUE),
        (f"https://api.example.com/x?access_token={VALUE}&y=1", "access_token", VALUE),
        (f"?sv=2024-01-01&sig={VALUE}", "sig", VALUE),
        (f"github_token={VALUE}", "github_token", VALUE),
        (f"client_secret: '{VALUE}'", "client_secret", VALUE),
        (f'{{\\"api_key\\": \\"{VALUE}\\"}}', "api_key", VALUE),
        (f"Authorization: Token {VALUE}", "authorization", VALUE),
    ],
)
def test_values_after_secret_names_are_redacted(
    r: Redactor, text: str, kind: str, secret: str
) -> None:
    out = r.redact_text(text)
    assert secret not in out
    assert marker(kind, secret) in out


@pytest.mark.parametrize(
    "text",
    [
        "password: must be at least 12 characters long",
        "Password: changed successfully",
        "password = os.environ['DB_PASSWORD']",
        "password = getpass.getpass()",
        "password=password,",
        "secret_key = settings.SECRET_KEY",
        "api_key: str | None = None",
        "api_key: Optional[str] = None",
        "api_key: your-api-key-here",
        "token: abc",
        '{"token": "Hello", "logprob": -0.5}',
        "key: reports/2024/annual-summary.pdf",
        '"password": {"type": "string"}',
        "password: <your password here>",
        "password: ********",
        "api_key = ${OPENAI_API_KEY}",
        "max_tokens=4096",
        "TOKENIZER_NAME=bert-base-uncased",
        "Authorization: Bearer <token>",
        '"token": "sha256:' + "ab" * 32 + '"',
    ],
)
def test_names_followed_by_code_prose_or_placeholders_are_left_alone(
    r: Redactor, text: str
) -> None:
    assert r.redact_text(text) is text


def test_key_alone_counts_only_as_a_url_parameter(r: Redactor) -> None:
    key = "AbC123dEf456GhI789jK"
    assert r.redact_text(f"see key: {key}") == f"see key: {key}"
    assert r.redact_text(f"key={key}") == f"key={key}", "at the very start: no '?' before it"
    assert r.redact_text(f"/v1/x?key={key}") == f"/v1/x?key={marker('key', key)}"


@pytest.mark.parametrize(
    ("name", "where", "strength"),
    [
        ("password", Where.TEXT, Strength.PASSWORD),
        ("client_secret", Where.TEXT, Strength.WORDY),
        ("api_key", Where.TEXT, Strength.TOKEN),
        ("token", Where.KEY, None),
        ("token", Where.TEXT, Strength.TOKEN),
        ("OPENAI_KEY", Where.ENV, Strength.TOKEN),
        ("OPENAI_KEY", Where.TEXT, Strength.TOKEN),  # SCREAMING_SNAKE text follows env rules
        ("openai_key", Where.KEY, None),
    ],
)
def test_name_strength_depends_on_where_the_name_is(
    name: str, where: Where, strength: Strength | None
) -> None:
    assert name_strength(name, where) is strength
