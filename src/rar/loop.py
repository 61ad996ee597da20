"""The minimal agent loop: ask the model, run the tools it calls, repeat until it answers.

::

    agent = Agent("openai:gpt-4o-mini", tools=[calculator], max_steps=8,
                  system_prompt="You are careful with numbers.")
    result = agent.run("What is 17 * 23 + 4?", run=run)
    result.text, result.stop_reason, result.usage, result.cost

Every model call and tool call goes through the run's effect boundary (the client and the tool
registry do that), so a recorded loop replays step by step. Parallel tool calls of one answer
are executed and recorded in the order the model listed them. An unknown tool or arguments that
are not JSON go back to the model as error results; a provider failure that survives retries
and fallbacks ends the loop with ``StopReason.ERROR`` and the error as a value.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from rar.errors import ProviderError
from rar.llm.client import Client, ModelSpec
from rar.llm.interceptors import UsageStats
from rar.llm.types import Message, Response, ToolCall, Usage
from rar.runtime.run import Run
from rar.tools import Tool, ToolRegistry, ToolResult

__all__ = ["Agent", "AgentResult", "AgentStep", "StopReason"]


class StopReason(enum.StrEnum):
    COMPLETED = "completed"
    MAX_STEPS = "max_steps"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class AgentStep:
    index: int
    response: Response
    tool_results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True, slots=True)
class AgentResult:
    text: str
    stop_reason: StopReason
    steps: tuple[AgentStep, ...]
    messages: tuple[Message, ...]
    usage: Usage
    cost: float
    latency_s: float
    error: dict[str, Any] | None = None
    calls: tuple[tuple[ToolCall, ToolResult], ...] = field(default=())

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for call, _ in self.calls]

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "stop_reason": self.stop_reason.value,
            "steps": len(self.steps),
            "tool_calls": [
                {"name": c.name, "arguments": c.arguments, "ok": r.ok, "content": r.content}
                for c, r in self.calls
            ],
            "usage": self.usage.model_dump(),
            "cost": self.cost,
            "latency_s": round(self.latency_s, 6),
            "error": self.error,
        }


class Agent:
    def __init__(
        self,
        model: ModelSpec | Client,
        tools: Sequence[Tool] | ToolRegistry = (),
        *,
        max_steps: int = 10,
        system_prompt: str | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.model = model
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.max_steps = max_steps
        self.system_prompt = system_prompt

    def _client(self, run: Run | None) -> Client:
        if isinstance(self.model, Client):
            if run is not None and self.model.run is not run:
                raise ValueError("the agent's client records into another run")
            return self.model
        return Client(self.model, run=run)

    def run(self, task: str, *, run: Run | None = None) -> AgentResult:
        """Work on ``task`` until the model answers without tool calls, or ``max_steps``."""
        client = self._client(run)
        before = _snapshot(client.stats)
        began = time.perf_counter()
        messages: list[Message] = []
        if self.system_prompt:
            messages.append(Message.system(self.system_prompt))
        messages.append(Message.user(task))
        specs = tuple(self.registry.specs())
        steps: list[AgentStep] = []
        calls: list[tuple[ToolCall, ToolResult]] = []
        stop, error, text = StopReason.MAX_STEPS, None, ""
        for index in range(self.max_steps):
            with run.span("step") if run is not None else nullcontext():
                request = client.request(messages=messages, tools=specs)
                try:
                    response = client.complete(request)
                except ProviderError as exc:
                    stop = StopReason.ERROR
                    error = {"type": type(exc).__name__, "message": exc.message}
                    break
                messages.append(response.message)
                text = response.content or text
                if not response.tool_calls:
                    steps.append(AgentStep(index, response))
                    stop = StopReason.COMPLETED
                    break
                results = tuple(self.registry.execute_all(list(response.tool_calls), run=run))
                calls.extend(zip(response.tool_calls, results, strict=True))
                messages.extend(result.message() for result in results)
                steps.append(AgentStep(index, response, results))
        usage, cost = _since(client.stats, before)
        return AgentResult(
            text=text,
            stop_reason=stop,
            steps=tuple(steps),
            messages=tuple(messages),
            usage=usage,
            cost=cost,
            latency_s=time.perf_counter() - began,
            error=error,
            calls=tuple(calls),
        )


def _snapshot(stats: UsageStats) -> tuple[Usage, float]:
    return stats.usage, stats.cost


def _since(stats: UsageStats, before: tuple[Usage, float]) -> tuple[Usage, float]:
    usage, cost = before
    return stats.usage - usage, stats.cost - cost
