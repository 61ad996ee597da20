"""The orchestrator's function-calling protocol: the tools a planner model may call.

A planner (the offline rule-based one, or a real model) drives the science runtime by calling
these tools; each call is delegated to an agent (through Contract Net) and its result goes back
to the planner as a tool message. The argument schemas are the contract for real models too.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rar.llm.types import ToolSpec

PLAN = "plan"
DELEGATE_RESEARCH = "delegate_research"
DELEGATE_EXECUTE = "delegate_execute"
DELEGATE_AUDIT = "delegate_audit"
REQUEST_MORE_EVIDENCE = "request_more_evidence"
WAIT_SECONDS = "wait_seconds"
WAIT_UNTIL = "wait_until"
FINALIZE = "finalize"


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str = Field(min_length=1, description="the tool this step will call")
    purpose: str = Field(min_length=1)


class Plan(BaseModel):
    """The planner's decomposition of the question, recorded as its intentions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    goal: str = Field(min_length=1)
    steps: list[PlanStep] = Field(min_length=1)
    success_criteria: str = ""


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)
    anchors: list[str] = Field(
        default_factory=list, description="anchor references as doc_id#location"
    )


class Finalize(BaseModel):
    """The final answer: markdown with numbered citations, its claims and their evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    answer_markdown: str = Field(min_length=1)
    claims: list[Claim] = Field(default_factory=list)
    evidence_used: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0)
    uncertainty: str = ""


def _spec(name: str, description: str, properties: dict[str, Any], required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    )


TOOLS: tuple[ToolSpec, ...] = (
    _spec(PLAN, "State the plan: the goal, the steps (tool and purpose), what success means.",
          Plan.model_json_schema()["properties"], ["goal", "steps"]),
    _spec(
        DELEGATE_RESEARCH,
        "Search the corpus for passages that answer a query.",
        {"query": {"type": "string"}, "k": {"type": "integer", "minimum": 1, "maximum": 20}},
        ["query"],
    ),
    _spec(
        DELEGATE_EXECUTE,
        "Run Python (numpy, scipy) in the sandbox to compute a result.",
        {"code": {"type": "string"}, "purpose": {"type": "string"}},
        ["code", "purpose"],
    ),
    _spec(
        DELEGATE_AUDIT,
        "Audit the current draft: evidence, relevance, errors, units.",
        {
            "draft": {"type": "string"},
            "claims": {"type": "array", "items": Claim.model_json_schema()},
        },
        ["draft", "claims"],
    ),
    _spec(
        REQUEST_MORE_EVIDENCE,
        "Search again for evidence for one challenged claim.",
        {"claim": {"type": "string"}, "query": {"type": "string"}},
        ["claim", "query"],
    ),
    _spec(
        WAIT_SECONDS,
        "Pause the run (it becomes WAITING) and resume after some seconds.",
        {"seconds": {"type": "number", "minimum": 0}, "reason": {"type": "string"}},
        ["seconds", "reason"],
    ),
    _spec(
        WAIT_UNTIL,
        "Pause the run until a UTC time (ISO 8601).",
        {"until": {"type": "string"}, "reason": {"type": "string"}},
        ["until", "reason"],
    ),
    _spec(
        FINALIZE,
        "Give the final answer with its claims and evidence.",
        Finalize.model_json_schema()["properties"],
        ["answer_markdown", "confidence"],
    ),
)
