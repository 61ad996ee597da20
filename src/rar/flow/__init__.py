"""Agentic flows: graphs of agents with templates, parallel splits and merges (in progress).

So far: :mod:`rar.flow.templates`, the prompt templates of lm-lib's flow engine —
``{{key}}``, ``{{{key}}}``, ``[[key]]`` and ``[[key|hidden]]`` — expanded into splits.
"""

from __future__ import annotations

from rar.flow.templates import Split, TemplateError, expand, merge_contexts

__all__ = ["Split", "TemplateError", "expand", "merge_contexts"]
