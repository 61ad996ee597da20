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
* ``none`` — the message contents concatenated as they are, no generation prompt, no stops.

Choose one by name with :func:`get_template`, or build a :class:`PromptTemplate` of your own
under a name of its own: the template's name is part of the cache key of every call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rar.errors import ConfigError
from rar.llm.types import Message

__all__ = ["TEMPLATES", "PromptTemplate", "get_template"]


@dataclass(frozen=True)
class PromptTemplate:
    """How to write a conversation as a prompt: one function per message, then a suffix."""

    name: str
    message: Callable[[Message], str]
    generation_prompt: str = ""
    prefix: str = ""
    stop: tuple[str, ...] = ()

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt: every message in order, then the opening of the assistant's turn."""
        return self.prefix + "".join(self.message(m) for m in messages) + self.generation_prompt


def _chatml(message: Message) -> str:
    return f"<|im_start|>{message.role}\n{message.content or ''}<|im_end|>\n"


def _llama3(message: Message) -> str:
    role = "ipython" if message.role == "tool" else message.role
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n{message.content or ''}<|eot_id|>"


def _raw(message: Message) -> str:
    return message.content or ""


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
}


def get_template(template: str | PromptTemplate) -> PromptTemplate:
    """The template called ``template`` (or ``template`` itself when it is one already).

    A template's name is part of the cache key of every call made with it, so a template of
    your own may not take the name of a built-in one.
    """
    if isinstance(template, PromptTemplate):
        builtin = TEMPLATES.get(template.name)
        if builtin is not None and builtin != template:
            raise ConfigError(
                f"a custom prompt template may not be called {template.name!r}, the name of a "
                "built-in one: the name is part of the cache key, so the two would share "
                "cached answers. Give it a name of its own"
            )
        return template
    try:
        return TEMPLATES[template]
    except KeyError:
        known = ", ".join(sorted(TEMPLATES))
        raise ConfigError(
            f"unknown prompt template {template!r}; choose one of {known} "
            "(or pass a PromptTemplate)"
        ) from None
