"""Agentic flows: graphs of agents with templates, parallel splits, merges and graders.

::

    from rar.flow import Agent, AgentType, Flow, JsonHandler, TextHandler, merge_keys

    flow = Flow([summarizer, identifier, analyzer, writer], model="openai:gpt-4o-mini")
    result = flow.walk("CodeSummarizer", {"code": [source]}, run=run)
    result.graph        # 'M, CodeSummarizer, ↴, M, FeatureIdentifier, →, ⇉ 1/5, ...'

See docs/flows.md. The science runtime's agent protocols (BDI, ACL, Contract Net, audit) are
another layer: :mod:`rar.science.protocols`.
"""

from __future__ import annotations

from rar.flow.agent import Agent, BaseAgent, merge_keys
from rar.flow.context import END, AgentType, FlowContext, Next, Symbol
from rar.flow.executor import Flow, FlowError, FlowResult
from rar.flow.graders import (
    AnswerGrader,
    BinaryAnswerGrader,
    BinaryGrade,
    agrade_binary,
    feedback_loop,
    grade_binary,
)
from rar.flow.handlers import (
    AccumulateHandler,
    HandlerError,
    JsonHandler,
    ResponseHandler,
    TextHandler,
)
from rar.flow.stats import FlowStatistics
from rar.flow.templates import Split, TemplateError, expand, merge_contexts

__all__ = [
    "END",
    "AccumulateHandler",
    "Agent",
    "AgentType",
    "BaseAgent",
    "Flow",
    "FlowContext",
    "FlowError",
    "FlowResult",
    "FlowStatistics",
    "HandlerError",
    "JsonHandler",
    "Next",
    "ResponseHandler",
    "Split",
    "Symbol",
    "TemplateError",
    "TextHandler",
    "expand",
    "merge_contexts",
    "merge_keys",
]
__all__ += [
    "AnswerGrader",
    "BinaryAnswerGrader",
    "BinaryGrade",
    "agrade_binary",
    "feedback_loop",
    "grade_binary",
]
