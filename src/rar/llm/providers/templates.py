"""Prompt templates for text completion: render a conversation into one prompt string.

Base models served behind an OpenAI-compatible ``/completions`` endpoint see raw text, so the
conversation must be written out in the format the model was trained on. A template renders
every message, then the generation prompt that opens the assistant's turn, and supplies the
stop strings that end that turn.

* ``chatml`` — ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message (Qwen, Hermes, ...);
* ``llama3`` — ``<|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>`` per
  message, tool results under the ``ipython`` role as Llama 3.1 has them. ``<|begin_of_text|>``
  is left out on purpose: servers (vLLM, llama.cpp) add the BOS token themselves when they
  tokenize a ``/completions`` prompt, and a second one degrades the output;
* ``harmony`` (alias ``gpt-oss``) — OpenAI's harmony format of gpt-oss:
  ``<|start|>{role}<|message|>{content}<|end|>``. The template writes harmony's own system
  message (identity, ``Reasoning: {effort}`` from the request's ``reasoning_effort``, medium
  when unset, and the valid channels); a RAR ``system`` message becomes the harmony
  ``developer`` message (``# Instructions``), as the harmony guide has the "system prompt".
  Earlier assistant answers are written to the ``final`` channel; tool calls to ``commentary``
  ``to=functions.{name}`` with their reasoning on ``analysis``, tool results as
  ``functions.{name} to=assistant``. The generation prompt is ``<|start|>assistant``; the stops
  are ``<|return|>`` and ``<|call|>``. An answer that still holds the channel markers is split:
  its ``analysis`` text becomes the response's ``reasoning``, its ``final`` text the content;
* ``mistral`` — Mistral's V3-Tekken instruct format (Mistral Nemo, Ministral, Pixtral, ...):
  ``[INST]{user}[/INST]{assistant}</s>``, tool calls as ``[TOOL_CALLS][...]</s>`` and results as
  ``[TOOL_RESULTS]{...}[/TOOL_RESULTS]``. The system prompt has no tokens of its own: it is
  folded into the *last* user turn (``{system}\\n\\n{user}``), which is what Mistral's reference
  tokenizer (mistral-common) does for its V2, V3 and Tekken tokenizers (only V1 folds it into
  the first). Stop: ``</s>``. ``<s>`` (BOS) is left out for the reason given for llama3;
* ``mistral-v3`` — the same for Mistral's SentencePiece V3 tokenizer (Mistral 7B Instruct v0.3,
  Mixtral 8x22B, Codestral): a space after ``[INST]`` and before each answer;
* ``none`` (alias ``no``, lm-lib's name) — the message contents concatenated as they are, no
  generation prompt, no stops.

Choose one by name with :func:`get_template`, or build a :class:`PromptTemplate` of your own
under a name of its own: the template's name is part of the cache key of every call (an alias
keys as the template it names, so ``gpt-oss`` and ``harmony`` share their cache entries).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from rar.errors import ConfigError
from rar.llm.types import Message

__all__ = ["TEMPLATES", "TEMPLATE_ALIASES", "PromptTemplate", "get_template", "template_name"]


@dataclass(frozen=True)
class PromptTemplate:
    """How to write a conversation as a prompt: one function per message, then a suffix.

    ``conversation`` replaces the per-message rendering where a message's text depends on the
    others (Mistral folds the system prompt into the last user turn); ``header`` writes text
    after ``prefix`` from the request's reasoning effort (harmony's system message); ``parse``
    splits an answer into (content, reasoning).
    """

    name: str
    message: Callable[[Message], str]
    generation_prompt: str = ""
    prefix: str = ""
    stop: tuple[str, ...] = ()
    conversation: Callable[[Sequence[Message]], str] | None = None
    header: Callable[[str | None], str] | None = None
    parse: Callable[[str], tuple[str | None, str | None]] | None = None

    def render(self, messages: Sequence[Message], *, reasoning_effort: str | None = None) -> str:
        """The prompt: every message in order, then the opening of the assistant's turn."""
        head = self.prefix + (self.header(reasoning_effort) if self.header is not None else "")
        if self.conversation is not None:
            body = self.conversation(messages)
        else:
            body = "".join(self.message(m) for m in messages)
        return head + body + self.generation_prompt

    def split(self, text: str) -> tuple[str | None, str | None]:
        """(content, reasoning) of a completion: the text itself unless the template parses
        its own markers out of it."""
        if self.parse is None:
            return text or None, None
        return self.parse(text)


def _chatml(message: Message) -> str:
    return f"<|im_start|>{message.role}\n{message.content or ''}<|im_end|>\n"


def _llama3(message: Message) -> str:
    role = "ipython" if message.role == "tool" else message.role
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n{message.content or ''}<|eot_id|>"


def _raw(message: Message) -> str:
    return message.content or ""


# --- harmony (gpt-oss) --------------------------------------------------------------------------

_HARMONY_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
_HARMONY_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."


def _harmony_system(reasoning_effort: str | None) -> str:
    effort = _HARMONY_EFFORT.get(reasoning_effort or "", "medium")
    return (
        f"<|start|>system<|message|>{_HARMONY_IDENTITY}\nKnowledge cutoff: 2024-06\n\n"
        f"Reasoning: {effort}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every "
        "message.<|end|>"
    )


def _harmony(message: Message) -> str:
    content = message.content or ""
    if message.role == "system":
        return f"<|start|>developer<|message|># Instructions\n\n{content}<|end|>"
    if message.role == "user":
        return f"<|start|>user<|message|>{content}<|end|>"
    if message.role == "tool":
        return (
            f"<|start|>functions.{message.name or 'tool'} to=assistant<|channel|>commentary"
            f"<|message|>{content}<|end|>"
        )
    if not message.tool_calls:  # an earlier answer: its chain of thought is dropped
        return f"<|start|>assistant<|channel|>final<|message|>{content}<|end|>"
    # a tool call keeps its chain of thought, which the model continues after the results
    parts = []
    if message.reasoning:
        parts.append(f"<|start|>assistant<|channel|>analysis<|message|>{message.reasoning}<|end|>")
    if content:
        parts.append(f"<|start|>assistant<|channel|>commentary<|message|>{content}<|end|>")
    for call in message.tool_calls:
        parts.append(
            f"<|start|>assistant<|channel|>commentary to=functions.{call.name} "
            f"<|constrain|>json<|message|>{call.arguments}<|call|>"
        )
    return "".join(parts)


_HARMONY_MESSAGE = re.compile(
    r"<\|channel\|>(?P<channel>[A-Za-z_]+)[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>"
    r"(?P<content>.*?)(?=<\|end\|>|<\|return\|>|<\|call\|>|<\|start\|>|$)",
    re.DOTALL,
)


def _harmony_parse(text: str) -> tuple[str | None, str | None]:
    """The ``final`` text as content and the ``analysis`` text as reasoning, when the server
    returned the channel markers (servers that strip special tokens return plain text, which is
    kept as it is)."""
    if "<|channel|>" not in text:
        return text or None, None
    finals, thoughts = [], []
    for match in _HARMONY_MESSAGE.finditer(text):
        channel, content = match.group("channel"), match.group("content")
        if channel == "final":
            finals.append(content)
        elif channel == "analysis":
            thoughts.append(content)
    return ("".join(finals) or None), ("\n".join(thoughts) or None)


# --- Mistral ------------------------------------------------------------------------------------


def _mistral_call(arguments: str) -> Any:
    try:
        return orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return arguments


def _mistral(space: str) -> Callable[[Sequence[Message]], str]:
    def conversation(messages: Sequence[Message]) -> str:
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        last_user = users[-1] if users else None
        parts = [] if last_user is not None or not system else [f"[INST]{space}{system}[/INST]"]
        for index, message in enumerate(messages):
            content = message.content or ""
            if message.role == "user":
                if index == last_user and system:
                    content = f"{system}\n\n{content}"
                parts.append(f"[INST]{space}{content}[/INST]")
            elif message.role == "assistant" and message.tool_calls:
                calls = [
                    {"name": c.name, "arguments": _mistral_call(c.arguments), "id": c.id}
                    for c in message.tool_calls
                ]
                parts.append(f"[TOOL_CALLS]{orjson.dumps(calls).decode()}</s>")
            elif message.role == "assistant":
                parts.append(f"{space}{content}</s>")
            elif message.role == "tool":
                result = {"content": content, "call_id": message.tool_call_id}
                parts.append(f"[TOOL_RESULTS]{orjson.dumps(result).decode()}[/TOOL_RESULTS]")
        return "".join(parts)

    return conversation


TEMPLATES: dict[str, PromptTemplate] = {
    "chatml": PromptTemplate(
        "chatml", _chatml, generation_prompt="<|im_start|>assistant\n", stop=("<|im_end|>",)
    ),
    "llama3": PromptTemplate(
        "llama3",
        _llama3,
        generation_prompt="<|start_header_id|>assistant<|end_header_id|>\n\n",
        stop=("<|eot_id|>",),
    ),
    "none": PromptTemplate("none", _raw),
    "harmony": PromptTemplate(
        "harmony",
        _harmony,
        generation_prompt="<|start|>assistant",
        stop=("<|return|>", "<|call|>"),
        header=_harmony_system,
        parse=_harmony_parse,
    ),
    "mistral": PromptTemplate("mistral", _raw, stop=("</s>",), conversation=_mistral("")),
    "mistral-v3": PromptTemplate("mistral-v3", _raw, stop=("</s>",), conversation=_mistral(" ")),
}

#: Other names of built-in templates: lm-lib's ``gpt-oss`` and ``no``.
TEMPLATE_ALIASES: dict[str, str] = {"gpt-oss": "harmony", "no": "none"}


def template_name(name: str) -> str:
    """The built-in template ``name`` names (itself, or what an alias stands for); a
    :class:`ConfigError` listing the choices when it names none."""
    resolved = TEMPLATE_ALIASES.get(name, name)
    if resolved not in TEMPLATES:
        aliases = [f"{alias} (= {target})" for alias, target in TEMPLATE_ALIASES.items()]
        known = ", ".join([*TEMPLATES, *aliases])
        raise ConfigError(
            f"unknown prompt template {name!r}; choose one of {known} (or pass a PromptTemplate)"
        )
    return resolved


def get_template(template: str | PromptTemplate) -> PromptTemplate:
    """The template called ``template`` (or ``template`` itself when it is one already).

    A template's name is part of the cache key of every call made with it, so a template of
    your own may not take the name (or an alias) of a built-in one.
    """
    if isinstance(template, PromptTemplate):
        builtin = TEMPLATES.get(TEMPLATE_ALIASES.get(template.name, template.name))
        if builtin is not None and builtin != template:
            raise ConfigError(
                f"a custom prompt template may not be called {template.name!r}, the name of a "
                "built-in one: the name is part of the cache key, so the two would share "
                "cached answers. Give it a name of its own"
            )
        return template
    return TEMPLATES[template_name(template)]
