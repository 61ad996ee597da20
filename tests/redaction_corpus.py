"""The redaction corpus, end to end: fake secrets of every format, in every encoding, at every
place a secret can reach a run, recorded for real; then every file of the store, stdout, stderr
and the messages RAR raised are searched for what must not survive.

    from redaction_corpus import measure, table
    figures = measure()          # {"leaks": 0, "false_redactions": 0, ...}
    print(table(figures))

* **Formats**: the generators of ``tests/data/secrets/fakes.py`` (51, following gitleaks'
  rule set for the services an agent meets, plus passwords, dict keys and environment values).
* **Encodings**: ``raw``, ``base64``, ``url`` (percent-encoded) and ``split`` (a streamed model
  answer whose SSE chunks cut the secret in two; for the streamed places only).
* **Places**: request messages, tool arguments (from the model and in a tool call), tool
  results, model responses, headers, URLs, environment values (an environment dump a tool
  returns), exception messages (a tool's exception, a provider's error body) and the manifest
  (goal and inputs). Each (format, encoding, place) gets its own fake, so a leak names its case.
* **Outputs searched**: every file under the store (packs decompressed, the index dumped), the
  stdout and stderr of ``rar ask`` against a local OpenAI-compatible server (answer and provider
  error), and the message of every provider error RAR raised.
* **Benign strings** (``tests/data/secrets/benign.py``, about 3,800): redacted with an
  environment full of secret-sounding non-secrets; any change is a false redaction.

A leak is any *part* of a fake (its random body, a password) found in an output, raw or in the
case's encoding, whole or by a 12-character probe of its start, middle or end.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import quote

import zstandard

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # for a benchmark script calling measure() from elsewhere
    sys.path.insert(0, str(TESTS))


def _load(name: str) -> ModuleType:
    path = TESTS / "data" / "secrets" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"redaction_corpus_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fakes = _load("fakes")
benign = _load("benign")

FORMATS: tuple[str, ...] = tuple(fakes.GENERATORS)
ENCODINGS = ("raw", "base64", "url", "split")
PLACES = (
    "request_messages",
    "tool_arguments",
    "tool_results",
    "model_responses",
    "headers",
    "urls",
    "env_values",
    "exception_messages",
    "manifest",
)
STREAMED = ("model_responses", "tool_arguments")  # where "split" applies
PIECE = 64  # characters per streamed chunk


def encode(text: str, encoding: str) -> str:
    if encoding == "base64":
        return base64.b64encode(text.encode()).decode()
    if encoding == "url":
        return quote(text, safe="")
    return text


def _b64_core(container: str, part: str) -> str | None:
    """The base64 characters that encode ``part`` inside base64(``container``)."""
    raw, piece = container.encode(), part.encode()
    at = raw.find(piece)
    if at < 0:
        return None
    encoded = base64.b64encode(raw).decode()
    return encoded[(8 * at + 5) // 6 : (8 * (at + len(piece))) // 6]


def _probes(form: str) -> list[str]:
    if len(form) <= 24:
        return [form]
    middle = len(form) // 2
    return [form, form[:12], form[middle - 6 : middle + 6], form[-12:]]


@dataclass(frozen=True)
class Case:
    format: str
    encoding: str
    place: str
    fake: Any  # fakes.Fake

    @property
    def name(self) -> str:
        return f"{self.format}/{self.encoding}/{self.place}"

    @property
    def text(self) -> str:
        """What is written in a text place."""
        return encode(self.fake.text, self.encoding)

    @property
    def value(self) -> str:
        """What is written under the fake's key in a dict place."""
        return encode(self.fake.dict_value, self.encoding)

    def probes(self) -> list[str]:
        out: list[str] = []
        for part in self.fake.parts:
            forms = {part}
            if self.encoding == "url":
                forms.add(quote(part, safe=""))
            if self.encoding == "base64":
                for container in (self.fake.text, self.fake.dict_value):
                    core = _b64_core(container, part)
                    if core:
                        forms.add(core)
            for form in sorted(forms):
                out.extend(_probes(form))
        return out


def cases() -> list[Case]:
    """Every (format, encoding, place) case, each with its own fake."""
    out = []
    for encoding in ENCODINGS:
        places = STREAMED if encoding == "split" else PLACES
        for place in places:
            for fmt in FORMATS:
                out.append(Case(fmt, encoding, place, fakes.fake(fmt, f"{encoding}:{place}")))
    return out


# --- what the agent does with them -------------------------------------------------------------


def _texts(group: list[Case]) -> list[str]:
    return [case.text for case in group]


def _dict_place(group: list[Case], neutral: str) -> dict[str, Any]:
    """A dict holding the group's secrets: under the fake's own key, or a neutral one."""
    out: dict[str, Any] = {neutral: []}
    for case in group:
        if case.fake.key:
            out[case.fake.key] = case.value
        else:
            out[neutral].append(case.text)
    return out


def _split_text(texts: list[str], head: str = "Here is what I found.") -> str:
    """``head`` and the texts, padded with spaces so that every text straddles a boundary of
    the streamed chunks (``PIECE`` characters each, counted from the start)."""
    out = head
    for text in texts:
        target = -(len(text) // 2) % PIECE  # start here and a boundary falls mid-text
        out += " " * ((target - len(out)) % PIECE or PIECE) + text
        start = len(out) - len(text)
        assert start // PIECE != (start + len(text) - 1) // PIECE, "not split"
    return out


def _split_arguments(texts: list[str]) -> str:
    """Tool-call arguments (JSON) whose streamed pieces cut every text in two."""
    escaped = [json.dumps(text)[1:-1] for text in texts]
    arguments = _split_text(escaped, head='{"notes": "') + '"}'
    assert json.loads(arguments)["notes"].split() == [t for text in texts for t in text.split()]
    return arguments


class _Plan:
    """What the corpus agent is to do in one run (set before each run)."""

    current: ClassVar[dict[str, Any]] = {}


def corpus_agent(run: Any, note: Any) -> dict[str, Any]:
    """The recorded agent: a model call (plain or streamed), a tool call, a failing tool, a
    provider error."""
    from rar.errors import ProviderError
    from rar.llm import Message
    from rar.llm.client import Client

    plan = _Plan.current
    client = Client("openai:corpus-model", run=run, cache=False)
    ask = client.stream if plan["stream"] else client.complete
    response = ask(messages=[Message.user(plan["prompt"])])
    if plan.get("tool") is not None:
        tool = plan["tool"]
        run.effect("tool", tool["request"], lambda: tool["result"])

        def fail() -> None:
            raise RuntimeError(plan["tool_error"])

        with contextlib.suppress(RuntimeError):  # recorded as the effect's error
            run.effect("tool", {"name": "fetch", "args": {"id": 1}}, fail)
    try:
        client.complete(messages=[Message.user("and now?")])
    except ProviderError as exc:
        plan["raised"].append(str(exc))
    return {"answer": len(response.content or ""), "note": len(str(note))}


def _plan(encoding: str, by_place: dict[str, list[Case]]) -> tuple[dict[str, Any], Any, str, Any]:
    from servers.openai_server import Answer, Call, Raw

    def group(place: str) -> list[Case]:
        return by_place.get(place, [])

    if encoding == "split":
        content = _split_text(_texts(group("model_responses")))
        arguments = _split_arguments(_texts(group("tool_arguments")))
        answer = Answer(
            content=content, tool_calls=[Call("call_1", "lookup", arguments)], piece=PIECE
        )
        plan: dict[str, Any] = {"stream": True, "prompt": "Look it up.", "tool": None}
        error = Raw(400, {"error": {"message": "no more"}})
        return plan, [answer, error], "split run", {"note": "streamed"}
    arguments = json.dumps(_dict_place(group("tool_arguments"), "notes"))
    answer = Answer(
        content="\n".join(_texts(group("model_responses"))),
        tool_calls=[Call("call_1", "lookup", arguments)],
    )
    headers = {f"X-Request-Note-{i}": case.text for i, case in enumerate(group("headers"))}
    for case in group("headers"):
        if case.fake.key:
            headers.pop(f"X-Request-Note-{group('headers').index(case)}")
            headers["-".join(w.title() for w in case.fake.key.split("_"))] = case.value
    urls = [
        f"https://api.example.com/v1/items?{case.fake.key}={case.value}"
        if case.fake.key
        else f"https://api.example.com/v1/search?q={case.text}&page=2"
        for case in group("urls")
    ]
    environment = {
        (case.fake.key.upper() if case.fake.key else f"APP_SETTING_{i}"): (
            case.value if case.fake.key else case.text
        )
        for i, case in enumerate(group("env_values"))
    }
    result = _dict_place(group("tool_results"), "output")
    result["output"] = "\n".join(result["output"])
    plan = {
        "stream": False,
        "prompt": "\n".join(_texts(group("request_messages"))),
        "tool": {
            "request": {
                "name": "lookup",
                "args": _dict_place(group("tool_arguments"), "notes"),
                "urls": urls,
                "headers": headers,
            },
            "result": {**result, "environment": environment},
        },
        "tool_error": "upstream refused: " + "\n".join(_texts(group("exception_messages"))),
    }
    error = Raw(
        400, {"error": {"message": "invalid: " + "\n".join(_texts(group("exception_messages")))}}
    )
    manifest = group("manifest")
    goal = "Investigate: " + "\n".join(_texts(manifest))
    return plan, [answer, error], goal, _dict_place(manifest, "text")


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    from rar.redaction import default_redactor

    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    default_redactor.cache_clear()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        default_redactor.cache_clear()


def _record_everything(all_cases: list[Case], root: Path) -> tuple[list[str], list[str]]:
    """Record the corpus runs (library and CLI) into ``root/store``; return the outputs that
    are not files: the CLI's stdout/stderr and the messages of raised provider errors."""
    from click.testing import CliRunner

    from rar.cli import cli
    from rar.replay.engine import execute
    from servers.openai_server import Answer, OpenAIServer, Raw

    store = root / "store"
    outputs: list[str] = []
    raised: list[str] = []
    env = {name: value for case in all_cases for name, value in case.fake.env.items()}
    with OpenAIServer() as server:
        env.update(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="corpus-" + "k3y" * 8,
            XDG_CONFIG_HOME=str(root / "config"),
        )
        with _environment(env):
            for encoding in ENCODINGS:
                by_place: dict[str, list[Case]] = {}
                for case in all_cases:
                    if case.encoding == encoding:
                        by_place.setdefault(case.place, []).append(case)
                plan, answers, goal, note = _plan(encoding, by_place)
                plan["raised"] = raised
                _Plan.current = plan
                server.reset()
                server.script(*answers)
                execute(corpus_agent, inputs={"note": note}, goal=goal, store=store, seed=1)
                if encoding == "split":
                    continue
                # The CLI: the answer on stdout, a provider's error body on stderr.
                server.reset()
                server.script(
                    Answer(content="\n".join(_texts(by_place["model_responses"]))),
                    Raw(
                        400,
                        {
                            "error": {
                                "message": "bad: "
                                + "\n".join(_texts(by_place["exception_messages"]))
                            }
                        },
                    ),
                )
                runner = CliRunner()
                for prompt in ("\n".join(_texts(by_place["request_messages"])), "hello"):
                    done = runner.invoke(
                        cli,
                        [
                            "--store",
                            str(store),
                            "ask",
                            prompt,
                            "--model",
                            "openai:corpus-model",
                            "--no-cache",
                        ],
                    )
                    outputs.extend([done.stdout, done.stderr])
    return outputs, raised


def _store_text(store: Path) -> str:
    """Everything under ``store`` as text: raw bytes of every file, decompressed pack records,
    and a dump of every SQLite database."""
    chunks: list[str] = []
    decompressor = zstandard.ZstdDecompressor()
    for path in sorted(store.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        chunks.append(data.decode("latin-1"))
        if path.suffix == ".pack":
            at = 8
            while at + 42 <= len(data):
                codec = data[at + 33]
                raw_size = int.from_bytes(data[at + 34 : at + 38], "big")
                size = int.from_bytes(data[at + 38 : at + 42], "big")
                stored = data[at + 42 : at + 42 + size]
                if codec == 1:
                    chunks.append(
                        decompressor.decompress(stored, max_output_size=raw_size).decode(
                            "utf-8", "replace"
                        )
                    )
                else:
                    chunks.append(stored.decode("utf-8", "replace"))
                at += 42 + size
        elif path.name.endswith(".sqlite"):
            with sqlite3.connect(path) as db:
                chunks.extend(db.iterdump())
    return "\n".join(chunks)


def measure_leaks() -> dict[str, Any]:
    all_cases = cases()
    with tempfile.TemporaryDirectory(prefix="rar-redaction-corpus-") as tmp:
        root = Path(tmp)
        outputs, raised = _record_everything(all_cases, root)
        haystack = "\n".join([_store_text(root / "store"), *outputs, *raised])
    leaks = []
    for case in all_cases:
        hits = [probe for probe in case.probes() if probe in haystack]
        if hits:
            leaks.append({"case": case.name, "found": hits[0]})
    by = {(f, e): 0 for f in FORMATS for e in ENCODINGS}
    for leak in leaks:
        fmt, encoding, _ = leak["case"].split("/")
        by[(fmt, encoding)] += 1
    return {
        "cases": len(all_cases),
        "leaks": len(leaks),
        "leaks_by_format_encoding": {f"{f}/{e}": n for (f, e), n in by.items()},
        "leak_cases": leaks,
        "searched_chars": len(haystack),
    }


def measure_benign() -> dict[str, Any]:
    from rar.redaction import Redactor

    redactor = Redactor(env=benign.BENIGN_ENV)
    by_category: dict[str, tuple[int, int]] = {}
    wrong: list[dict[str, str]] = []
    for category, items in benign.benign().items():
        bad = 0
        for text in items:
            out = redactor.redact_text(text)
            if out != text or redactor.redact({"text": text})["text"] != text:
                bad += 1
                wrong.append({"category": category, "text": text[:200], "got": out[:200]})
        by_category[category] = (len(items), bad)
    dicts = benign.benign_dicts()
    bad_dicts = [d for d in dicts if redactor.redact(d) != d]
    by_category["dict keys"] = (len(dicts), len(bad_dicts))
    wrong.extend({"category": "dict keys", "text": str(d)[:200], "got": ""} for d in bad_dicts)
    return {
        "benign": sum(n for n, _ in by_category.values()),
        "false_redactions": sum(bad for _, bad in by_category.values()),
        "benign_by_category": {
            k: {"strings": n, "false": bad} for k, (n, bad) in by_category.items()
        },
        "false_cases": wrong,
        "env_literal_secrets": redactor.literal_secret_count,
    }


def measure() -> dict[str, Any]:
    """The corpus figures: leaks per format and encoding, false redactions per category."""
    began = time.perf_counter()
    figures = {
        "formats": list(FORMATS),
        "encodings": list(ENCODINGS),
        "places": list(PLACES),
        **measure_leaks(),
        **measure_benign(),
    }
    figures["seconds"] = round(time.perf_counter() - began, 2)
    return figures


def table(figures: dict[str, Any]) -> str:
    """The figures as two Markdown tables (for docs/reliability.md)."""
    encodings = figures["encodings"]
    per_encoding = {e: len(STREAMED) if e == "split" else len(PLACES) for e in encodings}
    lines = [
        f"Leaks: {figures['leaks']} of {figures['cases']} cases "
        f"({len(figures['formats'])} formats × {len(encodings)} encodings × places)",
        "",
        "| format | " + " | ".join(f"{e} (of {per_encoding[e]})" for e in encodings) + " |",
        "|---|" + "---:|" * len(encodings),
    ]
    counts = figures["leaks_by_format_encoding"]
    for fmt in figures["formats"]:
        lines.append(
            f"| {fmt} | " + " | ".join(str(counts[f"{fmt}/{e}"]) for e in encodings) + " |"
        )
    lines += [
        "",
        f"False redactions: {figures['false_redactions']} of {figures['benign']} benign strings",
        "",
        "| benign category | strings | false redactions |",
        "|---|---:|---:|",
    ]
    for category, row in figures["benign_by_category"].items():
        lines.append(f"| {category} | {row['strings']} | {row['false']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    result = measure()
    print(table(result))
    for leak in result["leak_cases"][:20]:
        print("leak:", leak)
    for wrong in result["false_cases"][:20]:
        print("false:", wrong)
    print(f"{result['seconds']} s, {result['searched_chars']:,} characters searched")
