"""Tools: schemas from hints and docstrings, execution with failures as values, recording."""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import pydantic
import pytest

from rar.llm.types import ToolCall, ToolSpec
from rar.redaction import Redactor
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.tools import (
    Tool,
    ToolDefinitionError,
    ToolRegistry,
    ToolResult,
    UnknownToolError,
    calculator,
    default_tools,
    http_get,
    tool,
)
from rar.tools.builtins import evaluate


def _call(name: str, arguments: Any = None, *, call_id: str = "c1") -> ToolCall:
    text = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
    return ToolCall(id=call_id, name=name, arguments=text)


def _record(tmp_path: Path, redactor: Redactor | None = None) -> Run:
    return record("tools", store=tmp_path / "runs", redactor=redactor or Redactor(env={}), seed=1)


def _effects(run: Run) -> list[dict[str, Any]]:
    return [e for e in run.store.events(run.id) if e["type"] == "effect"]


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number,
            written on two lines.
    """
    return a + b


@tool
def fail(reason: str) -> str:
    """Always fails."""
    raise LookupError(f"nothing found for {reason}")


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(pydantic.BaseModel):
    x: float
    y: float = 0.0


# --- schema derivation ---------------------------------------------------------------------------


def test_name_and_description_come_from_the_function_and_its_docstring_summary() -> None:
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert add.version == "1" and add.timeout is None


def test_types_become_json_schema_types_and_defaults_make_arguments_optional() -> None:
    @tool
    def f(text: str, count: int, ratio: float, flag: bool = False, limit: int = 5) -> None:
        """F."""

    props = f.parameters["properties"]
    assert [props[k]["type"] for k in props] == [
        "string",
        "integer",
        "number",
        "boolean",
        "integer",
    ]
    assert f.parameters["required"] == ["text", "count", "ratio"]
    assert props["limit"]["default"] == 5
    assert f.parameters["type"] == "object" and f.parameters["additionalProperties"] is False
    assert "title" not in f.parameters and all("title" not in p for p in props.values())


def test_an_optional_argument_with_none_default_is_nullable_and_not_required() -> None:
    @tool
    def f(query: str, page: int | None = None) -> None:
        """F."""

    assert f.parameters["required"] == ["query"]
    assert {"type": "null"} in f.parameters["properties"]["page"]["anyOf"]


def test_docstring_args_section_describes_each_argument_including_continuation_lines() -> None:
    props = add.parameters["properties"]
    assert props["a"]["description"] == "the first number."
    assert props["b"]["description"] == "the second number, written on two lines."
    assert "Args" not in add.description


def _numpy_style(symbol: str, limit: int = 5) -> list[str]:
    """Find compounds whose formula contains an element.

    Looks in the packaged table.

    Parameters
    ----------
    symbol : str
        the element symbol,
        such as "Fe".
    limit : int, optional
        at most this many results.

    Returns
    -------
    list of str
        the formulas.

    Notes
    -----
    The table is small.
    """
    return []


def _sphinx_style(symbol: str, limit: int = 5) -> list[str]:
    """Find compounds whose formula contains an element.

    Looks in the packaged table.

    :param symbol: the element symbol,
        such as "Fe".
    :type symbol: str
    :param int limit: at most this many results.
    :returns: the formulas.
    :rtype: list[str]
    :raises KeyError: for an unknown symbol.
    """
    return []


def _google_style(symbol: str, limit: int = 5) -> list[str]:
    """Find compounds whose formula contains an element.

    Looks in the packaged table.

    Args:
        symbol (str): the element symbol,
            such as "Fe".
        limit: at most this many results.

    Returns:
        the formulas.

    Raises:
        KeyError: for an unknown symbol.

    Examples:
        >>> lookup("Fe")
    """
    return []


def _epydoc_style(symbol: str, limit: int = 5) -> list[str]:
    """Find compounds whose formula contains an element.

    Looks in the packaged table.

    @param symbol: the element symbol,
        such as "Fe".
    @param limit: at most this many results.
    @return: the formulas.
    """
    return []


@pytest.mark.parametrize(
    "function",
    [_google_style, _numpy_style, _sphinx_style, _epydoc_style],
    ids=lambda f: f.__name__,
)
def test_docstring_sections_of_every_style_describe_the_arguments_not_the_tool(
    function: Any,
) -> None:
    made = tool(name="lookup")(function)
    assert made.description == (
        "Find compounds whose formula contains an element.\n\nLooks in the packaged table."
    )
    props = made.parameters["properties"]
    assert props["symbol"]["description"] == 'the element symbol, such as "Fe".'
    assert props["limit"]["description"] == "at most this many results."


def test_a_google_argument_described_in_two_paragraphs_keeps_both() -> None:
    @tool
    def f(x: int, y: int) -> None:
        """Summary.

        Args:
            x: the x.

                More about x.
            y: the y.

        Returns:
            nothing.
        """

    assert f.description == "Summary."
    props = f.parameters["properties"]
    assert props["x"]["description"] == "the x. More about x."
    assert props["y"]["description"] == "the y."


def test_a_docstring_that_opens_with_its_arguments_has_no_description() -> None:
    @tool
    def f(x: int) -> None:
        """Args:
        x: the x.
        """

    assert f.description == ""
    assert f.parameters["properties"]["x"]["description"] == "the x."


def test_a_field_default_keeps_its_description_and_default() -> None:
    @tool
    def f(n: int = pydantic.Field(3, description="from Field")) -> int:
        """F.

        Args:
            n: from the docstring.
        """
        return n

    assert f.parameters["properties"]["n"] == {
        "default": 3,
        "description": "from Field",
        "type": "integer",
    }
    assert ToolRegistry([f]).execute(_call("f")).value == 3


def test_annotated_field_description_wins_over_the_docstring() -> None:
    @tool
    def f(n: Annotated[int, pydantic.Field(description="from Field", ge=0)]) -> None:
        """F.

        Args:
            n: from the docstring.
        """

    assert f.parameters["properties"]["n"]["description"] == "from Field"
    assert f.parameters["properties"]["n"]["minimum"] == 0


def test_a_nested_pydantic_model_argument_is_described_and_arrives_as_an_instance() -> None:
    seen: list[Any] = []

    @tool
    def plot(point: Point) -> str:
        """Plot a point."""
        seen.append(point)
        return "ok"

    ref = plot.parameters["properties"]["point"]["$ref"]
    assert ref == "#/$defs/Point"
    assert plot.parameters["$defs"]["Point"]["required"] == ["x"]
    ToolRegistry([plot]).execute(_call("plot", {"point": {"x": 1.5}}))
    assert seen == [Point(x=1.5, y=0.0)]


def test_list_enum_and_literal_arguments_have_their_schema() -> None:
    @tool
    def f(tags: list[str], color: Color, mode: Literal["fast", "exact"] = "fast") -> None:
        """F."""

    props = f.parameters["properties"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert f.parameters["$defs"]["Color"]["enum"] == ["red", "blue"]
    assert props["mode"]["enum"] == ["fast", "exact"] and props["mode"]["default"] == "fast"


def test_decorator_options_set_name_version_timeout_and_description() -> None:
    @tool(name="renamed", version=3, timeout=1.5, description="custom")
    def f() -> None:
        """Ignored."""

    assert (f.name, f.version, f.timeout, f.description) == ("renamed", "3", 1.5, "custom")
    assert f.spec == ToolSpec(name="renamed", description="custom", parameters=f.parameters)


def test_calling_a_tool_runs_the_function_directly() -> None:
    assert add(1) == 3 and add(a=1, b=5) == 6
    assert isinstance(add, Tool) and add.__name__ == "add"


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def f(*args): pass", "*args"),
        ("def f(**kw): pass", "**kw"),
        ("def f(_hidden: int): pass", "'_hidden'"),
    ],
)
def test_signatures_a_model_cannot_call_are_refused(source: str, fragment: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError, match=fragment.replace("*", r"\*")):
        tool(namespace["f"])


def test_an_invalid_tool_name_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="1-64 letters"):
        tool(name="has space")(lambda: None)


# --- registry ------------------------------------------------------------------------------------


def test_registering_two_tools_of_the_same_name_is_a_clear_error() -> None:
    registry = ToolRegistry([add])
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(tool(name="add")(lambda a: a))


def test_specs_keep_registration_order_and_get_names_the_known_tools() -> None:
    registry = ToolRegistry([fail, add])
    assert [s.name for s in registry.specs()] == ["fail", "add"]
    assert registry.get("add") is add and "add" in registry and len(registry) == 2
    with pytest.raises(UnknownToolError, match="fail, add"):
        registry.get("nope")


def test_default_tools_hold_the_calculator_and_http_get() -> None:
    registry = default_tools()
    assert registry.names == ["calculator", "http_get"]
    assert registry.get("calculator") is calculator and registry.get("http_get") is http_get
    assert registry.manifest() == [
        {"name": "calculator", "version": "1"},
        {"name": "http_get", "version": "1"},
    ]


# --- execution: results and failures as values ----------------------------------------------------


def test_a_successful_call_returns_the_value_and_json_content() -> None:
    result = ToolRegistry([add]).execute(_call("add", {"a": 40}))
    assert result == ToolResult(call_id="c1", name="add", ok=True, content="42", value=42)
    message = result.message()
    assert (message.role, message.tool_call_id, message.name) == ("tool", "c1", "add")
    assert message.content == "42" and message.is_error is False


def test_a_string_result_is_the_content_as_is_and_structures_are_json() -> None:
    @tool
    def echo(text: str) -> Any:
        """Echo."""
        return text if text != "dict" else {"text": text, "n": (1, 2)}

    registry = ToolRegistry([echo])
    assert registry.execute(_call("echo", {"text": "hello"})).content == "hello"
    structured = registry.execute(_call("echo", {"text": "dict"}))
    assert structured.value == {"text": "dict", "n": [1, 2]}
    assert orjson.loads(structured.content) == structured.value


def test_invalid_arguments_are_an_error_value_listing_every_bad_field() -> None:
    result = ToolRegistry([add]).execute(_call("add", {"b": "many", "c": 1}))
    assert not result.ok and result.value is None
    assert result.error is not None and result.error["type"] == "InvalidArgumentsError"
    for field in ("a: Field required", "b: Input should be a valid integer", "c: Extra inputs"):
        assert field in result.error["message"]


def test_an_unknown_tool_is_an_error_value_naming_the_known_tools() -> None:
    result = ToolRegistry([add, fail]).execute(_call("ad"))
    assert result.error == {
        "type": "UnknownToolError",
        "message": "there is no tool 'ad'; the available tools are: add, fail",
    }


def test_arguments_that_are_not_json_are_an_error_value() -> None:
    result = ToolRegistry([add]).execute(_call("add", '{"a": 1'))
    assert result.error is not None and result.error["type"] == "InvalidArgumentsError"
    assert "not valid JSON" in result.error["message"]


def test_arguments_that_are_not_an_object_are_an_error_value() -> None:
    result = ToolRegistry([add]).execute(_call("add", "[1, 2]"))
    assert result.error is not None and "must be a JSON object, got list" in result.error["message"]


def test_an_exception_from_the_tool_is_an_error_value_with_its_type() -> None:
    result = ToolRegistry([fail]).execute(_call("fail", {"reason": "x"}))
    assert result.error == {"type": "LookupError", "message": "nothing found for x"}
    assert result.content == "Error: LookupError: nothing found for x"
    assert result.message().is_error is True


def test_a_result_that_is_not_json_is_an_error_value() -> None:
    @tool
    def nan() -> float:
        """NaN."""
        return float("nan")

    result = ToolRegistry([nan]).execute(_call("nan"))
    assert result.error is not None and result.error["type"] == "InvalidResultError"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("nope", {}), ("add", "{oops"), ("add", "3"), ("add", {"a": "x"}), ("fail", {"reason": "r"})],
)
def test_every_failure_reaches_the_model_as_text_starting_with_error(
    name: str, arguments: Any
) -> None:
    result = ToolRegistry([add, fail]).execute(_call(name, arguments))
    assert not result.ok and result.error is not None
    assert result.content.startswith("Error: ")
    assert result.message().content == result.content


def test_an_async_tool_runs_from_execute_and_aexecute() -> None:
    @tool
    async def double(n: int) -> int:
        """Double."""
        await asyncio.sleep(0)
        return 2 * n

    registry = ToolRegistry([double])
    assert double.is_async
    assert registry.execute(_call("double", {"n": 4})).value == 8
    assert asyncio.run(registry.aexecute(_call("double", {"n": 5}))).value == 10


def test_an_async_tool_runs_from_sync_execute_inside_a_running_event_loop() -> None:
    @tool
    async def one() -> int:
        """One."""
        return 1

    async def main() -> ToolResult:
        return ToolRegistry([one]).execute(_call("one"))  # sync API called from async code

    assert asyncio.run(main()).value == 1


def test_a_sync_tool_called_from_aexecute_runs_in_a_worker_thread() -> None:
    @tool
    def where() -> str:
        """Thread name."""
        return threading.current_thread().name

    result = asyncio.run(ToolRegistry([where]).aexecute(_call("where")))
    assert result.ok and result.value != threading.main_thread().name


@tool(timeout=0.1)
def slow_sync(seconds: float) -> str:
    """Sleep."""
    time.sleep(seconds)
    return "done"


@tool(timeout=0.1)
async def slow_async(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "done"


def _assert_timed_out(result: ToolResult, started: float) -> None:
    assert time.perf_counter() - started < 0.28
    assert not result.ok and result.error is not None
    assert result.error["type"] == "TimeoutError"
    assert "time limit of 0.1 s" in result.error["message"]
    assert result.content.startswith("Error: TimeoutError")


@pytest.mark.parametrize("slow", [slow_sync, slow_async], ids=["sync", "async"])
def test_a_tool_over_its_time_limit_is_a_timeout_error_value(slow: Tool) -> None:
    started = time.perf_counter()
    _assert_timed_out(ToolRegistry([slow]).execute(_call(slow.name, {"seconds": 0.3})), started)


@pytest.mark.parametrize("slow", [slow_sync, slow_async], ids=["sync", "async"])
def test_a_tool_over_its_time_limit_is_a_timeout_error_value_from_aexecute(slow: Tool) -> None:
    started = time.perf_counter()
    result = asyncio.run(ToolRegistry([slow]).aexecute(_call(slow.name, {"seconds": 0.3})))
    _assert_timed_out(result, started)


def test_a_tool_within_its_time_limit_returns_normally() -> None:
    assert ToolRegistry([slow_sync]).execute(_call("slow_sync", {"seconds": 0.01})).value == "done"


# --- recording -----------------------------------------------------------------------------------


def test_a_recorded_call_is_one_tool_effect_with_name_version_args_and_result(
    tmp_path: Path,
) -> None:
    with _record(tmp_path) as run:
        result = ToolRegistry([add]).execute(_call("add", {"a": 1}, call_id="k"), run=run)
    [event] = _effects(run)
    assert event["kind"] == "tool" and "error" not in event
    request = run.store.resolve_payload(event["request"])
    assert request == {"name": "add", "version": "1", "args": {"a": 1}, "call_id": "k"}
    assert run.store.resolve_payload(event["result"]) == {"ok": True, "value": 3, "content": "3"}
    assert result.value == 3


def test_a_failing_tool_is_recorded_as_an_error_value_not_an_effect_error(tmp_path: Path) -> None:
    with _record(tmp_path) as run:
        result = ToolRegistry([fail]).execute(_call("fail", {"reason": "r"}), run=run)
    [event] = _effects(run)
    assert "error" not in event
    recorded = run.store.resolve_payload(event["result"])
    assert recorded["ok"] is False
    assert recorded["error"] == {"type": "LookupError", "message": "nothing found for r"}
    assert recorded["content"] == result.content and not result.ok


def test_unknown_tools_and_unparsable_arguments_are_recorded_with_the_raw_text(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry([add])
    with _record(tmp_path) as run:
        registry.execute(_call("nope", {"a": 1}), run=run)
        registry.execute(_call("add", "{broken"), run=run)
    first, second = (run.store.resolve_payload(e["request"]) for e in _effects(run))
    assert first == {"name": "nope", "version": None, "args": {"a": 1}, "call_id": "c1"}
    assert second["args"] == "{broken"
    results = [run.store.resolve_payload(e["result"]) for e in _effects(run)]
    assert [r["error"]["type"] for r in results] == ["UnknownToolError", "InvalidArgumentsError"]


def test_the_result_handed_back_is_the_redacted_recorded_value(tmp_path: Path) -> None:
    @tool
    def leak() -> str:
        """Leak."""
        return "the password is hunter2-very-secret"

    redactor = Redactor(env={}, extra_secrets=["hunter2-very-secret"])
    with _record(tmp_path, redactor) as run:
        result = ToolRegistry([leak]).execute(_call("leak"), run=run)
    assert "hunter2" not in result.content and "REDACTED" in result.content
    assert run.store.resolve_payload(_effects(run)[0]["result"])["content"] == result.content


def test_an_async_recorded_call_goes_through_aeffect(tmp_path: Path) -> None:
    async def main(run: Run) -> ToolResult:
        return await ToolRegistry([slow_async]).aexecute(
            _call("slow_async", {"seconds": 0.3}), run=run
        )

    with _record(tmp_path) as run:
        result = asyncio.run(main(run))
    [event] = _effects(run)
    assert "error" not in event
    assert run.store.resolve_payload(event["result"])["error"]["type"] == "TimeoutError"
    assert result.error is not None and result.error["type"] == "TimeoutError"


# --- several calls -------------------------------------------------------------------------------


@tool
async def nap(label: str, seconds: float) -> str:
    """Sleep, then answer the label."""
    await asyncio.sleep(seconds)
    return label


def _naps(delays: list[float]) -> list[ToolCall]:
    return [
        _call("nap", {"label": f"n{i}", "seconds": d}, call_id=f"id{i}")
        for i, d in enumerate(delays)
    ]


def test_execute_all_returns_results_in_call_order_each_in_its_own_span(tmp_path: Path) -> None:
    calls = [_call("add", {"a": i}, call_id=f"id{i}") for i in range(3)]
    with _record(tmp_path) as run:
        results = ToolRegistry([add]).execute_all(calls, run=run)
    assert [r.value for r in results] == [2, 3, 4]
    assert [r.call_id for r in results] == ["id0", "id1", "id2"]
    assert [e["span"] for e in _effects(run)] == ["run/tool-0", "run/tool-1", "run/tool-2"]


def test_aexecute_all_runs_calls_concurrently_and_keeps_their_order() -> None:
    started = time.perf_counter()
    results = asyncio.run(ToolRegistry([nap]).aexecute_all(_naps([0.15, 0.1, 0.05])))
    assert time.perf_counter() - started < 0.28
    assert [r.value for r in results] == ["n0", "n1", "n2"]


def _by_call(run: Run) -> dict[str, tuple[str, int, Any]]:
    """call id -> (span, ordinal, recorded result) of every tool effect."""
    out = {}
    for event in _effects(run):
        request = run.store.resolve_payload(event["request"])
        result = run.store.resolve_payload(event["result"])
        out[request["call_id"]] = (event["span"], event["ordinal"], result)
    return out


def test_aexecute_all_records_the_same_spans_whatever_finishes_first(tmp_path: Path) -> None:
    registry = ToolRegistry([nap])
    records = []
    for delays in ([0.15, 0.1, 0.05], [0.01, 0.05, 0.1]):  # finishing in reverse, then in order
        with _record(tmp_path) as run:
            results = asyncio.run(registry.aexecute_all(_naps(delays), run=run))
        assert [r.value for r in results] == ["n0", "n1", "n2"]
        records.append(run)
    reverse, in_order = records
    assert [e["span"] for e in _effects(reverse)] == ["run/tool-2", "run/tool-1", "run/tool-0"]
    assert [e["span"] for e in _effects(in_order)] == ["run/tool-0", "run/tool-1", "run/tool-2"]
    assert (
        _by_call(reverse)
        == _by_call(in_order)
        == {
            f"id{i}": (f"run/tool-{i}", 0, {"ok": True, "value": f"n{i}", "content": f"n{i}"})
            for i in range(3)
        }
    )


# --- the calculator ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-(3)", -3),
        ("+4", 4),
        ("sqrt(16) + abs(-2)", 6.0),
        ("log(e)", 1.0),
        ("log(8, 2)", 3.0),
        ("log10(1000)", 3.0),
        ("exp(0) + sin(0) + cos(0) + tan(0)", 2.0),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("min(3, 1, 2) + max(4, 5)", 6),
        ("pi", 3.141592653589793),
        ("1.5e3", 1500.0),
    ],
)
def test_the_calculator_evaluates_arithmetic(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected)
    assert type(evaluate(expression)) is type(expected)


def test_the_calculator_tool_answers_the_demo_question() -> None:
    result = default_tools().execute(
        _call("calculator", {"expression": "8.314 * log(4) / (1/300 - 1/320) / 1000"})
    )
    assert result.ok and result.value == pytest.approx(55.323, abs=1e-3)


def test_integers_beyond_the_json_safe_range_come_back_as_floats() -> None:
    assert evaluate("2 ** 60") == float(2**60) and isinstance(evaluate("2 ** 60"), float)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("__import__('os')", "the function '__import__' is not allowed"),
        ("().__class__", "attribute access (.__class__) is not allowed"),
        ("(1).real", "attribute access (.real) is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("lambda: 1", "lambda expressions are not allowed"),
        ("9 ** 9 ** 9", "is too large"),
        ("10 ** 100000", "is too large"),
        ("2.0 ** 100000", "is too large"),
        ("'a' * 3", "'a' is not a number"),
        ("1 < 2", "comparisons are not allowed"),
        ("2 ^ 3", "write powers with '**'"),
        ("1 / 0", "division by zero"),
        ("sqrt(-1)", "undefined"),
        ("(-8) ** 0.5", "not a real number"),
        ("1e308 * 10", "too large"),
        ("log", "is a function"),
        ("max()", "takes 1 to any number of argument(s), got 0"),
        ("sqrt(4, 2)", "takes 1 argument(s), got 2"),
        ("1 +", "not a valid arithmetic expression"),
        ("   ", "the expression is empty"),
        ("1+" * 600 + "1", "at most 1000 characters"),
        ("-" * 70 + "1", "nested more than"),
    ],
)
def test_the_calculator_refuses_with_a_clear_message(expression: str, fragment: str) -> None:
    result = ToolRegistry([calculator]).execute(_call("calculator", {"expression": expression}))
    assert not result.ok and result.error is not None
    assert fragment in result.error["message"]


def test_a_huge_exponent_is_refused_before_it_is_computed() -> None:
    started = time.perf_counter()
    with pytest.raises(Exception, match="too large"):
        evaluate("9 ** 9 ** 9")
    assert time.perf_counter() - started < 0.1
