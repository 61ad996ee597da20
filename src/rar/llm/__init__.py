"""Models: provider-neutral types, providers, profiles, the client and the response cache."""

from rar.llm.provider import Provider
from rar.llm.providers.scripted import ScriptedModel, tool_call
from rar.llm.types import (
    FinishReason,
    Message,
    Request,
    Response,
    ResponseFormat,
    StreamChunk,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "FinishReason",
    "Message",
    "Provider",
    "Request",
    "Response",
    "ResponseFormat",
    "ScriptedModel",
    "StreamChunk",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "tool_call",
]
