"""Agents built on the effect boundary: the minimal agent loop."""

from rar.agent.loop import Agent, AgentResult, AgentStep, StopReason

__all__ = ["Agent", "AgentResult", "AgentStep", "StopReason"]
