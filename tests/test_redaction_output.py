"""What RAR prints, raises and serves passes the same redactor as what it records.

The paths: :class:`~rar.errors.RarError` messages and string attributes (every provider error
is one, built from the provider's answer), the CLI's ``error:`` / ``internal error:`` lines and
click's usage errors, the provider error helpers, and the viewer's JSON error answers. All go
through :func:`rar.redaction.redact_output` (the default redactor: patterns plus the secrets of
``os.environ``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from rar.cli import cli
from rar.errors import BadRequestError, ConfigError, ProviderError, RarError
from rar.llm.providers._http import error_message, raise_for_status
from rar.redaction import default_redactor, redact_output, secret_tag
from rar.viewer.app import create_app
from rar.viewer.http import ApiError, error_response
from servers.openai_server import Answer, OpenAIServer, Raw

GITHUB = "ghp_" + "Qw12Er34" * 4 + "Ty56"
ANTHROPIC = "sk-ant-" + "api03-" + "Zq8Xw7Vu6Ts5" * 4
DB_PASSWORD = "Quartz-" + "88!wh1sper"


def marker(kind: str, secret: str) -> str:
    return f"[REDACTED:{kind}:{secret_tag(secret)}]"


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("MY_DB_PASSWORD", DB_PASSWORD)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    default_redactor.cache_clear()
    yield
    default_redactor.cache_clear()


# --- exceptions -----------------------------------------------------------------------------------


def test_rar_error_messages_and_string_details_are_redacted() -> None:
    error = ConfigError(f"bad base_url https://u:{DB_PASSWORD}@h/ for {GITHUB}", hint=GITHUB)
    assert DB_PASSWORD not in error.message and GITHUB not in str(error)
    assert error.details["hint"] == marker("github", GITHUB)
    assert "[REDACTED:" in error.message and "bad base_url https://" in error.message


def test_a_provider_error_built_from_an_http_answer_holds_no_secret() -> None:
    body = {"error": {"message": f"Incorrect API key provided: {ANTHROPIC} (db {DB_PASSWORD})"}}
    answer = httpx2.Response(401, json=body)
    with pytest.raises(ProviderError) as caught:
        raise_for_status(answer, provider="openai", key_reference="env:OPENAI_API_KEY")
    error = caught.value
    for text in (error.message, str(error), error.details["body"]):
        assert ANTHROPIC not in text and DB_PASSWORD not in text
    assert marker("anthropic", ANTHROPIC) in error.message
    assert marker("env", DB_PASSWORD) in error.message
    assert "env:OPENAI_API_KEY" in error.message, "the key reference stays readable"


def test_error_message_helper_redacts_what_it_extracts() -> None:
    assert error_message(f'{{"error": "{GITHUB}"}}') == marker("github", GITHUB)
    assert error_message(f"<html>{GITHUB}</html>") == f"<html>{marker('github', GITHUB)}</html>"


def test_provider_errors_made_directly_by_providers_are_redacted_too() -> None:
    error = BadRequestError(f"the streamed input is not JSON: {GITHUB!r}", provider="anthropic")
    assert GITHUB not in str(error)


def test_redact_output_uses_the_current_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    later = "Lat3r-" + "exp0rted!"
    assert redact_output(later) == later
    monkeypatch.setenv("LATER_API_TOKEN", later)
    assert redact_output(f"x {later}") == f"x {marker('env', later)}"


# --- the CLI --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


def rar(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_provider_error_on_stderr_is_redacted(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The review's finding: a provider's 400 echoed the request, and stderr showed it raw.
    server.reset()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-" + "k3y" * 8)
    echo = f"cannot parse {GITHUB}; context: password={DB_PASSWORD} key {ANTHROPIC}"
    server.script(Raw(400, {"error": {"message": echo}}))
    code, out, err = rar(tmp_path / "runs", "ask", "hi", "--model", "openai:m", "--no-cache")
    assert code == 3
    assert err.startswith(
        "error: openai returned HTTP 400: request rejected: cannot parse [REDACTED:"
    )
    for secret in (GITHUB, DB_PASSWORD, ANTHROPIC):
        assert secret not in err and secret not in out
        for path in (tmp_path / "runs").rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def test_the_answer_printed_by_rar_ask_is_the_redacted_one(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server.reset()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-" + "k3y" * 8)
    server.script(Answer(content=f"The key is {GITHUB}."))
    code, out, err = rar(tmp_path / "runs", "ask", "Which key?", "--model", "openai:m")
    assert code == 0, err
    assert out.strip() == f"The key is {marker('github', GITHUB)}."


def test_an_internal_error_line_is_redacted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"unexpected answer {GITHUB}")

    monkeypatch.setattr("rar.cli.ask.ask", broken)
    monkeypatch.delenv("RAR_DEBUG", raising=False)
    code, _, err = rar(tmp_path / "runs", "ask", "hi")
    assert code == 4
    assert f"internal error: RuntimeError: unexpected answer {marker('github', GITHUB)}" in err


def test_a_usage_error_quoting_a_bad_value_is_redacted(tmp_path: Path) -> None:
    code, _, err = rar(tmp_path / "runs", "ask", "hi", "--max-steps", GITHUB)
    assert code == 2
    assert GITHUB not in err and marker("github", GITHUB) in err


def test_a_rar_error_line_is_redacted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    error = RarError("placeholder")
    error.message = f"late detail {GITHUB}"  # a message extended after it was made

    def fails(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr("rar.cli.ask.ask", fails)
    code, _, err = rar(tmp_path / "runs", "ask", "hi")
    assert code == 3
    assert err.strip() == f"error: late detail {marker('github', GITHUB)}"


# --- the viewer -----------------------------------------------------------------------------------


def test_the_viewers_error_answers_are_redacted(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    client = TestClient(create_app(tmp_path / "runs", allowed_hosts=["testserver"]))
    for path in (f"/api/runs/{GITHUB}", f"/api/nothing/{GITHUB}"):
        answer = client.get(path)
        assert answer.status_code == 404
        assert GITHUB not in answer.text
        assert marker("github", GITHUB) in answer.json()["message"]


def test_error_response_and_api_error_redact_their_message() -> None:
    assert GITHUB.encode() not in error_response(500, "store", f"x {GITHUB}").body
    assert ApiError(400, "bad", f"x {DB_PASSWORD}").message == f"x {marker('env', DB_PASSWORD)}"
