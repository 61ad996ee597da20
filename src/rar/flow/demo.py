"""lm-lib's announcement example as a RAR flow: ``rar flow demo``.

CodeSummarizer summarizes a piece of code; FeatureIdentifier, continuing that conversation,
lists its five main features as JSON; FeatureAnalyzer explains each feature in a split of its
own (five in parallel), merged back into one context; AnswerGenerator writes the announcement.
Offline, a scripted model answers (its answers are a function of the prompt, so the flow replays
and caches like a real one); ``--model`` runs the same flow on a real model. Expected graph
(:data:`EXPECTED_GRAPH`)::

    M, CodeSummarizer, ↴, M, FeatureIdentifier, →, ⇉ 1/5, M, FeatureAnalyzer, 5↣1, →,
    M, AnswerGenerator
"""

from __future__ import annotations

import json
import re
from typing import Any

from rar.flow.agent import Agent, merge_keys
from rar.flow.context import AgentType, FlowContext
from rar.flow.executor import Flow, FlowResult
from rar.flow.handlers import JsonHandler, TextHandler
from rar.llm.types import Request
from rar.runtime.run import Run

GOAL = "Announce the flow engine's features: summarize its code, analyze each feature, write it up"
DEMO_MODEL = "flow-demo"
EXPECTED_GRAPH = (
    "M, CodeSummarizer, ↴, M, FeatureIdentifier, →, ⇉ 1/5, M, FeatureAnalyzer, 5↣1, →, "
    "M, AnswerGenerator"
)

CODE = '''\
class FlowExecutor:
    """Walks a graph of agents over a shared context."""

    def __init__(self, agents, pool):
        self.agents = {agent.name: agent for agent in agents}
        self.pool = pool  # runs splits in parallel

    def walk(self, start, context):
        agent = self.agents[start]
        agent.pre_process(context)
        splits = expand(agent.template, context)          # [[key]] makes one split per item
        futures = [self.pool.submit(self.execute, agent, split) for split in splits]
        results = [future.result() for future in futures]
        merged = agent.merge(results) or results            # many-to-one, one-to-many, or none
        out = []
        for ctx in merged:
            next_agent = agent.choose_next(ctx)             # the next agent, or the end
            out += [ctx] if next_agent is None else self.walk(next_agent, ctx)
        return out

    def execute(self, agent, ctx):
        conversation = agent.conversation(ctx)              # new, continued, or stateless
        answer = client.complete(conversation)
        agent.response_handler().handle(ctx, answer)
        agent.post_process(ctx)
        return ctx
'''

SUMMARIZER_SYSTEM = "You are a senior software engineer who explains code precisely and briefly."
SUMMARIZE = "Summarize the following code in one paragraph:\n\n{{code}}"
IDENTIFY = (
    "Identify the five most important features of this code. Answer with JSON only: "
    '{"feature": ["...", "...", "...", "...", "..."]}'
)
ANALYZE = (
    "Explain in two sentences what this feature of the code does and why it matters to a "
    "developer.\n\nFeature: [[feature]]\n\nSummary of the code:\n{{summary}}"
)
ANNOUNCE = (
    "Write a short release announcement for developers introducing these features of the "
    "framework. Give each one a bold heading.\n\n{{analysis}}"
)

FEATURES = [
    "LLM conversation orchestration",
    "Dynamic prompt templating with branching",
    "Parallel execution of splits",
    "Context merging across splits",
    "Next-agent selection and chaining",
]
ANALYSES = {
    FEATURES[0]: "The executor chains agents and manages the conversation each one continues, "
    "starts or discards. Developers compose multi-step pipelines without wiring prompts by hand.",
    FEATURES[1]: "Templates fill prompts from the context, and a [[key]] placeholder makes one "
    "prompt per list element. One input fans out into many focused requests.",
    FEATURES[2]: "Splits are submitted to a pool and run at the same time. Independent requests "
    "no longer wait for each other, so a fan-out costs about as long as its slowest split.",
    FEATURES[3]: "After a split, the agent's merge turns the results into one context, several, or "
    "leaves them apart. Later agents see a consolidated view of the parallel work.",
    FEATURES[4]: "Each agent names the agent that follows, or ends the walk. Flows adapt to what "
    "the context holds, including loops back for another attempt.",
}


def demo_script(request: Request) -> str:
    """The scripted model's answer: a function of the prompt alone (so it caches and replays)."""
    prompt = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    if prompt.startswith("Summarize the following code"):
        return (
            "The code is a small flow executor: it keeps agents by name, expands each agent's "
            "template over the context into splits, runs the splits in parallel on a pool, lets "
            "the agent merge the results, and walks on to the agent each context chooses next. "
            "Each split builds its conversation, asks the model, and lets a response handler "
            "store the answer in the context."
        )
    if prompt.startswith("Identify the five"):
        return json.dumps({"feature": FEATURES}, indent=1)
    if prompt.startswith("Explain in two sentences"):
        match = re.search(r"Feature: (.+)", prompt)
        feature = match.group(1).strip() if match else ""
        return ANALYSES.get(feature, f"{feature}: a part of the flow engine.")
    if prompt.startswith("Write a short release announcement"):
        body = prompt.split("\n\n", 1)[1] if "\n\n" in prompt else ""
        items = [p.strip() for p in body.split("\n\n") if p.strip()]
        lines = ["## Introducing agent orchestration with parallel splits", ""]
        for feature, analysis in zip(FEATURES, items, strict=False):
            lines.append(f"**{feature}.** {analysis}")
            lines.append("")
        lines.append("Together they let you build flows that branch out, run in parallel, merge.")
        return "\n".join(lines)
    return "I can only answer the flow demo's prompts."


def demo_agents() -> list[Agent]:
    return [
        Agent(
            "CodeSummarizer",
            AgentType.START_CONVERSATION_WITH_SYSTEM_PROMPT,
            model="m",
            system_prompt=SUMMARIZER_SYSTEM,
            template=SUMMARIZE,
            handler=TextHandler("summary"),
            choose_next="FeatureIdentifier",
        ),
        Agent(
            "FeatureIdentifier",
            AgentType.CONVERSATION,
            model="m",
            template=IDENTIFY,
            handler=JsonHandler(required=("feature",)),
            post_process=_five_features,
            choose_next="FeatureAnalyzer",
        ),
        Agent(
            "FeatureAnalyzer",
            AgentType.COMPLETION,
            model="m",
            template=ANALYZE,
            handler=TextHandler("analysis"),
            merge=merge_keys(["feature", "analysis"]),
            choose_next="AnswerGenerator",
        ),
        Agent(
            "AnswerGenerator",
            AgentType.COMPLETION,
            model="m",
            template=ANNOUNCE,
            handler=TextHandler("answer"),
        ),
    ]


def _five_features(context: FlowContext) -> None:
    features = [str(f) for f in context.get("feature") or [] if str(f).strip()]
    context["feature"] = features[:5]


def demo_flow_model(model: str | None) -> Any:
    from rar.llm.providers.scripted import ScriptedModel

    return ScriptedModel(demo_script, model=DEMO_MODEL) if model is None else model


def run_flow_demo(run: Run, model: str | None = None, concurrency: int = 5) -> dict[str, Any]:
    """The demo's entrypoint (replayable): walk the flow, return the answer and the graph."""
    from rar.llm.profiles import Profiles

    flow = Flow(
        demo_agents(),
        model=demo_flow_model(model),
        profiles=Profiles() if model is None else None,
        concurrency=concurrency,
        name="flow",
    )
    result = flow.walk("CodeSummarizer", {"code": [CODE]}, run=run)
    if result.failed:
        from rar.store.manifest import RunStatus

        run.outcome_status = RunStatus.COMPLETED_WITH_WARNINGS
    return _summary(result)


def _summary(result: FlowResult) -> dict[str, Any]:
    first = result.contexts[0] if result.contexts else None
    return {
        "answer": first.text("answer") if first is not None and not first.failed else None,
        "graph": result.graph,
        "requests": result.statistics.requests,
        "errored": len(result.failed),
        "contexts": [c.as_dict() for c in result.contexts],
    }
