"""What a flow carries from agent to agent: the context, the conversation and the graph.

A :class:`FlowContext` holds

* ``values``: keys to values — usually lists (lm-lib's convention: a template's ``{{key}}``
  joins a list with blank lines, ``[[key]]`` splits over it), scalars where that is simpler;
* ``conversation``: the messages so far, rebuilt by each agent according to its type;
* ``graph``: the execution-graph tokens (``M``, ``CodeSummarizer``, ``↴``, ``⇉ 1/5``, ...);
* ``error``: why this context failed (``None`` while it is fine); a failed context is returned
  after the successful ones and takes no further part in merges and chaining;
* ``skip_next_completion``: set in ``pre_process`` to make the next step processing-only; it
  resets itself after that step.

Contexts are copied at every split, so what one split writes is never seen by another.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rar.llm.types import Message


class AgentType(enum.StrEnum):
    """How an agent (re)builds the conversation before its request (lm-lib's agent types)."""

    START_CONVERSATION = "START_CONVERSATION"
    START_CONVERSATION_WITH_SYSTEM_PROMPT = "START_CONVERSATION_WITH_SYSTEM_PROMPT"
    CONVERSATION = "CONVERSATION"
    CONVERSATION_WITH_SYSTEM_PROMPT = "CONVERSATION_WITH_SYSTEM_PROMPT"
    COMPLETION = "COMPLETION"
    PROCESSING_ONLY = "PROCESSING_ONLY"


class Symbol:
    """The tokens of the execution graph (lm-lib's legend)."""

    SKIPPED = "○"
    COMPLETION = "→"
    NEW_CONVERSATION = "🗨"
    CONTINUE = "↴"
    PASSED = "✓"
    FAILED = "✗"
    RETRY = "⚠"
    FATAL = "☢"
    CONTINUATION = "‖"

    @staticmethod
    def split(index: int, total: int) -> str:
        """``⇉ x/n``: split ``index`` (from 1) of ``total``."""
        return f"⇉ {index}/{total}"

    @staticmethod
    def merge(inputs: int, outputs: int) -> str:
        """``n↣m``: a merge of ``inputs`` contexts into ``outputs``."""
        return f"{inputs}↣{outputs}"

    @staticmethod
    def transition(next_type: AgentType) -> str:
        """The token before an agent of ``next_type``: how it treats the conversation."""
        if next_type is AgentType.COMPLETION:
            return Symbol.COMPLETION
        if next_type in (
            AgentType.START_CONVERSATION,
            AgentType.START_CONVERSATION_WITH_SYSTEM_PROMPT,
        ):
            return Symbol.NEW_CONVERSATION
        return Symbol.CONTINUE


@dataclass(frozen=True, slots=True)
class Next:
    """What an agent's ``choose_next`` returns: the next agent's name, or the end.

    ``grading_passed`` (graders) adds ``✓`` or ``✗`` to the graph.
    """

    agent: str | None = None
    grading_passed: bool | None = None

    @classmethod
    def end(cls, grading_passed: bool | None = None) -> Next:
        return cls(None, grading_passed)

    @classmethod
    def to(cls, agent: str, grading_passed: bool | None = None) -> Next:
        return cls(agent, grading_passed)

    @property
    def is_end(self) -> bool:
        return self.agent is None


END = Next()


@dataclass(eq=False)
class FlowContext:
    """The state one branch of a flow carries (see the module's docstring)."""

    values: dict[str, Any] = field(default_factory=dict)
    conversation: list[Message] = field(default_factory=list)
    graph: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    skip_next_completion: bool = False
    streaming: bool = False
    node: str | None = None  # the flow.step node this context last came from
    prompt: str | None = None  # the prompt of the latest step

    @classmethod
    def of(cls, values: Mapping[str, Any] | None = None, **more: Any) -> FlowContext:
        return cls(values={**(values or {}), **more})

    # --- values ----------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def text(self, key: str, default: str = "") -> str:
        """The value as one string: a list's elements joined by blank lines."""
        value = self.values.get(key)
        if value is None:
            return default
        if isinstance(value, list | tuple):
            return "\n\n".join(str(item) for item in value)
        return str(value)

    def first(self, key: str, default: Any = None) -> Any:
        """The first element of a list value (the value itself when it is not a list)."""
        value = self.values.get(key, default)
        if isinstance(value, list | tuple):
            return value[0] if value else default
        return value

    def add(self, key: str, value: Any) -> None:
        """Append ``value`` to the list at ``key`` (a scalar there becomes a list)."""
        current = self.values.get(key)
        if current is None:
            self.values[key] = [value]
        elif isinstance(current, list):
            current.append(value)
        else:
            self.values[key] = [current, value]

    # --- state -----------------------------------------------------------------------------

    @property
    def failed(self) -> bool:
        return self.error is not None

    def fail(self, error: BaseException | Mapping[str, Any]) -> None:
        if isinstance(error, BaseException):
            self.error = {"type": type(error).__name__, "message": str(error)}
        else:
            self.error = dict(error)

    @property
    def graph_text(self) -> str:
        """The execution graph as lm-lib prints it: tokens joined by ``", "``."""
        return ", ".join(self.graph)

    def copy(self, *, without: Iterable[str] = ()) -> FlowContext:
        """An independent copy (values deep-copied, but those of keys in ``without``; messages
        are immutable and shared)."""
        left_out = set(without)
        values = {k: v for k, v in self.values.items() if k not in left_out}
        return FlowContext(
            values=copy.deepcopy(values),
            conversation=list(self.conversation),
            graph=list(self.graph),
            error=copy.deepcopy(self.error),
            skip_next_completion=self.skip_next_completion,
            streaming=self.streaming,
            node=self.node,
            prompt=self.prompt,
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able view: values, graph, error, and the conversation's messages."""
        return {
            "values": self.values,
            "graph": self.graph_text,
            "error": self.error,
            "conversation": [m.plain() for m in self.conversation],
        }

    def __repr__(self) -> str:
        state = "failed" if self.failed else "ok"
        return f"<FlowContext {state} keys={sorted(self.values)} graph={self.graph_text!r}>"
