"""Credentials in disguise: base64, URL encoding, and a secret cut in two by a streamed answer.

A base64 text that decodes to a credential is replaced whole; a URL-encoded one is replaced in
place with the tag of the decoded secret (the same marker as the raw form); a streamed answer is
assembled before it is recorded, so a key split across SSE chunks is one key to the redactor.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest

from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.llm.providers.openai import OpenAIChat
from rar.llm.types import Message
from rar.redaction import Redactor, secret_tag
from rar.runtime.start import record
from rar.store.store import Store
from redaction_corpus import PIECE, _split_text, _store_text
from servers.openai_server import Answer, OpenAIServer

GITHUB = "ghp_" + "Zx81Yw72" * 4 + "Vu63"
STRIPE = "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc" * 2
AWS_SECRET = "wJalr" + "Xq9/Lm+T" * 4 + "k2Z"
PASSWORD = "Quartz-" + "88!wh1sper"


def marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}:{secret_tag(secret)}]"


def b64(text: str, *, urlsafe: bool = False) -> str:
    raw = text.encode()
    return (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()


@pytest.fixture
def r() -> Redactor:
    return Redactor(env={})


# --- base64 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("urlsafe", [False, True])
@pytest.mark.parametrize(("secret", "kind"), [(GITHUB, "github"), (STRIPE, "stripe")])
def test_base64_of_exactly_a_credential_gets_the_credentials_marker(
    r: Redactor, secret: str, kind: str, urlsafe: bool
) -> None:
    encoded = b64(secret, urlsafe=urlsafe)
    assert r.redact_text(f"token: {encoded}") == f"token: {marker(kind, secret)}"


def test_base64_of_text_holding_a_credential_is_replaced_whole(r: Redactor) -> None:
    encoded = b64(f"aws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1\n")
    assert r.redact_text(f"config={encoded}") == f"config={marker('base64', encoded)}"


def test_a_kubernetes_secret_manifest_keeps_only_its_structure(r: Redactor) -> None:
    manifest = f"apiVersion: v1\nkind: Secret\ndata:\n  password: {b64(PASSWORD)}\n"
    out = r.redact_text(manifest)
    assert b64(PASSWORD) not in out and PASSWORD not in out
    assert out.startswith("apiVersion: v1\nkind: Secret\ndata:\n  password: [REDACTED:")


def test_base64_of_a_short_literal_secret_is_found_at_every_alignment() -> None:
    red = Redactor(env={"DB_PASSWORD": "hunter2!x"})
    for lead in ("", "a", "ab"):
        encoded = b64(lead + "hunter2!x")
        assert "[REDACTED:env:" in red.redact_text(f"blob {encoded} end"), lead


@pytest.mark.parametrize(
    "text",
    [
        b64("just a sentence about billing and tokens, nothing else"),
        base64.b64encode(bytes(range(256))).decode(),
        "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(300)).decode(),
        "sha512-" + base64.b64encode(bytes(range(64))).decode(),
    ],
)
def test_base64_of_plain_text_or_binary_data_is_left_alone(r: Redactor, text: str) -> None:
    assert r.redact_text(text) is text


# --- URL encoding ---------------------------------------------------------------------------------


def test_a_url_encoded_credential_gets_the_marker_of_the_decoded_one(r: Redactor) -> None:
    text = f"https://api.example.com/x?q={quote('Bearer ' + STRIPE, safe='')}&page=2"
    expected = f"https://api.example.com/x?q=Bearer%20{marker('stripe', STRIPE)}&page=2"
    assert r.redact_text(text) == expected
    assert r.redact_text(STRIPE) == marker("stripe", STRIPE), "same tag as the raw key"


def test_url_encoded_aws_secret_key_is_redacted_with_its_escapes(r: Redactor) -> None:
    encoded = quote(f"aws_secret_access_key={AWS_SECRET}", safe="")
    out = r.redact_text(f"GET /debug?config={encoded}")
    assert quote(AWS_SECRET, safe="") not in out and AWS_SECRET not in out
    assert marker("aws_secret_access_key", AWS_SECRET) in out


def test_url_encoded_password_in_a_form_body_is_redacted(r: Redactor) -> None:
    body = "user=alice&password=" + quote(PASSWORD, safe="") + "&remember=1"
    out = r.redact_text(body)
    assert out == f"user=alice&password={marker('password', PASSWORD)}&remember=1"


def test_double_url_encoding_is_decoded_too(r: Redactor) -> None:
    twice = quote(quote(f"token={GITHUB}!", safe=""), safe="")
    assert GITHUB[4:] not in r.redact_text(twice).replace("%", "")


def test_url_encoded_literal_secret_is_redacted() -> None:
    secret = "Xy9!weird@token#value"
    red = Redactor(extra_secrets=[secret])
    assert red.redact_text(f"q={quote(secret, safe='')}") == f"q={marker('secret', secret)}"


def test_text_with_percent_signs_but_no_escapes_is_left_alone(r: Redactor) -> None:
    text = "50% off, 100%% sure, %d items, %s"
    assert r.redact_text(text) is text


# --- a secret split across two streamed chunks ----------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


def test_a_key_split_across_two_sse_chunks_is_not_recorded(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.reset()
    content = _split_text([f"your key is {GITHUB} and the password {PASSWORD}"])
    cut = PIECE * (content.index(GITHUB) // PIECE + 1)
    assert content.index(GITHUB) < cut < content.index(GITHUB) + len(GITHUB), "split"
    server.script(Answer(content=content, piece=PIECE))
    store = Store(tmp_path / "runs")
    seen: list[str] = []
    with (
        OpenAIChat(base_url=server.base_url, api_key="test-key") as chat,
        record("stream", store=store, redactor=Redactor(env={"DB_PASSWORD": PASSWORD})) as run,
    ):
        answer = Client(chat, run=run, profiles=Profiles()).stream(
            messages=[Message.user("Which key?")], on_content=seen.append
        )
    assert len(seen) > 1 and not any(GITHUB in chunk for chunk in seen), "it was streamed in parts"
    assert answer.content is not None and marker("github", GITHUB) in answer.content
    recorded = _store_text(store.root)
    assert GITHUB not in recorded and GITHUB[4:20] not in recorded
    assert PASSWORD not in recorded
    events = [orjson.loads(line) for line in (store.run_dir(run.id) / "events.jsonl").open("rb")]
    assert any(e.get("kind") == "llm" for e in events)
