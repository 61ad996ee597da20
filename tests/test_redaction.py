"""The credential redactor: what it replaces, what it leaves alone, and the guarantees callers
rely on (stable tags, identity when clean, idempotence).

Every secret below is fake and assembled from pieces, so that no scanner mistakes this file for
a leak. The whole corpus (51 formats × 4 encodings × 9 places, ~3,800 benign strings) is in
``tests/test_redaction_corpus.py``; names, encodings and output paths have their own files.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections import OrderedDict, namedtuple
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rar.errors import ConfigError
from rar.redaction import (
    KINDS,
    POLICY_VERSION,
    SENSITIVE_KEYS,
    Redactor,
    default_redactor,
    redaction_policy,
    secret_tag,
)

SRC = Path(__file__).resolve().parents[1] / "src"

# --- fake credentials -----------------------------------------------------------------------------

ANTHROPIC = "sk-ant-" + "api03-" + "Qx7Lm2" * 8
OPENAI = "sk-" + "T3stKey" * 5
OPENAI_PROJ = "sk-proj-" + "Pr0j_K3y-" * 5
OPENAI_SVC = "sk-svcacct-" + "Svc4cct" * 5
GOOGLE = "AIza" + "Sy" + "B1c2D3e4F5" * 3 + "g6H"  # AIza + 35
AWS_ID = "AKIA" + "Z7Q2" * 4
AWS_SECRET = "wJalr" + "Xq9/Lm+T" * 4 + "k2Z"  # 40 chars
GITHUB = "ghp_" + "a1B2c3" * 6
GITHUB_PAT = "github_pat_" + "11AB_cd34" * 3
GITLAB = "glpat-" + "x9Y8z7W6v5" * 2
SLACK = "xoxb-" + "1234567890" + "12-" + "9876543210" + "987-" + "aB3dE5gH7jK9" * 2
STRIPE = "sk_" + "live_" + "51Hx" * 20
HUGGINGFACE = "hf_" + "AbCdEfGhIj" * 3 + "KlMn"
GROQ = "gsk_" + "Gq4Rt6Yu8I" * 5 + "P0"
REPLICATE = "r8_" + "Rp3Lc4Tq5Z" * 3 + "W6x7Y8z"
NPM = "npm_" + "Np9Mq8Lr7K" * 3 + "s6T5u4"
AZURE_KEY = "Zx9" + "Yw8+Vu7/Ts6=" * 7 + "Rq5Po4Nm3Lk2J=="  # 88 characters of base64
BEARER_TOKEN = "tok.3n-v4lue_99"
BASIC_TOKEN = base64.b64encode(b"alice:s3cret").decode()
JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjMifQ" + "." + "sig_Abc-123"
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "b3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACB0ZXN0\n"
    + "-----END OPENSSH PRIVATE KEY-----"
)
PASSWORD = "Tr0ub4dor-" + "x9!"
ENV_VALUE = "v3ry-S3cret-" + "value-42"
EXTRA = "my-" + "extra-secret-42"


def marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}:{secret_tag(secret)}]"


def nested(text: str) -> dict[str, Any]:
    """A dict in a list in a dict, with a sibling that never changes."""
    return {"outer": [{"inner": text, "n": 1}], "untouched": {"x": [1, 2.5, None, True]}}


# (id, redactor arguments, text with a credential, expected text)
KIND_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("anthropic", {}, f"key {ANTHROPIC} end", f"key {marker('anthropic', ANTHROPIC)} end"),
    ("openai", {}, f"key={OPENAI}", f"key={marker('openai', OPENAI)}"),
    ("openai-proj", {}, f'"{OPENAI_PROJ}"', f'"{marker("openai", OPENAI_PROJ)}"'),
    ("openai-svcacct", {}, f"({OPENAI_SVC})", f"({marker('openai', OPENAI_SVC)})"),
    ("google", {}, f"use {GOOGLE}.", f"use {marker('google', GOOGLE)}."),
    (
        "key-param",
        {},
        "GET https://maps.example.com/geo?address=x&key=k3yV4lue99Zq7Wx5&z=1",
        f"GET https://maps.example.com/geo?address=x&key={marker('key', 'k3yV4lue99Zq7Wx5')}&z=1",
    ),
    ("aws", {}, f"id {AWS_ID}\n", f"id {marker('aws', AWS_ID)}\n"),
    (
        "aws-secret-ini",
        {},
        f"aws_secret_access_key = {AWS_SECRET}\n",
        f"aws_secret_access_key = {marker('aws_secret_access_key', AWS_SECRET)}\n",
    ),
    (
        "aws-secret-json-text",
        {},
        f'{{"AWS_SECRET_ACCESS_KEY": "{AWS_SECRET}"}}',
        f'{{"AWS_SECRET_ACCESS_KEY": "{marker("aws_secret_access_key", AWS_SECRET)}"}}',
    ),
    ("github", {}, f"token {GITHUB}", f"token {marker('github', GITHUB)}"),
    ("github-pat", {}, f"token {GITHUB_PAT}", f"token {marker('github', GITHUB_PAT)}"),
    ("gitlab", {}, f"PRIVATE-TOKEN {GITLAB}", f"PRIVATE-TOKEN {marker('gitlab', GITLAB)}"),
    ("slack", {}, f"SLACK={SLACK}", f"SLACK={marker('slack', SLACK)}"),
    (
        "stripe",
        {},
        f"stripe.api_key = '{STRIPE}'",
        f"stripe.api_key = '{marker('stripe', STRIPE)}'",
    ),
    ("huggingface", {}, f"login({HUGGINGFACE})", f"login({marker('huggingface', HUGGINGFACE)})"),
    ("groq", {}, f"GROQ: {GROQ}", f"GROQ: {marker('groq', GROQ)}"),
    ("replicate", {}, f"r = {REPLICATE};", f"r = {marker('replicate', REPLICATE)};"),
    (
        "npm",
        {},
        f"//registry.npmjs.org/:_authToken={NPM}",
        f"//registry.npmjs.org/:_authToken={marker('npm', NPM)}",
    ),
    (
        "azure-account-key",
        {},
        f"AccountName=acme;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        f"AccountName=acme;AccountKey={marker('accountkey', AZURE_KEY)};"
        "EndpointSuffix=core.windows.net",
    ),
    (
        "bearer",
        {},
        f"Authorization: Bearer {BEARER_TOKEN}",
        f"Authorization: Bearer {marker('bearer', BEARER_TOKEN)}",
    ),
    (
        "basic",
        {},
        f'curl -H "Authorization: Basic {BASIC_TOKEN}" x',
        f'curl -H "Authorization: Basic {marker("basic", BASIC_TOKEN)}" x',
    ),
    ("jwt", {}, f"jwt={JWT};", f"jwt={marker('jwt', JWT)};"),
    ("private_key", {}, f"key:\n{PEM}\nbye", f"key:\n{marker('private_key', PEM)}\nbye"),
    (
        "userinfo",
        {},
        "postgres://admin:hunter22@db.internal:5432/app",
        f"postgres://{marker('userinfo', 'admin:hunter22')}@db.internal:5432/app",
    ),
    (
        "userinfo-token",
        {},
        "git clone https://ghtoken123@github.com/org/repo.git",
        f"git clone https://{marker('userinfo', 'ghtoken123')}@github.com/org/repo.git",
    ),
    (
        "password",
        {},
        f"export DB_PASSWORD={PASSWORD}",
        f"export DB_PASSWORD={marker('db_password', PASSWORD)}",
    ),
    (
        "env",
        {"env": {"MY_API_TOKEN": ENV_VALUE}},
        f"the value {ENV_VALUE}!",
        f"the value {marker('env', ENV_VALUE)}!",
    ),
    (
        "secret",
        {"extra_secrets": [EXTRA]},
        f"x{EXTRA}x",
        f"x{marker('secret', EXTRA)}x",
    ),
]
KIND_IDS = [case[0] for case in KIND_CASES]

# Never redacted (by a redactor with no literal secrets).
NOT_SECRETS: list[str] = [
    "sha256:" + "0123456789abcdef" * 4,
    "0123456789abcdef" * 4,
    "3f6c2a8e-9b1d-4c7e-8a2f-5d4b3c2a1e0f",
    "urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "the basic idea",
    "Basic concepts of Basic Identical types",
    "basic types/structures",
    "Use Bearer authentication for the bearer instrument.",
    "a sketch of the skeleton",
    "task-ant-farm",
    "ask-me-anything",
    "sk-1",
    "sk-short-key",
    "sk-three-bounce-animation-wrapper",
    "?key=reports/2024/annual-summary.pdf",
    "gpt-4o-mini",
    "claude-sonnet-4-5",
    "claude-3-5-sonnet-20241022",
    "/srv/app/src/billing/models.py",
    "C:\\Users\\me\\key_file.txt",
    "42",
    "3.14159",
    "user@example.com",
    "mail alice@example.com, not https://example.com/@alice",
    "ssh://git@github.com/org/repo.git",
    "https://alice@example.com/profile",
    "https://example.com/search?q=key&key=short",
    "max_tokens tool_use input_schema",
    "TOKENIZER_NAME=bert-base-uncased",
    'JSON: {"a": 1, "b": [true, null]}',
    '{"token": "Hello", "logprob": -0.31}',
    "password: must be at least 12 characters long",
    'password = os.environ["DB_PASSWORD"]',
    "api_key = env:OPENAI_API_KEY",
    "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(60))).decode(),
    base64.b64encode(b"a plain sentence, nothing secret in it").decode(),
    "[REDACTED:openai:0123abcd]",
]


@pytest.fixture
def r() -> Redactor:
    return Redactor(env={})


# --- each kind ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "args", "text", "expected"), KIND_CASES, ids=KIND_IDS)
def test_each_kind_is_redacted_in_text(
    kind: str, args: dict[str, Any], text: str, expected: str
) -> None:
    assert Redactor(**args).redact_text(text) == expected


@pytest.mark.parametrize(("kind", "args", "text", "expected"), KIND_CASES, ids=KIND_IDS)
def test_each_kind_is_redacted_inside_nested_json(
    kind: str, args: dict[str, Any], text: str, expected: str
) -> None:
    value = nested(text)
    out = Redactor(**args).redact(value)
    assert out == nested(expected)
    assert value == nested(text), "the input is not mutated"
    assert out["untouched"] is value["untouched"], "unchanged subtrees are shared, not copied"


def test_kinds_are_marker_safe_and_listed_once() -> None:
    assert len(set(KINDS)) == len(KINDS)
    assert all(kind.replace("_", "").isalnum() and kind == kind.lower() for kind in KINDS)
    assert {"anthropic", "openai", "aws", "github", "slack", "stripe", "jwt", "env"} <= set(KINDS)


def test_anthropic_key_is_checked_before_openai(r: Redactor) -> None:
    assert r.redact_text(ANTHROPIC) == marker("anthropic", ANTHROPIC)


def test_secret_next_to_punctuation_is_still_found(r: Redactor) -> None:
    text = f"[{OPENAI}],{GITHUB};{AWS_ID}"
    assert r.redact_text(text) == (
        f"[{marker('openai', OPENAI)}],{marker('github', GITHUB)};{marker('aws', AWS_ID)}"
    )


def test_two_secrets_side_by_side_are_both_redacted(r: Redactor) -> None:
    # AKIA… followed directly by another key only matches once its neighbour became a marker.
    assert r.redact_text(AWS_ID + GOOGLE) == marker("aws", AWS_ID) + marker("google", GOOGLE)


def test_a_key_repeated_into_a_long_run_is_redacted_whole(r: Redactor) -> None:
    # Past 1,024 characters a run of binary base64 (an image) is skipped: not a run of keys.
    text = OPENAI_PROJ.rstrip("-") * 40
    assert r.redact_text(text) == marker("openai", text)


def test_a_pem_header_without_a_key_is_left_alone(r: Redactor) -> None:
    text = '_SK_START = b"-----BEGIN OPENSSH PRIVATE KEY-----"'
    assert r.redact_text(text) is text


def test_truncated_pem_block_is_redacted_to_its_end(r: Redactor) -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow+IBAAKCAQ=\nAbc"
    assert r.redact_text(text) == marker("private_key", text)


def test_pem_public_key_is_left_alone(r: Redactor) -> None:
    text = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----"
    assert r.redact_text(text) == text


def test_aws_secret_access_key_names_in_camel_case(r: Redactor) -> None:
    text = f'{{"SecretAccessKey": "{AWS_SECRET}"}}'
    expected = f'{{"SecretAccessKey": "{marker("secretaccesskey", AWS_SECRET)}"}}'
    assert r.redact_text(text) == expected


@pytest.mark.parametrize(
    "key", ["AKIAIOSFODNN7EXAMPLE", "AKIAI44QH8DHBEXAMPLE", "ASIAIOSFODNN7EXAMPLE"]
)
def test_aws_documentation_example_keys_are_not_secrets(r: Redactor, key: str) -> None:
    # Published by AWS in its documentation; they grant nothing (see docs/hashing.md).
    assert r.redact_text(f"aws_access_key_id = {key}") == f"aws_access_key_id = {key}"


def test_webhook_urls_keep_their_host(r: Redactor) -> None:
    path = "T0ABCDEFG/B0HIJKLMN/" + "Wh00kS3cr3t" * 2
    text = f"post to https://hooks.slack.com/services/{path}"
    assert r.redact_text(text) == (
        f"post to https://hooks.slack.com/services/{marker('slack_webhook', path)}"
    )


# --- sensitive keys -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("x-api-key", "x_api_key"),
        ("X-Api-Key", "x_api_key"),
        ("X_API_KEY", "x_api_key"),
        ("apiKey", "apikey"),
        ("Api-Key", "api_key"),
        ("x-goog-api-key", "x_goog_api_key"),
        ("PASSWORD", "password"),
        ("passwd", "passwd"),
        ("Secret", "secret"),
        ("clientSecret", "clientsecret"),
        ("client-secret", "client_secret"),
        ("access_token", "access_token"),
        ("refreshToken", "refreshtoken"),
        ("id_token", "id_token"),
        ("Cookie", "cookie"),
        ("private_key", "private_key"),
        ("db_password", "db_password"),
        ("github_token", "github_token"),
        ("X-Vault-Token", "x_vault_token"),
        ("Ocp-Apim-Subscription-Key", "ocp_apim_subscription_key"),
        ("smtp.password", "smtp_password"),
    ],
)
def test_header_keys_with_any_casing_are_redacted(r: Redactor, key: str, kind: str) -> None:
    value = {"headers": {key: "plain-value", "Accept": "application/json"}}
    out = r.redact(value)
    assert out["headers"] == {key: marker(kind, "plain-value"), "Accept": "application/json"}


def test_dict_keys_are_not_altered(r: Redactor) -> None:
    value = {OPENAI: "x", "Authorization": "abc"}
    assert list(r.redact(value)) == [OPENAI, "Authorization"]


@pytest.mark.parametrize("key", ["Authorization", "authorization", "Proxy-Authorization"])
def test_authorization_header_keeps_the_scheme_word(r: Redactor, key: str) -> None:
    kind = key.lower().replace("-", "_")
    out = r.redact({key: "Bearer abc.def-123"})
    assert out == {key: f"Bearer {marker(kind, 'abc.def-123')}"}


def test_authorization_header_keeps_other_scheme_words(r: Redactor) -> None:
    value = "AWS4-HMAC-SHA256 Credential=AKID/x, Signature=abc"
    rest = "Credential=AKID/x, Signature=abc"
    expected = f"AWS4-HMAC-SHA256 {marker('authorization', rest)}"
    assert r.redact({"authorization": value}) == {"authorization": expected}


def test_authorization_header_without_scheme_is_replaced_whole(r: Redactor) -> None:
    assert r.redact({"Authorization": OPENAI}) == {"Authorization": marker("authorization", OPENAI)}
    assert r.redact({"Authorization": "sk-ab cd"}) == {
        "Authorization": marker("authorization", "sk-ab cd")
    }


def test_list_of_strings_under_sensitive_key_is_redacted_item_by_item(r: Redactor) -> None:
    out = r.redact({"Set-Cookie": ["a=1; Path=/", "b=2"]})
    assert out == {"Set-Cookie": [marker("set_cookie", "a=1; Path=/"), marker("set_cookie", "b=2")]}


def test_sensitive_key_leaves_markers_references_placeholders_and_non_strings(
    r: Redactor,
) -> None:
    value = {
        "password": "",
        "secret": marker("secret", "x"),
        "api_key": 12345678,
        "access_token": None,
        "Authorization": f"Bearer {marker('authorization', 'abc')}",
        "x-api-key": "env:OPENAI_API_KEY",
        "client_secret": "${CLIENT_SECRET}",
        "db_password": "********",
    }
    assert r.redact(value) is value


def test_containers_under_sensitive_key_are_walked_with_the_ordinary_rules(r: Redactor) -> None:
    value = {"secret": {"name": "prod", "note": f"uses {OPENAI}"}}
    assert r.redact(value) == {
        "secret": {"name": "prod", "note": f"uses {marker('openai', OPENAI)}"}
    }


def test_aws_credential_keys_are_sensitive(r: Redactor) -> None:
    value = {"AWS_SECRET_ACCESS_KEY": "abc", "SessionToken": "def"}
    assert r.redact(value) == {
        "AWS_SECRET_ACCESS_KEY": marker("aws_secret_access_key", "abc"),
        "SessionToken": marker("sessiontoken", "def"),
    }


def test_sensitive_keys_are_normalized_without_separators() -> None:
    assert all(key == key.lower() and "-" not in key and "_" not in key for key in SENSITIVE_KEYS)


# --- Bearer / Basic / URLs ------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_bearer_scheme_word_is_kept(r: Redactor, scheme: str) -> None:
    token = "Zq9x" + BEARER_TOKEN
    assert r.redact_text(f"{scheme} {token}") == f"{scheme} {marker('bearer', token)}"


def test_bearer_token_of_mixed_case_letters_only_is_redacted(r: Redactor) -> None:
    token = "AbcDefGhiJklMnoPqr"
    assert r.redact_text(f"Bearer {token}") == f"Bearer {marker('bearer', token)}"


@pytest.mark.parametrize("scheme", ["Basic", "basic"])
def test_basic_scheme_word_is_kept(r: Redactor, scheme: str) -> None:
    text = f"Authorization: {scheme} {BASIC_TOKEN}"
    assert r.redact_text(text) == f"Authorization: {scheme} {marker('basic', BASIC_TOKEN)}"


def test_basic_credential_without_digits_is_redacted(r: Redactor) -> None:
    token = base64.b64encode(b"user:pass").decode()  # dXNlcjpwYXNz: letters only
    assert r.redact_text(f"Authorization: Basic {token}") == (
        f"Authorization: Basic {marker('basic', token)}"
    )


def test_url_key_parameter_replaces_only_the_value(r: Redactor) -> None:
    url = f"https://generativelanguage.example.com/v1/models?key={GOOGLE}"
    expected = "https://generativelanguage.example.com/v1/models?key=" + marker("google", GOOGLE)
    assert r.redact_text(url) == expected


def test_url_userinfo_with_password_is_redacted_for_any_scheme(r: Redactor) -> None:
    url = "amqp://guest:p@ss:w0rd@rabbit:5672/"
    assert r.redact_text(url) == f"amqp://{marker('userinfo', 'guest:p@ss:w0rd')}@rabbit:5672/"


def test_url_userinfo_without_password_is_kept_for_non_http_schemes(r: Redactor) -> None:
    assert r.redact_text("ssh://git@github.com/x.git") == "ssh://git@github.com/x.git"


def test_url_userinfo_with_a_placeholder_password_is_kept(r: Redactor) -> None:
    for url in ("postgres://user:password@localhost/db", "postgres://u:${DB_PASSWORD}@db/app"):
        assert r.redact_text(url) == url


def test_curl_user_option_is_redacted(r: Redactor) -> None:
    text = "curl -u deploy:Hx7!kq2z https://ci.example.com/api"
    expected = f"curl -u {marker('userinfo', 'deploy:Hx7!kq2z')} https://ci.example.com/api"
    assert r.redact_text(text) == expected


def test_email_address_is_not_userinfo(r: Redactor) -> None:
    assert r.redact_text("write to ops@example.com") == "write to ops@example.com"


# --- what is left alone ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_not_a_secret_is_left_alone(r: Redactor, text: str) -> None:
    assert r.redact_text(text) is text


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_not_a_secret_is_left_alone_inside_json(r: Redactor, text: str) -> None:
    value = nested(text)
    assert r.redact(value) is value


@pytest.mark.parametrize("value", [0, 1.5, True, False, None, 10**30, "", "x"])
def test_scalars_pass_through(r: Redactor, value: Any) -> None:
    assert r.redact(value) is value


def test_other_types_pass_through(r: Redactor) -> None:
    value = {b"bytes", frozenset()}
    assert r.redact(value) is value


# --- identity and copying -------------------------------------------------------------------------


def realistic_request() -> dict[str, Any]:
    content = (
        "Summarise the basic architecture of the billing service (src/billing/models.py) and "
        "its deployment. Mention sha256:" + "ab" * 32 + " and run 3f6c2a8e-9b1d-4c7e-8a2f. "
    )
    return {
        "model": "claude-3-5-sonnet-20241022",
        "max_tokens": 1024,
        "temperature": 0.2,
        "messages": [
            {"role": "user", "content": content * 4},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading the file."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A09q90",
                        "name": "read_file",
                        "input": {"path": "/srv/app/src/billing/models.py"},
                    },
                ],
            },
        ],
        "tools": [{"name": "read_file", "input_schema": {"type": "object", "required": ["path"]}}],
        "headers": {"Content-Type": "application/json", "Accept": "*/*"},
        "pair": ("a", "b"),
    }


def test_redact_returns_the_same_object_when_nothing_changes(r: Redactor) -> None:
    value = realistic_request()
    assert r.redact(value) is value
    assert r(value) is value


def test_redact_copies_only_the_path_to_a_change(r: Redactor) -> None:
    value = realistic_request()
    value["messages"][1]["content"][0]["text"] = f"key {OPENAI}"
    out = r.redact(value)
    assert out is not value
    assert out["messages"] is not value["messages"]
    assert out["messages"][0] is value["messages"][0]
    assert out["messages"][1]["content"][1] is value["messages"][1]["content"][1]
    assert out["tools"] is value["tools"]
    assert out["messages"][1]["content"][0]["text"] == f"key {marker('openai', OPENAI)}"
    assert value["messages"][1]["content"][0]["text"] == f"key {OPENAI}", "input not mutated"


def test_tuples_and_namedtuples_keep_their_type(r: Redactor) -> None:
    pair = namedtuple("pair", "a b")
    assert r.redact(("x", OPENAI)) == ("x", marker("openai", OPENAI))
    out = r.redact(pair("x", OPENAI))
    assert type(out) is pair
    assert out == pair("x", marker("openai", OPENAI))
    clean = pair("x", "y")
    assert r.redact(clean) is clean


def test_changed_dict_subclass_comes_back_as_a_plain_dict(r: Redactor) -> None:
    value = OrderedDict([("a", OPENAI), ("b", "c")])
    out = r.redact(value)
    assert type(out) is dict
    assert list(out.items()) == [("a", marker("openai", OPENAI)), ("b", "c")]


# --- idempotence and markers ----------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "args", "text", "expected"), KIND_CASES, ids=KIND_IDS)
def test_redaction_is_idempotent(kind: str, args: dict[str, Any], text: str, expected: str) -> None:
    red = Redactor(**args)
    once = red.redact(nested(text))
    assert red.redact(once) is once


def test_existing_marker_is_never_redacted_again(r: Redactor) -> None:
    text = f"Bearer {marker('bearer', 'abc12345')} and {marker('openai', OPENAI)}"
    assert r.redact_text(text) is text


def test_literal_secret_that_looks_like_marker_text_does_not_nest() -> None:
    red = Redactor(extra_secrets=["REDACTED", "secret:1"])
    once = red.redact_text("x REDACTED secret:1 y")
    assert once == f"x {marker('secret', 'REDACTED')} {marker('secret', 'secret:1')} y"
    assert red.redact_text(once) is once


def test_overlapping_credentials_merge_into_one_marker(r: Redactor) -> None:
    # The name rule takes the whole value, the vendor rule the key inside it: nothing between.
    text = f"api_key={OPENAI}-and-more"
    out = r.redact_text(text)
    assert OPENAI not in out and out.startswith("api_key=[REDACTED:")


# --- tags -----------------------------------------------------------------------------------------


def test_secret_tag_is_8_lowercase_hex_of_salted_sha256() -> None:
    import hashlib

    tag = secret_tag("abc")
    assert tag == hashlib.sha256(b"rar-redact:abc").hexdigest()[:8]
    assert len(tag) == 8
    assert tag == tag.lower()
    int(tag, 16)


def test_tags_are_stable_across_redactor_instances() -> None:
    text = f"{OPENAI} {GITHUB} Bearer {BEARER_TOKEN}"
    assert Redactor().redact_text(text) == Redactor(env={}).redact_text(text)


def test_tags_are_stable_across_processes() -> None:
    code = (
        "import json, sys; from rar.redaction import Redactor, secret_tag; "
        "text = sys.stdin.read(); "
        "print(json.dumps([secret_tag(text), Redactor().redact_text(text)]))"
    )
    text = f"{OPENAI} and {JWT} and {SLACK} and {base64.b64encode(GITHUB.encode()).decode()}"
    results = []
    for seed in ("1", "987654"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC)}
        done = subprocess.run(
            [sys.executable, "-c", code],
            input=text,
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        results.append(json.loads(done.stdout))
    here = [secret_tag(text), Redactor().redact_text(text)]
    assert results[0] == results[1] == here


# --- literal secrets ------------------------------------------------------------------------------


def test_longer_literal_secret_wins_over_one_it_contains() -> None:
    red = Redactor(env={"A_TOKEN": "abcd1234", "B_TOKEN": "abcd1234-and-more"})
    assert red.redact_text("[abcd1234-and-more]") == f"[{marker('env', 'abcd1234-and-more')}]"
    assert red.redact_text("[abcd1234]") == f"[{marker('env', 'abcd1234')}]"


def test_literal_secret_is_replaced_before_patterns_split_it() -> None:
    secret = "Xy9!weird@token#value"
    red = Redactor(extra_secrets=[secret])
    assert red.redact_text(f"Bearer {secret}") == f"Bearer {marker('secret', secret)}"


def test_extra_secret_wins_over_env_for_the_kind() -> None:
    red = Redactor(extra_secrets=[ENV_VALUE], env={"MY_TOKEN": ENV_VALUE})
    assert red.redact_text(ENV_VALUE) == marker("secret", ENV_VALUE)


def test_extra_secrets_as_a_single_string_is_one_secret() -> None:
    red = Redactor(extra_secrets="hunter2hunter2")
    assert red.redact_text("pw hunter2hunter2") == f"pw {marker('secret', 'hunter2hunter2')}"
    assert red.redact_text("hunt") == "hunt"


def test_extra_secrets_must_be_strings() -> None:
    with pytest.raises(ConfigError):
        Redactor(extra_secrets=[b"bytes"])  # type: ignore[list-item]


def test_literal_secrets_are_found_in_long_text() -> None:
    red = Redactor(env={"API_KEY": ENV_VALUE})
    text = "lorem ipsum " * 300 + ENV_VALUE + " dolor" * 300
    assert red.redact_text(text) == "lorem ipsum " * 300 + marker("env", ENV_VALUE) + " dolor" * 300


def test_default_redactor_is_rebuilt_when_the_environment_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    default_redactor.cache_clear()
    try:
        red = default_redactor()
        assert default_redactor() is red, "the same environment gives the same redactor"
        monkeypatch.setenv("RAR_TEST_API_TOKEN", ENV_VALUE)
        again = default_redactor()
        assert again is not red
        assert again.redact_text(ENV_VALUE) == marker("env", ENV_VALUE)
    finally:
        default_redactor.cache_clear()


def test_redaction_policy_is_json_and_holds_no_secret() -> None:
    red = Redactor(env={"API_KEY": ENV_VALUE}, extra_secrets=[EXTRA])
    policy = redaction_policy(red)
    text = json.dumps(policy)
    assert ENV_VALUE not in text
    assert EXTRA not in text
    assert secret_tag(ENV_VALUE) not in text
    assert policy["literal_secrets"] == 2
    assert policy["version"] == POLICY_VERSION
    assert set(KINDS) <= set(policy["kinds"])


# --- properties -----------------------------------------------------------------------------------

# Text without these can trigger nothing: no run of 16 token characters (the alphabet below has
# no digits, and no letter repeats 16 times in a row without a break), no "%", no "://…@", and
# none of the words that introduce short credentials ("pass", "pwd", "auth": no p, w, u).
SAFE_TEXT = st.text(
    alphabet=st.characters(
        exclude_characters="%@pPwWuU0123456789", exclude_categories=["Cs"], max_codepoint=0x2FF
    ),
    max_size=300,
).map(lambda text: "".join(ch if i % 12 else " " for i, ch in enumerate(text)))
SEPARATORS = st.sampled_from([" ", "\n", "\t", '"', "'", "(", ")", ",", ";", "<", ">", "|"])


@settings(deadline=None)
@given(text=SAFE_TEXT)
def test_property_text_without_triggers_is_unchanged(text: str) -> None:
    assert Redactor().redact_text(text) is text


# Whitespace and quotes end every token, URL and query value (unlike "(" or ";").
WORD_BREAKS = st.sampled_from([" ", "\n", "\t", '"', "'", "<", ">"])
PROSE_WORDS = [*NOT_SECRETS, "Bearer authentication", "basic concepts", "sk-", "key=", "://"]


@settings(deadline=None)
@given(words=st.lists(st.sampled_from(PROSE_WORDS)), seps=st.lists(WORD_BREAKS, min_size=1))
def test_property_prose_made_of_non_secrets_is_unchanged(words: list[str], seps: list[str]) -> None:
    text = "".join(word + seps[i % len(seps)] for i, word in enumerate(words))
    assert Redactor().redact_text(text) is text


KEY_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@settings(deadline=None)
@given(
    before=st.text(max_size=80),
    sep_before=SEPARATORS,
    prefix=st.sampled_from(["sk-", "sk-proj-", "sk-svcacct-"]),
    # A generated key: its first 16 characters are letters and digits with both in them.
    head=st.text(alphabet=KEY_ALPHABET, min_size=14, max_size=14),
    body=st.text(alphabet=KEY_ALPHABET + "_-", min_size=20, max_size=80),
    after=st.text(max_size=80),
)
def test_property_openai_key_in_random_text_never_survives(
    before: str, sep_before: str, prefix: str, head: str, body: str, after: str
) -> None:
    key = prefix + "a7" + head + body
    out = Redactor().redact(nested(before + sep_before + key + after))
    assert key not in out["outer"][0]["inner"]


FRAGMENTS = [
    OPENAI,
    ANTHROPIC,
    GOOGLE,
    AWS_ID,
    GITHUB,
    JWT,
    f"Bearer {BEARER_TOKEN}",
    f"Basic {BASIC_TOKEN}",
    "https://u:p4ss@h",
    "password=",
    "%2F",
    base64.b64encode(GITHUB.encode()).decode(),
    ENV_VALUE,
    "plain words",
    "sk-1",
    "AKIAIOSFODNN7EXAMPLE",
    marker("openai", "x"),
    "[REDACTED:",
    "]",
]


@settings(deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=12))
def test_property_redaction_is_idempotent(parts: list[str]) -> None:
    red = Redactor(env={"MY_TOKEN": ENV_VALUE})
    once = red.redact_text("".join(parts))
    assert red.redact_text(once) == once
