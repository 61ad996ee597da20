"""Walking a flow: agents, splits, merges and the next agent, every model call an effect.

::

    flow = Flow([summarizer, identifier, analyzer, writer], model="openai:gpt-4o-mini")
    result = flow.walk("CodeSummarizer", {"code": [source]}, run=run)
    result.contexts[0]["answer"], result.graph, result.statistics.as_dict()

Per context and agent (lm-lib's life cycle): ``pre_process``; the template expanded (``[[key]]``
makes one split per element); per split, unless the step is processing-only, a model request
built by the agent's type, the answer given to the response handler (2 attempts; the second
with a repair instruction), ``post_process``; after a split, the agent's ``merge``; then
``choose_next``. Splits run concurrently (asyncio) with at most ``concurrency`` model calls at
a time.

**In the record.** A walk is a span (``run/flow``), each step a span under it named after its
agent (``run/flow/FeatureAnalyzer#3`` for the third split), so every model call is identified
by its split, not by when it finished: a replay whose splits interleave differently still
serves each call its own answer. A split that is not merged continues inside its own span;
contexts produced by a one-to-many merge continue in ``branch`` spans. Each step appends a
``flow.step`` event (its node id is its span path), each merge a ``flow.merge``, and the walk a
``flow.end`` with the graphs and the statistics; the run's ``stats["flow"]`` adds them up.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from rar.errors import ConfigError, UserError
from rar.flow.context import AgentType, FlowContext, Next, Symbol
from rar.flow.handlers import repair_instruction
from rar.flow.stats import FlowStatistics, RequestRecord
from rar.flow.templates import TemplateError, expand
from rar.llm.types import Message, Response
from rar.runtime.run import Run, error_value

PREDEFINED_CATEGORIES = ("s", "m", "l", "xl", "hot", "cold")
_BRANCHES = re.compile(r"\[\[\s*[A-Za-z_][\w.-]*\s*(\|\s*hidden\s*)?\]\]")
_NAME = re.compile(r"^[A-Za-z_][\w.-]*$")


class FlowError(UserError):
    """A flow is defined wrongly (duplicate or invalid agent names, no such start agent)."""


@dataclass
class FlowResult:
    """What a walk returns: the contexts (successful first), statistics and graphs."""

    contexts: list[FlowContext]
    statistics: FlowStatistics
    run_id: str | None = None
    flow: str = "flow"

    @property
    def ok(self) -> list[FlowContext]:
        return [c for c in self.contexts if not c.failed]

    @property
    def failed(self) -> list[FlowContext]:
        return [c for c in self.contexts if c.failed]

    @property
    def graph(self) -> str:
        """The first context's execution graph."""
        return self.contexts[0].graph_text if self.contexts else ""

    @property
    def graphs(self) -> list[str]:
        return [c.graph_text for c in self.contexts]

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "graph": self.graph,
            "statistics": self.statistics.as_dict(),
            "contexts": [c.as_dict() for c in self.contexts],
        }


@dataclass
class _Step:
    """A step being executed: what its ``flow.step`` event will say."""

    agent: str
    agent_type: AgentType
    node: str
    parents: list[str]
    category: str | None
    split: list[int] | None
    symbols_from: int
    status: str = "ok"
    attempts: int = 0


@dataclass
class _Walk:
    run: Run | None
    name: str
    limit: asyncio.Semaphore
    statistics: FlowStatistics = field(default_factory=FlowStatistics)
    counters: dict[str, int] = field(default_factory=dict)
    clients: dict[Any, tuple[Any, str | None]] = field(default_factory=dict)
    steps: int = 0

    def span(self, name: str, **attributes: Any) -> AbstractContextManager[Any]:
        if self.run is None:
            return nullcontext()
        return self.run.span(name, **attributes)

    def path(self, name: str) -> str:
        """The current span path (a step's node), or without a run a counter-made stand-in."""
        if self.run is not None:
            return self.run.span_path
        return _count(self, f"{self.name}/{name}")

    def here(self) -> str:
        return self.run.span_path if self.run is not None else self.name

    def log(self, event_type: str, **fields: Any) -> None:
        if self.run is not None:
            self.run.log_event(event_type, **fields)


class Flow:
    """A set of agents by name, and how to walk them (see the module's docstring).

    ``model`` is the model of agents that name none (and of agents naming a predefined category
    — ``s``, ``m``, ``l``, ``xl``, ``hot``, ``cold`` — no profile has); ``models`` maps a
    category or a name used by agents to a model spec or a client; ``profiles`` are searched
    for categories and profile names. ``max_steps`` bounds the steps of one walk (loops).
    """

    def __init__(
        self,
        agents: Sequence[Any],
        *,
        model: Any = None,
        models: Mapping[str, Any] | None = None,
        profiles: Any = None,
        concurrency: int = 8,
        name: str = "flow",
        streaming: bool = False,
        max_steps: int = 1000,
    ) -> None:
        if concurrency < 1:
            raise FlowError("concurrency must be at least 1 (the most model calls at a time)")
        if not _NAME.match(name):
            raise FlowError(f"flow name {name!r} must be letters, digits, '_', '.' or '-'")
        self.agents: dict[str, Any] = {}
        for agent in agents:
            agent_name = getattr(agent, "name", "")
            if not isinstance(agent_name, str) or not _NAME.match(agent_name):
                raise FlowError(
                    f"agent name {agent_name!r} must start with a letter and hold only letters, "
                    "digits, '_', '.' or '-' (it names the agent's span in the record)"
                )
            if agent_name in self.agents:
                raise FlowError(f"two agents are named {agent_name!r}; names must be unique")
            try:
                AgentType(getattr(agent, "agent_type", AgentType.START_CONVERSATION))
            except ValueError:
                known = ", ".join(t.value for t in AgentType)
                raise FlowError(
                    f"agent {agent_name}: agent type {agent.agent_type!r} is none of {known}"
                ) from None
            self.agents[agent_name] = agent
        self.model = model
        self.models = dict(models or {})
        self._profiles = profiles
        self.concurrency = concurrency
        self.name = name
        self.streaming = streaming
        self.max_steps = max_steps

    # --- walking ---------------------------------------------------------------------------

    def walk(
        self,
        start: str,
        context: FlowContext | Mapping[str, Any] | None = None,
        *,
        run: Run | None = None,
    ) -> FlowResult:
        """Walk the flow from ``start``; from async code, use :meth:`awalk`."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.awalk(start, context, run=run))
        raise FlowError("Flow.walk() was called inside a running event loop: await flow.awalk()")

    async def awalk(
        self,
        start: str,
        context: FlowContext | Mapping[str, Any] | None = None,
        *,
        run: Run | None = None,
    ) -> FlowResult:
        if start not in self.agents:
            raise FlowError(
                f"no agent named {start!r} to start from; the flow has "
                f"{', '.join(self.agents) or 'no agents'}"
            )
        ctx = context if isinstance(context, FlowContext) else FlowContext.of(context)
        if ctx.graph:
            ctx.graph.append(Symbol.CONTINUATION)
        ctx.streaming = ctx.streaming or self.streaming
        walk = _Walk(run, self.name, asyncio.Semaphore(self.concurrency))
        with walk.span(self.name, flow=self.name, start=start):
            try:
                contexts = await self._execute(walk, ctx, self.agents[start])
            finally:
                await _close_clients(walk)
            ordered = [c for c in contexts if not c.failed] + [c for c in contexts if c.failed]
            stats = walk.statistics
            walk.log(
                "flow.end",
                flow=self.name,
                graphs=[c.graph_text for c in ordered],
                report=stats.as_dict(),
                contexts=len(ordered),
                errored=sum(c.failed for c in ordered),
            )
        if run is not None:
            run.add_stats("flow", stats.run_stats())
        return FlowResult(ordered, stats, run.id if run is not None else None, self.name)

    async def _execute(self, walk: _Walk, ctx: FlowContext, agent: Any) -> list[FlowContext]:
        """Run ``agent`` on ``ctx`` and all that follows; the contexts it ends with."""
        while True:
            outcome = await self._agent(walk, ctx, agent)
            if isinstance(outcome, list):
                return outcome
            ctx, agent = outcome

    async def _agent(
        self, walk: _Walk, ctx: FlowContext, agent: Any
    ) -> list[FlowContext] | tuple[FlowContext, Any]:
        walk.steps += 1
        if walk.steps > self.max_steps:
            ctx.graph.extend([agent.name, Symbol.FATAL])
            ctx.fail(
                {
                    "type": "FlowError",
                    "message": f"the walk took more than {self.max_steps} steps (a loop?); "
                    "raise Flow(max_steps=...) if it is meant to",
                }
            )
            return [ctx]
        _, failure = await _hook(agent, "pre_process", ctx)
        template = agent.template
        splits = None
        if failure is None:
            try:
                splits = expand(template, ctx.values, agent=agent.name) if template else None
            except TemplateError as exc:
                failure = exc
        if failure is not None:  # before any split: the step fails as a whole
            with walk.span(agent.name, agent=agent.name):
                step = self._begin(walk, ctx, agent, None, skipped=True, failed=True)
                self._fatal(ctx, step, failure)
                self._end(walk, ctx, step)
            return [ctx]
        branched = bool(template and _BRANCHES.search(template))
        if splits is not None and not splits:  # [[key]] over an empty list: nothing to do
            ctx.graph.append(Symbol.split(0, 0))
            return [ctx]
        prompts = [s.prompt for s in splits] if splits else [None]
        merges = branched and _merges(agent)
        if not branched:
            with walk.span(agent.name, agent=agent.name):
                ctx.prompt = prompts[0]
                step = await self._step(walk, ctx, agent, None)
                if ctx.failed:
                    self._end(walk, ctx, step)
                    return [ctx]
            return await self._after(walk, ctx, agent, step)

        total = len(prompts)
        split_contexts = []
        for split in splits or []:
            # values deep-copied, so no split sees another's writes; a branched list is not
            # copied whole for each split, only its element
            narrowed = {k: v for k, v in split.context.items() if v is not ctx.values.get(k)}
            child = ctx.copy(without=narrowed)
            child.values.update(copy.deepcopy(narrowed))
            child.prompt = split.prompt
            split_contexts.append(child)
        ctx.skip_next_completion = False

        async def one(index: int, child: FlowContext) -> list[FlowContext]:
            # the span is opened before the first await, so splits are numbered in order
            with walk.span(agent.name, agent=agent.name, split=[index + 1, total]):
                step = await self._step(walk, child, agent, [index + 1, total])
                if merges or child.failed:
                    self._end(walk, child, step)
                    return [child]
                return await self._continue(walk, child, agent, step)

        results = await asyncio.gather(*(one(i, c) for i, c in enumerate(split_contexts)))
        finished = [c for group in results for c in group]
        if not merges:
            return finished
        return await self._merge(walk, agent, finished)

    async def _continue(
        self, walk: _Walk, ctx: FlowContext, agent: Any, step: _Step
    ) -> list[FlowContext]:
        outcome = await self._after(walk, ctx, agent, step)
        if isinstance(outcome, list):
            return outcome
        return await self._execute(walk, *outcome)

    async def _merge(
        self, walk: _Walk, agent: Any, finished: list[FlowContext]
    ) -> list[FlowContext]:
        ok = [c for c in finished if not c.failed]
        errored = [c for c in finished if c.failed]
        parents = [c.node for c in finished if c.node]
        node = _count(walk, f"{walk.here()}/{agent.name}.merge")
        merged: list[FlowContext] | None
        failure = None
        try:
            produced = agent.merge(ok) if ok else []
            if inspect.isawaitable(produced):
                produced = await produced
            merged = _contexts(produced, ok)
        except Exception as exc:
            merged, failure = [], exc
        if failure is not None:
            for c in ok:
                c.graph.append(Symbol.FATAL)
                c.fail({"type": type(failure).__name__, "message": f"merge: {failure}"})
            errored = ok + errored
            merged = []
        assert merged is not None
        symbols = [Symbol.merge(len(ok), len(merged))] if merged else []
        for c in merged:
            c.graph.extend(symbols)
            c.node = node
        fields: dict[str, Any] = {
            "flow": walk.name,
            "node": node,
            "agent": agent.name,
            "parents": parents,
            "inputs": len(ok),
            "outputs": len(merged),
            "errored": len(errored),
        }
        if len(merged) == 1:
            mark = len(merged[0].graph) - len(symbols)
            outcome = await self._after(walk, merged[0], agent, None)
            nxt = None if isinstance(outcome, list) else outcome[1].name
            walk.log("flow.merge", **fields, next=nxt, symbols=merged[0].graph[mark:])
            done = outcome if isinstance(outcome, list) else await self._execute(walk, *outcome)
            return done + errored
        walk.log("flow.merge", **fields, symbols=symbols)

        async def branch(c: FlowContext) -> list[FlowContext]:
            with walk.span("branch"):
                outcome = await self._after(walk, c, agent, None)
                if isinstance(outcome, list):
                    return outcome
                return await self._execute(walk, *outcome)

        groups = await asyncio.gather(*(branch(c) for c in merged))
        return [c for group in groups for c in group] + errored

    async def _after(
        self, walk: _Walk, ctx: FlowContext, agent: Any, step: _Step | None
    ) -> list[FlowContext] | tuple[FlowContext, Any]:
        """Choose the next agent; the graph gets the grade and the transition token."""
        choice, failure = await _hook(agent, "choose_next", ctx)
        nxt = None
        if failure is None:
            try:
                nxt = _next(choice)
            except FlowError as exc:
                failure = exc
        target = None
        if failure is None and nxt is not None:
            if nxt.grading_passed is not None:
                ctx.graph.append(Symbol.PASSED if nxt.grading_passed else Symbol.FAILED)
            if nxt.agent is not None:
                target = self.agents.get(nxt.agent)
                if target is None:
                    failure = FlowError(
                        f"agent {agent.name} chose {nxt.agent!r} as the next agent, and the flow "
                        f"has no such agent (it has {', '.join(self.agents)})"
                    )
        if failure is not None:
            ctx.graph.append(Symbol.FATAL)
            ctx.fail(_error(failure))
            if step is not None:
                step.status = "error"
        elif target is not None:
            ctx.graph.append(Symbol.transition(_type(target, ctx)))
        if step is not None:
            self._end(
                walk,
                ctx,
                step,
                next_agent=nxt.agent if nxt and not ctx.failed else None,
                grade=nxt.grading_passed if nxt else None,
            )
        if ctx.failed or target is None:
            return [ctx]
        return ctx, target

    # --- one step ---------------------------------------------------------------------------

    def _begin(
        self,
        walk: _Walk,
        ctx: FlowContext,
        agent: Any,
        split: list[int] | None,
        *,
        skipped: bool,
        failed: bool = False,
    ) -> _Step:
        agent_type = _type(agent, ctx)
        category = None if skipped else self._client(walk, agent, ctx)[1]
        step = _Step(
            agent=agent.name,
            agent_type=agent_type,
            node=walk.path(agent.name),
            parents=[ctx.node] if ctx.node else [],
            category=category,
            split=split,
            symbols_from=len(ctx.graph),
        )
        if split is not None:
            ctx.graph.append(Symbol.split(*split))
        if not failed:
            ctx.graph.append(category or Symbol.SKIPPED)
        ctx.graph.append(agent.name)
        return step

    async def _step(
        self, walk: _Walk, ctx: FlowContext, agent: Any, split: list[int] | None
    ) -> _Step:
        agent_type = _type(agent, ctx)
        skipped = ctx.skip_next_completion or agent_type is AgentType.PROCESSING_ONLY
        ctx.skip_next_completion = False
        try:
            step = self._begin(walk, ctx, agent, split, skipped=skipped)
        except ConfigError as exc:  # no model for this agent
            step = _Step(
                agent.name,
                agent_type,
                walk.path(agent.name),
                [ctx.node] if ctx.node else [],
                None,
                split,
                len(ctx.graph),
            )
            ctx.graph.append(agent.name)
            self._fatal(ctx, step, exc)
            return step
        if skipped:
            step.status = "skipped"
        else:
            await self._complete(walk, ctx, agent, agent_type, step)
        if not ctx.failed:
            _, failure = await _hook(agent, "post_process", ctx)
            if failure is not None:
                self._fatal(ctx, step, failure)
        return step

    async def _complete(
        self, walk: _Walk, ctx: FlowContext, agent: Any, agent_type: AgentType, step: _Step
    ) -> None:
        client, _ = self._client(walk, agent, ctx)
        messages = _conversation(agent_type, agent.system_prompt, ctx.conversation, ctx.prompt)
        if not messages:
            self._fatal(
                ctx,
                step,
                FlowError(
                    f"agent {agent.name} has no template and no conversation to continue, so there "
                    "is nothing to send; give it a template or make it PROCESSING_ONLY"
                ),
            )
            return
        problem = ""
        for attempt in (1, 2):
            handler = agent.response_handler(ctx)
            try:
                response = await self._call(walk, client, messages, ctx, handler, agent.name)
            except Exception as exc:  # a provider that failed after its retries, or a bug
                self._fatal(ctx, step, exc)
                return
            step.attempts += 1
            try:
                ok = bool(handler.handle(ctx, response))
                problem = "" if ok else f"the {type(handler).__name__} refused it"
            except Exception as exc:
                ok, problem = False, str(exc) or type(exc).__name__
            if ok:
                ctx.conversation = [*messages, response.message]
                return
            if attempt == 1:
                ctx.graph.append(Symbol.RETRY)
                messages = _with_repair(messages, repair_instruction(handler, problem))
        self._fatal(
            ctx,
            step,
            {
                "type": "HandlerError",
                "message": f"agent {agent.name}: the answer could not be used after 2 attempts "
                f"({problem})",
            },
        )

    async def _call(
        self,
        walk: _Walk,
        client: Any,
        messages: list[Message],
        ctx: FlowContext,
        handler: Any,
        agent: str,
    ) -> Response:
        request = client.request(messages=messages)
        async with walk.limit:
            began = time.perf_counter()
            response: Response
            if ctx.streaming and hasattr(handler, "on_chunk"):
                before = getattr(handler, "before_stream", None)
                if before is not None:
                    before(ctx)
                response = await asyncio.to_thread(
                    client.stream, request, on_chunk=lambda chunk: handler.on_chunk(ctx, chunk)
                )
            else:
                response = await client.acomplete(request)
            ended = time.perf_counter()
        cached = _was_cached(walk.run, client)
        cost = 0.0 if cached else client.profile.cost.of(response.usage)
        walk.statistics.add(RequestRecord(agent, began, ended, response.usage, cached, cost))
        return response

    def _fatal(self, ctx: FlowContext, step: _Step, failure: Any) -> None:
        ctx.graph.append(Symbol.FATAL)
        ctx.fail(_error(failure))
        step.status = "error"

    def _end(
        self,
        walk: _Walk,
        ctx: FlowContext,
        step: _Step,
        *,
        next_agent: str | None = None,
        grade: bool | None = None,
    ) -> None:
        ctx.node = step.node
        fields: dict[str, Any] = {
            "flow": walk.name,
            "node": step.node,
            "agent": step.agent,
            "agent_type": step.agent_type.value,
            "category": step.category,
            "parents": step.parents,
            "split": step.split,
            "status": "error" if ctx.failed else step.status,
            "attempts": step.attempts,
            "grade": grade,
            "next": next_agent,
            "symbols": ctx.graph[step.symbols_from :],
        }
        if ctx.error is not None:
            fields["error"] = {
                "type": ctx.error.get("type", "Error"),
                "message": str(ctx.error.get("message", "")),
            }
        walk.log("flow.step", **fields)

    # --- models -----------------------------------------------------------------------------

    def _client(self, walk: _Walk, agent: Any, ctx: FlowContext) -> tuple[Any, str | None]:
        """The client of ``agent``'s model and the category short name the graph shows."""
        spec = agent.model
        if callable(spec) and not hasattr(spec, "complete") and not isinstance(spec, str):
            spec = spec(ctx)
        key = spec if isinstance(spec, str) or spec is None else id(spec)
        if key not in walk.clients:
            walk.clients[key] = self._resolve(walk, agent.name, spec)
        return walk.clients[key]

    def _resolve(self, walk: _Walk, agent: str, spec: Any) -> tuple[Any, str | None]:
        from rar.llm.client import Client
        from rar.llm.profiles import Profile, Profiles

        run = walk.run
        if spec is None:
            return self._default(walk, agent, "m"), "M"
        if isinstance(spec, Client):
            return spec, _short(spec.profile, None)
        if isinstance(spec, Profile):
            return Client(spec, run=run), _short(spec, None)
        if not isinstance(spec, str):  # a provider object
            return Client(spec, run=run), "M"
        if spec in self.models:
            given = self.models[spec]
            client = given if isinstance(given, Client) else Client(given, run=run)
            return client, spec.upper() if len(spec) <= 6 else _short(client.profile, spec)
        profiles = self._profiles if self._profiles is not None else Profiles.load()
        self._profiles = profiles
        in_category = [p for p in profiles if (p.category or "").lower() == spec.lower()]
        if in_category:
            return Client(in_category[0], run=run, profiles=profiles), spec.upper()
        if spec in profiles:
            profile = profiles.get(spec)
            return Client(profile, run=run, profiles=profiles), _short(profile, spec)
        if spec.lower() in PREDEFINED_CATEGORIES:
            return self._default(walk, agent, spec), spec.upper()
        if ":" in spec:
            client = Client(spec, run=run, profiles=profiles)
            return client, _short(client.profile, "M")
        raise ConfigError(
            f"agent {agent}: model {spec!r} is no category, profile or provider:model; give "
            "one of s, m, l, xl, hot, cold, a profile name, or e.g. openai:gpt-4o-mini"
        )

    def _default(self, walk: _Walk, agent: str, category: str) -> Any:
        from rar.llm.client import Client

        if self.model is None:
            raise ConfigError(
                f"agent {agent} asks for a model of category {category!r}, and the flow has no "
                "model for it: pass Flow(model=...) or a profile of that category"
            )
        if isinstance(self.model, Client):
            if walk.run is not None and self.model.run is not walk.run:
                raise ConfigError("the flow's client records into another run than the walk's")
            return self.model
        key = ("default",)
        if key not in walk.clients:
            walk.clients[key] = (Client(self.model, run=walk.run), None)
        return walk.clients[key][0]


# --- helpers ---------------------------------------------------------------------------------


async def _close_clients(walk: _Walk) -> None:
    """Close the connections the walk's clients pooled in this event loop (each walk may run in
    a loop of its own, ``Flow.walk`` does); a client the caller passed in is the caller's."""
    for client, _ in walk.clients.values():
        close = getattr(client, "aclose", None)
        if close is not None:
            await close()


def _type(agent: Any, ctx: FlowContext) -> AgentType:
    type_for = getattr(agent, "type_for", None)
    value = type_for(ctx) if callable(type_for) else agent.agent_type
    return AgentType(value)


def _merges(agent: Any) -> bool:
    merges = getattr(agent, "merges", None)
    if isinstance(merges, bool):
        return merges
    return getattr(agent, "merge", None) is not None


async def _hook(agent: Any, hook: str, ctx: FlowContext) -> tuple[Any, BaseException | None]:
    """Call the agent's ``hook(ctx)`` (awaiting a coroutine; a value that is not callable is
    the answer itself); what it returned, or the exception it raised."""
    function = getattr(agent, hook, None)
    if function is None:
        return None, None
    try:
        value = function(ctx) if callable(function) and not isinstance(function, Next) else function
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return None, exc
    return value, None


def _next(choice: Any) -> Next:
    if choice is None:
        return Next.end()
    if isinstance(choice, Next):
        return choice
    if isinstance(choice, str):
        return Next.to(choice)
    raise FlowError(
        f"choose_next returned {type(choice).__name__}; return an agent's name, a Next, or None"
    )


def _contexts(produced: Any, ok: list[FlowContext]) -> list[FlowContext] | None:
    if produced is None:
        return None if not ok else list(ok)
    if isinstance(produced, FlowContext | Mapping):
        produced = [produced]
    out = []
    for item in produced:
        if isinstance(item, FlowContext):
            out.append(item)
        elif isinstance(item, Mapping):
            base = ok[0].copy() if ok else FlowContext()
            base.values = dict(item)
            out.append(base)
        else:
            raise FlowError(f"merge returned a {type(item).__name__}; return contexts or None")
    return out


def _conversation(
    agent_type: AgentType, system: str | None, conversation: list[Message], prompt: str | None
) -> list[Message]:
    """The messages of the request, by agent type (lm-lib's conversation rules)."""
    user = [Message.user(prompt)] if prompt is not None else []
    if agent_type is AgentType.START_CONVERSATION:
        if system and prompt is not None:  # a user-only first turn: the system prompt merged in
            return [Message.user(f"{system}\n\n{prompt}")]
        return [Message.user(system)] if system and prompt is None else user
    if agent_type in (AgentType.START_CONVERSATION_WITH_SYSTEM_PROMPT, AgentType.COMPLETION):
        return ([Message.system(system)] if system else []) + user
    if agent_type is AgentType.CONVERSATION_WITH_SYSTEM_PROMPT:
        rest = [m for m in conversation if m.role != "system"]
        kept = [m for m in conversation[:1] if m.role == "system"]
        head = [Message.system(system)] if system else kept
        return head + rest + user
    # CONVERSATION: continue; a system prompt only opens an empty conversation
    if not conversation and system:
        return [Message.system(system), *user]
    return [*conversation, *user]


def _with_repair(messages: list[Message], instruction: str) -> list[Message]:
    """The messages with ``instruction`` added to the last user turn."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            content = f"{messages[index].content or ''}\n\n{instruction}"
            return [*messages[:index], Message.user(content), *messages[index + 1 :]]
    return [*messages, Message.user(instruction)]


def _was_cached(run: Run | None, client: Any) -> bool:
    if run is not None:
        event = run.last_effect()
        if event is not None and isinstance(event.get("result"), dict):
            try:
                result = run.store.resolve_payload(event["result"])
            except Exception:  # the flag is bookkeeping; the answer stands without it
                return False
            return bool(isinstance(result, dict) and result.get("cached"))
    last = getattr(client.stats, "last", None)
    return bool(last and last.cached)


def _short(profile: Any, fallback: str | None) -> str | None:
    category = getattr(profile, "category", None)
    if category:
        return str(category).upper()
    return fallback if fallback is not None else getattr(profile, "name", None)


def _count(walk: _Walk, node: str) -> str:
    walk.counters[node] = walk.counters.get(node, 0) + 1
    count = walk.counters[node]
    return node + (f"#{count}" if count > 1 else "")


def _error(failure: Any) -> dict[str, Any]:
    if isinstance(failure, BaseException):
        value = error_value(failure)
        return {"type": value["type"], "message": value["message"]}
    return dict(failure)
