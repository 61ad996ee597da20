"""Export a recorded run as a trajectory: thought / action / observation steps and one answer.

The document (format ``rar.trajectory/1``) is described by ``trajectory.schema.json`` next to this
module (JSON Schema draft 2020-12); :func:`validate` checks a document against it and checks what
the schema cannot say (exactly one ``answer`` step, and it is last; iterations never decrease).
The mapping from events to steps and the outcome rules are documented in docs/trajectory.md.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import orjson

from rar.errors import UserError
from rar.store.store import Store

FORMAT = "rar.trajectory/1"
SCHEMA_NAME = "trajectory.schema.json"
OUTCOMES = ("success", "failure", "loop", "timeout")
STEP_TYPES = ("thought", "action", "observation", "answer")

# inputs worth showing in the condition summary, besides the manifest's config
_CONDITION_INPUTS = ("mode", "corpus", "tools", "max_steps")
_CONDITION_SKIP = frozenset({"durable"})
_STEP_LIMIT_WARNINGS = ("step limit reached",)


class TrajectoryError(UserError):
    """A trajectory document does not match the schema or the step rules."""


def export_trajectory(store: Store, run_id: str) -> dict[str, Any]:
    """The trajectory document of the run ``run_id`` (a full id; see :meth:`Store.resolve`)."""
    manifest = store.manifest(run_id)
    events = store.events(run_id)
    inputs = {
        name: _resolve(store, ref.reference())
        for name, ref in manifest.inputs.items()
    }
    finished = next((e for e in reversed(events) if e.get("type") == "run.finished"), None)
    result = _resolve(store, finished.get("result")) if finished else None
    answer = _answer_text(result)

    steps: list[dict[str, Any]] = []
    iteration = 0
    first_llm_model = ""
    for event in events:
        if event.get("type") != "effect" or event.get("kind") not in ("llm", "tool"):
            continue
        if event["kind"] == "llm":
            iteration += 1
            request = _resolve(store, event.get("request")) or {}
            if not first_llm_model:
                first_llm_model = _llm_model(request)
            outcome = _resolve(store, event.get("result")) or {}
            steps.extend(_llm_steps(iteration, outcome.get("response") or {}))
        else:
            steps.append(_observation(store, max(iteration, 1), event))
    steps.append({"iteration": max(iteration, 1), "type": "answer", "content": answer or ""})

    goal = manifest.goal or ""
    task = goal or str(inputs.get("question") or inputs.get("prompt") or "")
    tags = manifest.tags
    return {
        "format": FORMAT,
        "run_id": run_id,
        "experiment": tags.get("experiment") or tags.get("kind") or "rar",
        "title": goal or task or run_id,
        "model": _manifest_model(manifest.models) or first_llm_model,
        "task": task,
        "condition": _condition(manifest.config, inputs),
        "outcome": _outcome(manifest.status.value, finished, result, answer),
        "tags": [f"{key}:{value}" for key, value in sorted(tags.items())],
        "recorded_at": manifest.created_at,
        "steps": steps,
    }


def dumps(doc: dict[str, Any]) -> str:
    """The document as indented JSON text (UTF-8, keys in document order, final newline)."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --- schema and validation -----------------------------------------------------------------------


@cache
def _schema_text() -> str:
    return resources.files("rar.export").joinpath(SCHEMA_NAME).read_text(encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a trajectory document (a fresh copy)."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


def check_steps(doc: dict[str, Any]) -> list[str]:
    """Problems the schema cannot express: one ``answer`` step, last; iterations non-decreasing."""
    problems: list[str] = []
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        return ["steps: there must be at least one step (the answer)"]
    kinds = [step.get("type") if isinstance(step, dict) else None for step in steps]
    answers = kinds.count("answer")
    if answers != 1:
        problems.append(f"steps: exactly one answer step is required, found {answers}")
    if kinds[-1] != "answer":
        problems.append("steps: the last step must be the answer")
    previous = 0
    for number, step in enumerate(steps):
        value = step.get("iteration") if isinstance(step, dict) else None
        if isinstance(value, int) and value < previous:
            problems.append(f"steps[{number}]: iteration {value} comes after {previous}")
        if isinstance(value, int):
            previous = max(previous, value)
    return problems


def validate(doc: dict[str, Any]) -> None:
    """Raise :class:`TrajectoryError` unless ``doc`` matches the schema and the step rules.

    Needs the ``jsonschema`` package (not a runtime dependency of RAR).
    """
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - depends on the environment
        raise TrajectoryError(
            "validating a trajectory needs the jsonschema package: pip install jsonschema"
        ) from None
    validator = jsonschema.Draft202012Validator(load_schema())
    problems = [
        f"{'/'.join(str(part) for part in error.absolute_path) or '$'}: {error.message}"
        for error in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    ]
    problems += check_steps(doc)
    if problems:
        raise TrajectoryError(
            "the trajectory is not valid: " + "; ".join(problems), problems=problems
        )


# --- mapping -------------------------------------------------------------------------------------


def _resolve(store: Store, ref: Any) -> Any:
    return store.resolve_payload(ref) if isinstance(ref, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _llm_steps(iteration: int, response: dict[str, Any]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    content, reasoning = _text(response.get("content")), _text(response.get("reasoning"))
    if content or reasoning:
        thought: dict[str, Any] = {
            "iteration": iteration,
            "type": "thought",
            "content": content or reasoning,
        }
        if content and reasoning:
            thought["reasoning"] = reasoning
        steps.append(thought)
    for call in response.get("tool_calls") or []:
        action: dict[str, Any] = {
            "iteration": iteration,
            "type": "action",
            "tool": str(call.get("name", "")),
            "args": _arguments(call.get("arguments")),
        }
        if isinstance(call.get("id"), str):
            action["call_id"] = call["id"]
        steps.append(action)
    return steps


def _arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments as an object; text that is not a JSON object is kept as ``_raw``."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    try:
        value = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError):
        return {"_raw": str(raw)}
    return value if isinstance(value, dict) else {"_raw": str(raw)}


def _observation(store: Store, iteration: int, event: dict[str, Any]) -> dict[str, Any]:
    request = _resolve(store, event.get("request")) or {}
    step: dict[str, Any] = {
        "iteration": iteration,
        "type": "observation",
        "tool": str(request.get("name", "")),
    }
    error = event.get("error")
    if isinstance(error, dict):  # the effect itself raised
        step["content"] = str(error.get("message") or error.get("type") or "error")
        step["ok"] = False
    else:
        result = _resolve(store, event.get("result"))
        step["content"], step["ok"] = _tool_content(result)
    if isinstance(request.get("call_id"), str):
        step["call_id"] = request["call_id"]
    return step


def _tool_content(result: Any) -> tuple[str, bool]:
    """The text a tool result showed the model, and whether the call succeeded."""
    if not isinstance(result, dict):
        return ("" if result is None else _json_text(result)), True
    ok = result.get("ok") is not False and "error" not in result
    if isinstance(result.get("content"), str):
        return result["content"], ok
    if "value" in result:
        return _json_text(result["value"]), ok
    error = result.get("error")
    if isinstance(error, dict) and "message" in error:
        return str(error["message"]), False
    return _json_text(result), ok


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _answer_text(result: Any) -> str | None:
    """The run's final answer: ``answer`` or ``text`` of its result, a string result, else JSON."""
    if result is None:
        return None
    if isinstance(result, dict):
        for key in ("answer", "text"):
            if isinstance(result.get(key), str):
                return str(result[key])
        return _json_text(result) if result else None
    if isinstance(result, str):
        return result
    return _json_text(result)


def _manifest_model(models: list[dict[str, Any]]) -> str:
    for entry in models:
        provider, model = entry.get("provider"), entry.get("model")
        if provider and model:
            return f"{provider}:{model}"
        if model or provider:
            return str(model or provider)
    return ""


def _llm_model(request: dict[str, Any]) -> str:
    provider = request.get("provider") or ""
    body = request.get("request")
    model = body.get("model") if isinstance(body, dict) else None
    if provider and model:
        return f"{provider}:{model}"
    return str(model or provider)


def _condition(config: dict[str, Any], inputs: dict[str, Any]) -> str:
    """``key=value`` pairs of the run's config and a few telling inputs, sorted by key."""
    pairs: dict[str, Any] = {k: v for k, v in config.items() if k not in _CONDITION_SKIP}
    for name in _CONDITION_INPUTS:
        if name in inputs and name not in pairs and inputs[name] is not None:
            pairs[name] = inputs[name]
    return " ".join(
        f"{key}={_condition_value(value)}"
        for key, value in sorted(pairs.items())
        if isinstance(value, (str, int, float, bool))
    )


def _condition_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _outcome(status: str, finished: dict[str, Any] | None, result: Any, answer: str | None) -> str:
    """success | failure | loop | timeout (the rules are in docs/trajectory.md)."""
    if status == "waiting":
        return "timeout"
    if status == "failed":
        error = (finished or {}).get("error") or {}
        return "timeout" if _is_timeout(error) else "failure"
    if finished is None or status not in ("completed", "completed_with_warnings"):
        return "failure"  # never finished: crashed, or still being written
    if _hit_step_limit(result):
        return "loop"
    return "success" if answer else "failure"


def _is_timeout(error: dict[str, Any]) -> bool:
    name = str(error.get("type", ""))
    return "timeout" in name.lower() or name == "TimeoutExpired"


def _hit_step_limit(result: Any) -> bool:
    if not isinstance(result, dict):
        return False
    if result.get("stop_reason") == "max_steps":
        return True
    warnings = result.get("warnings")
    return isinstance(warnings, list) and any(
        isinstance(w, str) and w in _STEP_LIMIT_WARNINGS for w in warnings
    )
