"""A flow's agents: a small class overriding hooks, or a plain dataclass of callables.

::

    class Summarizer(BaseAgent):
        name = "Summarizer"
        agent_type = AgentType.START_CONVERSATION_WITH_SYSTEM_PROMPT
        system_prompt = "You summarize code."
        template = "Summarize:\\n\\n{{code}}"

        def response_handler(self, context):
            return TextHandler("summary")

        def choose_next(self, context):
            return Next.to("Reviewer")

    reviewer = Agent("Reviewer", AgentType.CONVERSATION, template="Review it.",
                     handler=TextHandler("review"), choose_next=None)

Both have the same parts — name, agent type, model (a category such as ``"m"``, a profile name,
``provider:model``, a :class:`~rar.llm.profiles.Profile` or a client; ``None`` for the flow's
model), system prompt, text template, response handler, ``pre_process(context)``,
``post_process(context)``, ``merge(contexts)`` and ``choose_next(context)``. Hooks may be plain
functions or coroutines. ``merge`` returns ``None`` (keep the splits), one context (many to one)
or more (one to many); ``choose_next`` returns a :class:`Next`, an agent's name, or ``None`` for
the end.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rar.flow.context import AgentType, FlowContext, Next
from rar.flow.handlers import TextHandler
from rar.flow.templates import merge_contexts

Hook = Callable[[FlowContext], Any]
Merge = Callable[[list[FlowContext]], Any]
ChooseNext = Callable[[FlowContext], Any] | str | Next | None


class BaseAgent:
    """Override what you need; the defaults make a one-shot text agent that ends the flow."""

    name: str = ""
    agent_type: AgentType = AgentType.START_CONVERSATION
    model: Any = None
    system_prompt: str | None = None
    template: str | None = None

    def type_for(self, context: FlowContext) -> AgentType:
        """The agent's type for this context (``agent_type`` unless overridden)."""
        return AgentType(self.agent_type)

    def response_handler(self, context: FlowContext) -> Any:
        """A handler for one attempt (a fresh one per attempt is fine): text under ``response``."""
        return TextHandler("response")

    def pre_process(self, context: FlowContext) -> Any:
        return None

    def post_process(self, context: FlowContext) -> Any:
        return None

    def merge(self, contexts: list[FlowContext]) -> Any:
        return None

    def choose_next(self, context: FlowContext) -> Any:
        return None

    @property
    def merges(self) -> bool:
        """Whether the agent merges its splits (it overrides :meth:`merge`)."""
        return type(self).merge is not BaseAgent.merge

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


@dataclass(eq=False)
class Agent:
    """An agent made of values and callables (lm-lib's ``Agent`` record).

    ``handler`` is a response handler, or a function of the context returning one (a fresh
    handler per attempt); ``None`` means :class:`TextHandler` under ``response``.
    ``choose_next`` may be an agent's name, a :class:`Next`, ``None`` (the end) or a function
    of the context returning one of those.
    """

    name: str
    agent_type: AgentType = AgentType.START_CONVERSATION
    model: Any = None
    system_prompt: str | None = None
    template: str | None = None
    handler: Any = None
    pre_process: Hook | None = None
    post_process: Hook | None = None
    merge: Merge | None = None
    choose_next: ChooseNext = None

    def __post_init__(self) -> None:
        self.agent_type = AgentType(self.agent_type)

    def response_handler(self, context: FlowContext) -> Any:
        if self.handler is None:
            return TextHandler("response")
        if callable(self.handler) and not hasattr(self.handler, "handle"):
            return self.handler(context)
        return self.handler

    def type_for(self, context: FlowContext) -> AgentType:
        return self.agent_type

    @property
    def merges(self) -> bool:
        return self.merge is not None


FlowAgent = BaseAgent | Agent


def merge_keys(keys: Sequence[str]) -> Merge:
    """A many-to-one merge: the first context, each of ``keys`` concatenated over all contexts."""

    def merge(contexts: list[FlowContext]) -> list[FlowContext]:
        if not contexts:
            return []
        merged = contexts[0].copy()
        parts = [{k: c.values[k] for k in keys if k in c.values} for c in contexts]
        combined = merge_contexts(keys, copy.deepcopy(parts))
        merged.values.update({key: combined[key] for key in keys})
        return [merged]

    return merge
