"""The credential redactor: what it replaces, what it leaves alone, and the guarantees callers
rely on (stable tags, identity when clean, idempotence).

Every secret below is fake and assembled from pieces, so that no scanner mistakes this file for
a leak.
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
    SENSITIVE_KEYS,
    Redactor,
    default_redactor,
    redaction_policy,
    secret_tag,
)

SRC = Path(__file__).resolve().parents[1] / "src"

# --- fake credentials, one per kind -------------------------------------------------------------

ANTHROPIC = "sk-ant-" + "api03-" + "Qx7Lm2" * 8
OPENAI = "sk-" + "T3stKey" * 5
OPENAI_PROJ = "sk-proj-" + "Pr0j_K3y-" * 4
OPENAI_SVC = "sk-svcacct-" + "Svc4cct" * 4
GOOGLE = "AIza" + "Sy" + "B1c2D3e4F5" * 3 + "g6H"  # AIza + 35
GOOGLE_PARAM_VALUE = "k3yV4lue99"
AWS_ID = "AKIA" + "Z7Q2" * 4
AWS_SECRET = "wJalr" + "Xq9/Lm+T" * 4 + "k2Z"  # 40 chars
GITHUB = "ghp_" + "a1B2c3" * 6
GITHUB_PAT = "github_pat_" + "11AB_cd34" * 3
BEARER_TOKEN = "tok.3n-v4lue_99"
BASIC_TOKEN = base64.b64encode(b"alice:s3cret").decode()
JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjMifQ" + "." + "sig_Abc-123"
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + "b3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACB0ZXN0\n"
    + "-----END OPENSSH PRIVATE KEY-----"
)
ENV_VALUE = "v3ry-s3cret-" + "value"
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
        "google_key_param",
        {},
        f"GET https://maps.example.com/geo?address=x&key={GOOGLE_PARAM_VALUE}&z=1",
        "GET https://maps.example.com/geo?address=x"
        f"&key={marker('google_key_param', GOOGLE_PARAM_VALUE)}&z=1",
    ),
    ("aws", {}, f"id {AWS_ID}\n", f"id {marker('aws', AWS_ID)}\n"),
    (
        "aws_secret-ini",
        {},
        f"aws_secret_access_key = {AWS_SECRET}\n",
        f"aws_secret_access_key = {marker('aws_secret', AWS_SECRET)}\n",
    ),
    (
        "aws_secret-json-text",
        {},
        f'{{"AWS_SECRET_ACCESS_KEY": "{AWS_SECRET}"}}',
        f'{{"AWS_SECRET_ACCESS_KEY": "{marker("aws_secret", AWS_SECRET)}"}}',
    ),
    ("github", {}, f"token {GITHUB}", f"token {marker('github', GITHUB)}"),
    ("github_pat", {}, f"token {GITHUB_PAT}", f"token {marker('github', GITHUB_PAT)}"),
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
    "gpt-4o-mini",
    "claude-3-5-sonnet-20241022",
    "/srv/app/src/billing/models.py",
    "C:\\Users\\me\\key_file.txt",
    "42",
    "3.14159",
    "user@example.com",
    "mail alice@example.com, not https://example.com/@alice",
    "ssh://git@github.com/org/repo.git",
    "https://example.com/search?q=key&key=short",
    "max_tokens tool_use input_schema",
    'JSON: {"a": 1, "b": [true, null]}',
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


def test_every_kind_has_a_case() -> None:
    covered = {case[0].split("-")[0] for case in KIND_CASES} | {"github"}
    assert set(KINDS) <= covered


def test_anthropic_key_is_checked_before_openai(r: Redactor) -> None:
    assert r.redact_text(ANTHROPIC) == marker("anthropic", ANTHROPIC)


def test_secret_inside_a_word_boundary_is_still_found_next_to_punctuation(r: Redactor) -> None:
    text = f"[{OPENAI}],{GITHUB};{AWS_ID}"
    assert r.redact_text(text) == (
        f"[{marker('openai', OPENAI)}],{marker('github', GITHUB)};{marker('aws', AWS_ID)}"
    )


def test_two_secrets_side_by_side_are_both_redacted(r: Redactor) -> None:
    # AKIA… followed directly by another key only matches once its neighbour became a marker.
    assert r.redact_text(AWS_ID + GOOGLE) == marker("aws", AWS_ID) + marker("google", GOOGLE)


def test_truncated_pem_block_is_redacted_to_its_end(r: Redactor) -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow+IBAAKCAQ=\nAbc"
    assert r.redact_text(text) == marker("private_key", text)


def test_pem_public_key_is_left_alone(r: Redactor) -> None:
    text = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----"
    assert r.redact_text(text) == text


def test_aws_secret_access_key_names_in_camel_case(r: Redactor) -> None:
    text = f'{{"SecretAccessKey": "{AWS_SECRET}"}}'
    assert r.redact_text(text) == f'{{"SecretAccessKey": "{marker("aws_secret", AWS_SECRET)}"}}'


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


def test_sensitive_key_leaves_markers_empty_strings_and_non_strings(r: Redactor) -> None:
    value = {
        "password": "",
        "secret": marker("secret", "x"),
        "api_key": 12345678,
        "access_token": None,
        "Authorization": f"Bearer {marker('authorization', 'abc')}",
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
    assert r.redact_text(f"{scheme} {BEARER_TOKEN}") == f"{scheme} {marker('bearer', BEARER_TOKEN)}"


def test_bearer_token_of_mixed_case_letters_only_is_redacted(r: Redactor) -> None:
    token = "AbcDefGhiJklMnoPqr"
    assert r.redact_text(f"Bearer {token}") == f"Bearer {marker('bearer', token)}"


@pytest.mark.parametrize("scheme", ["Basic", "basic"])
def test_basic_scheme_word_is_kept(r: Redactor, scheme: str) -> None:
    assert r.redact_text(f"{scheme} {BASIC_TOKEN}") == f"{scheme} {marker('basic', BASIC_TOKEN)}"


def test_basic_credential_without_digits_is_redacted(r: Redactor) -> None:
    token = base64.b64encode(b"user:pass").decode()  # dXNlcjpwYXNz: letters only
    assert r.redact_text(f"Basic {token}") == f"Basic {marker('basic', token)}"


def test_url_key_parameter_replaces_only_the_value(r: Redactor) -> None:
    url = f"https://generativelanguage.example.com/v1/models?key={GOOGLE}"
    expected = "https://generativelanguage.example.com/v1/models?key=" + marker(
        "google_key_param", GOOGLE
    )
    assert r.redact_text(url) == expected


def test_url_userinfo_with_password_is_redacted_for_any_scheme(r: Redactor) -> None:
    url = "amqp://guest:p@ss:w0rd@rabbit:5672/"
    assert r.redact_text(url) == f"amqp://{marker('userinfo', 'guest:p@ss:w0rd')}@rabbit:5672/"


def test_url_userinfo_without_password_is_kept_for_non_http_schemes(r: Redactor) -> None:
    assert r.redact_text("ssh://git@github.com/x.git") == "ssh://git@github.com/x.git"


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
    text = f"{OPENAI} and {JWT}"
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


def test_env_secrets_are_taken_from_secret_looking_names() -> None:
    env = {
        "OPENAI_API_KEY": "value-of-api-key",
        "GH_TOKEN": "value-of-gh-token",
        "DB_PASSWORD": "value-of-password",
        "LDAP_PASSWD": "value-of-passwd",
        "SOME_SECRET": "value-of-secret",
        "GOOGLE_CREDENTIALS": "value-of-credential",
        "proxy_auth": "value-of-auth",
        "HOME": "/home/alice-the-user",
        "SHORT_TOKEN": "short",
    }
    red = Redactor(env=env)
    for name, value in env.items():
        text = f"<{value}>"
        out = red.redact_text(text)
        if name in ("HOME", "SHORT_TOKEN"):
            assert out == text, name
        else:
            assert out == f"<{marker('env', value)}>", name


def test_env_names_with_author_or_auth_sock_are_not_secrets() -> None:
    env = {
        "GIT_AUTHOR_NAME": "Alice Example",
        "XAUTHORITY": "/home/alice/.Xauthority",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.1234",
    }
    red = Redactor(env=env)
    for value in env.values():
        assert red.redact_text(value) is value


def test_no_env_means_no_env_secrets() -> None:
    assert Redactor().literal_secret_count == 0
    assert Redactor(env=None).redact_text("value-of-api-key") == "value-of-api-key"


def test_longer_literal_secret_wins_over_one_it_contains() -> None:
    red = Redactor(env={"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-and-more"})
    assert red.redact_text("[abcdefgh-and-more]") == f"[{marker('env', 'abcdefgh-and-more')}]"
    assert red.redact_text("[abcdefgh]") == f"[{marker('env', 'abcdefgh')}]"


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


def test_default_redactor_reads_os_environ_once(monkeypatch: pytest.MonkeyPatch) -> None:
    default_redactor.cache_clear()
    try:
        monkeypatch.setenv("RAR_TEST_API_TOKEN", ENV_VALUE)
        red = default_redactor()
        assert default_redactor() is red
        assert red.redact_text(ENV_VALUE) == marker("env", ENV_VALUE)
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
    assert set(KINDS) <= set(policy["kinds"])


# --- properties -----------------------------------------------------------------------------------

# Every pattern needs one of these characters (its regex alternatives start with them), so text
# without them cannot hold a pattern credential.
ANCHOR_CHARS = "BbkA?&_J:"
SAFE_TEXT = st.text(
    alphabet=st.characters(exclude_characters=ANCHOR_CHARS, exclude_categories=["Cs"]),
    max_size=300,
)
SEPARATORS = st.sampled_from([" ", "\n", "\t", '"', "'", "(", ")", ",", ";", "<", ">", "|"])


@settings(deadline=None)
@given(text=SAFE_TEXT)
def test_property_text_without_anchor_characters_is_unchanged(text: str) -> None:
    assert Redactor().redact_text(text) is text


# Whitespace and quotes end every token, URL and query value (unlike "(" or ";").
WORD_BREAKS = st.sampled_from([" ", "\n", "\t", '"', "'", "<", ">"])
PROSE_WORDS = [*NOT_SECRETS, "Bearer authentication", "basic concepts", "sk-", "key=", "://"]


@settings(deadline=None)
@given(words=st.lists(st.sampled_from(PROSE_WORDS)), seps=st.lists(WORD_BREAKS, min_size=1))
def test_property_prose_made_of_non_secrets_is_unchanged(words: list[str], seps: list[str]) -> None:
    text = "".join(word + seps[i % len(seps)] for i, word in enumerate(words))
    assert Redactor().redact_text(text) is text


@settings(deadline=None)
@given(
    before=st.text(max_size=80),
    sep_before=SEPARATORS,
    prefix=st.sampled_from(["sk-", "sk-proj-", "sk-svcacct-"]),
    body=st.text(
        alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
        min_size=20,
        max_size=80,
    ),
    after=st.text(max_size=80),
)
def test_property_openai_key_in_random_text_never_survives(
    before: str, sep_before: str, prefix: str, body: str, after: str
) -> None:
    key = prefix + body
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
    f"?key={GOOGLE_PARAM_VALUE}",
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
