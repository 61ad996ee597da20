"""Graders: does an answer do what was asked? (lm-lib's ``Grader2``, ``AnswerGrader2`` and
``AnswerGraderBinary``).

**Stand-alone.** :func:`grade_binary` (and :func:`agrade_binary`, its async form) asks the
model ``votes`` times, independently, whether a text satisfies a requirement, and lets the
majority decide::

    grade = grade_binary("Does the text name a price?", text, model="openai:gpt-4o-mini")
    grade.passed, grade.votes, grade.reasons, grade.requests

Each vote answers ``{"passed": true|false, "reason": "..."}`` (parsed leniently, JSON5). The
majority wins; **a tie fails** (with an even number of votes, half is not a majority), so an
odd number is recommended. Every vote's prompt says ``Assessment k of N``: RAR's response
cache is keyed on the request, so N identical requests would be one cached answer served N
times — numbering the assessments makes them N requests and N real opinions. A vote whose
answer cannot be parsed is asked once more (with a repair instruction); if that fails too it
counts as a failed vote, its reason saying why. With a ``run``, the votes run concurrently,
each one a recorded ``llm`` effect in a span of its own (``grade/vote``, ``grade/vote#2``,
...), numbered in the order they are asked, so a replay serves every vote its own answer.

**In a flow.** :class:`AnswerGrader` (a rating 0–100, passing above ``threshold``) and
:class:`BinaryAnswerGrader` (passed or not) are agents. They read ``qaQuestion``,
``qaAnswer`` (lists as text), ``qaOutputDescription`` (default true; false asks for the grade
alone, which is shorter to ask for and to answer) and ``qaFeedbackLoopDestination``; they
write ``qaRating`` (:class:`AnswerGrader`), ``qaPassed``, ``qaExplanation`` and
``qaAttempts``, and add ``✓`` or ``✗`` to the graph. A failed grade, with fewer than
``max_attempts`` grades made and a destination set, writes ``qaFeedback`` (the grader's
explanation and the previous answer) and walks back to the destination, which writes the
answer again; :func:`feedback_loop` makes an agent such a destination::

    writer = feedback_loop(Agent("Writer", AgentType.COMPLETION, template=
        "Explain recursion.\\n\\n{{qaFeedback}}", handler=TextHandler("answer"),
        choose_next="AnswerGrader"), answer_key="answer")
    flow = Flow([writer, AnswerGrader()], model=...)
    flow.walk("Writer", {"qaQuestion": ["Explain recursion."]})
    # M, Writer, →, M, AnswerGrader, ✗, →, M, Writer, →, M, AnswerGrader, ✓
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from rar.errors import ConfigError
from rar.flow.agent import BaseAgent
from rar.flow.context import AgentType, FlowContext, Next
from rar.flow.handlers import HandlerError, parse_json_object
from rar.llm.types import Message, Response
from rar.runtime.run import Run

# context keys (lm-lib's names)
QUESTION = "qaQuestion"
ANSWER = "qaAnswer"
OUTPUT_DESCRIPTION = "qaOutputDescription"
DESTINATION = "qaFeedbackLoopDestination"
RATING = "qaRating"
PASSED = "qaPassed"
EXPLANATION = "qaExplanation"
ATTEMPTS = "qaAttempts"
FEEDBACK = "qaFeedback"
GRADE_FORMAT = "qaGradeFormat"  # the answer format the grader asks for (set in pre_process)


class GraderError(ConfigError):
    """A grader was used wrongly: no question or answer in the context, a bad vote count."""


# --- the stand-alone majority vote -----------------------------------------------------------

VOTE_SYSTEM = (
    "You are a careful, strict assessor. You decide whether a text satisfies a requirement, "
    "judging only by what the text says."
)
VOTE_PROMPT = """\
Assessment {index} of {total}. Judge on your own; the other assessments are made separately.

Decide whether the text below satisfies this requirement:
{question}

Text:
<<<
{text}
>>>

Answer with only a JSON object: {{"passed": true or false, "reason": "<one sentence>"}}"""
VOTE_REPAIR = (
    "Your previous answer could not be used ({problem}). Answer again with only one JSON "
    'object, nothing before or after it: {{"passed": true or false, "reason": "<one sentence>"}}'
)


@dataclass
class BinaryGrade:
    """The outcome of a majority vote: ``passed`` when more than half the votes passed."""

    passed: bool
    votes: list[bool] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    requests: int = 0  # model calls made, repair attempts included

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "votes": list(self.votes),
            "reasons": list(self.reasons),
            "requests": self.requests,
        }


def grade_binary(
    question: str,
    text: str,
    *,
    model: Any,
    votes: int = 3,
    run: Run | None = None,
    profiles: Any = None,
) -> BinaryGrade:
    """Whether ``text`` satisfies ``question``, by a majority of ``votes`` independent model
    calls (a tie fails; see the module's docstring). ``model`` is a model spec (a profile name,
    ``provider:model``, a profile, a provider) or a :class:`~rar.llm.client.Client`; with
    ``run`` (or a client recording into one) each vote is a recorded effect in its own span.
    From async code, use :func:`agrade_binary`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(
            agrade_binary(question, text, model=model, votes=votes, run=run, profiles=profiles)
        )
    raise GraderError(
        "grade_binary() was called inside a running event loop: await agrade_binary()"
    )


async def agrade_binary(
    question: str,
    text: str,
    *,
    model: Any,
    votes: int = 3,
    run: Run | None = None,
    profiles: Any = None,
) -> BinaryGrade:
    """The async form of :func:`grade_binary`: the votes are asked concurrently."""
    if isinstance(votes, bool) or not isinstance(votes, int) or votes < 1:
        raise GraderError(
            f"votes must be a whole number of at least 1 (odd is best), not {votes!r}"
        )
    client, run = _vote_client(model, run, profiles)

    async def one(index: int) -> tuple[bool, str, int]:
        # the span is opened before the first await, so the votes are numbered in order
        with _span(run, "vote", vote=index, of=votes):
            return await _vote(client, question, text, index, votes)

    with _span(run, "grade", votes=votes):
        outcomes = await asyncio.gather(*(one(index) for index in range(1, votes + 1)))
    ballots = [passed for passed, _, _ in outcomes]
    return BinaryGrade(
        passed=2 * sum(ballots) > len(ballots),
        votes=ballots,
        reasons=[reason for _, reason, _ in outcomes],
        requests=sum(requests for _, _, requests in outcomes),
    )


async def _vote(
    client: Any, question: str, text: str, index: int, total: int
) -> tuple[bool, str, int]:
    """One vote: (passed, reason, requests made)."""
    prompt = VOTE_PROMPT.format(index=index, total=total, question=question, text=text)
    messages = [Message.system(VOTE_SYSTEM), Message.user(prompt)]
    response = await client.acomplete(messages=messages)
    try:
        return (*_parse_vote(response), 1)
    except HandlerError as exc:
        problem = str(exc)
    messages = [*messages, response.message, Message.user(VOTE_REPAIR.format(problem=problem))]
    response = await client.acomplete(messages=messages)
    try:
        return (*_parse_vote(response), 2)
    except HandlerError as exc:
        return False, f"no usable vote after a repair attempt ({exc}); counted as failed", 2


def _parse_vote(response: Response) -> tuple[bool, str]:
    parsed = parse_json_object(response.content or "")
    if "passed" not in parsed:
        raise HandlerError("the object has no 'passed'")
    return _boolean(parsed["passed"], "passed"), str(parsed.get("reason") or "")


def _vote_client(model: Any, run: Run | None, profiles: Any) -> tuple[Any, Run | None]:
    from rar.llm.client import Client

    if isinstance(model, Client):
        if run is not None and model.run is not run:
            raise GraderError(
                "the client records into another run than the one given (or into none); pass "
                "the run to the client, or a model spec and the run"
            )
        return model, model.run
    if model is None:
        raise GraderError("grade_binary needs model=: a model spec or a Client")
    return Client(model, run=run, profiles=profiles), run


def _span(run: Run | None, name: str, **attributes: Any) -> AbstractContextManager[Any]:
    return nullcontext() if run is None else run.span(name, **attributes)


# --- the agent graders -----------------------------------------------------------------------

GRADER_SYSTEM = (
    "You are a strict, fair grader. You judge whether an answer resolves a question: whether "
    "it is correct, complete and to the point. You answer in JSON only."
)
RATING_TEMPLATE = """\
Rate how well the answer below resolves the question, from 0 (not at all) to 100 (completely \
and correctly).

Question:
{{qaQuestion}}

Answer:
{{qaAnswer}}

{{qaGradeFormat}}"""
BINARY_TEMPLATE = """\
Decide whether the answer below is a successful resolution of the question.

Question:
{{qaQuestion}}

Answer:
{{qaAnswer}}

{{qaGradeFormat}}"""
RATING_FORMAT = (
    'Answer with only a JSON object: {"rating": <a whole number from 0 to 100>, '
    '"explanation": "<what is right or wrong in the answer, and what would improve it>"}'
)
RATING_FORMAT_SHORT = 'Answer with only a JSON object: {"rating": <a whole number from 0 to 100>}'
BINARY_FORMAT = (
    'Answer with only a JSON object: {"passed": true or false, '
    '"explanation": "<why, and what the answer would need to pass>"}'
)
BINARY_FORMAT_SHORT = 'Answer with only a JSON object: {"passed": true or false}'
GRADE_REPAIR = (
    "Your previous answer could not be used as a grade ({problem}). Answer again with only one "
    "JSON object, nothing before or after it. {format}"
)


class _Grader(BaseAgent):
    """What both agent graders share: the context keys, the attempts and the feedback loop."""

    agent_type = AgentType.COMPLETION
    system_prompt = GRADER_SYSTEM
    formats: tuple[str, str] = ("", "")  # (with an explanation, without)

    def __init__(self, name: str, *, model: Any, next_agent: str | None, max_attempts: int) -> None:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise GraderError(f"max_attempts must be at least 1, not {max_attempts!r}")
        self.name = name
        self.model = model
        self.next_agent = next_agent
        self.max_attempts = max_attempts

    # the grade itself: (passed, fields to write) from the parsed object
    def _grade(self, parsed: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    def _feedback(self, context: FlowContext) -> str:
        raise NotImplementedError

    def pre_process(self, context: FlowContext) -> None:
        missing = [
            key for key in (QUESTION, ANSWER) if key not in context or not context.text(key).strip()
        ]
        if missing:
            raise GraderError(
                f"grader {self.name} needs the question under {QUESTION!r} and the answer under "
                f"{ANSWER!r}; the context has no {' and no '.join(repr(m) for m in missing)} "
                "(a source agent can copy its answer there: see rar.flow.graders.feedback_loop)"
            )
        context[GRADE_FORMAT] = self.formats[0] if describes(context) else self.formats[1]

    def response_handler(self, context: FlowContext) -> _GradeHandler:
        return _GradeHandler(self, describes(context))

    def post_process(self, context: FlowContext) -> None:
        context[ATTEMPTS] = int(context.get(ATTEMPTS) or 0) + 1
        if self._loops_back(context):
            context[FEEDBACK] = self._feedback(context)

    def choose_next(self, context: FlowContext) -> Next:
        passed = bool(context.get(PASSED))
        if self._loops_back(context):
            return Next.to(str(context.first(DESTINATION)), grading_passed=False)
        return Next(self.next_agent, grading_passed=passed)

    def _loops_back(self, context: FlowContext) -> bool:
        destination = context.first(DESTINATION)
        return (
            not context.get(PASSED)
            and int(context.get(ATTEMPTS) or 0) < self.max_attempts
            and isinstance(destination, str)
            and bool(destination)
        )


class _GradeHandler:
    """Parses a grade leniently; a malformed one raises :class:`HandlerError` (one repair)."""

    def __init__(self, grader: _Grader, describe: bool) -> None:
        self.grader = grader
        self.describe = describe

    def repair_instruction(self, problem: str) -> str:
        format_ = self.grader.formats[0 if self.describe else 1]
        return GRADE_REPAIR.format(problem=problem, format=format_)

    def handle(self, context: FlowContext, response: Response) -> bool:
        passed, fields = self.grader._grade(parse_json_object(response.content or ""))
        explanation = str(fields.pop("explanation", None) or "").strip()
        context.values.update(fields)
        context[PASSED] = passed
        context[EXPLANATION] = explanation if self.describe else ""  # none asked for: none kept
        return True


class AnswerGrader(_Grader):
    """Rates ``qaAnswer`` against ``qaQuestion`` from 0 to 100 (``qaRating``), with an
    explanation (``qaExplanation``) unless ``qaOutputDescription`` is false; passes when the
    rating is above ``threshold``. A failed grade loops back to ``qaFeedbackLoopDestination``
    (when set) until ``max_attempts`` grades are made; then, or on a pass, the walk goes on to
    ``next_agent`` (``None``: the end). ``model`` is a category, profile, spec or client
    (``None``: the flow's model)."""

    formats = (RATING_FORMAT, RATING_FORMAT_SHORT)
    template = RATING_TEMPLATE

    def __init__(
        self,
        name: str = "AnswerGrader",
        *,
        model: Any = None,
        threshold: float = 60,
        next_agent: str | None = None,
        max_attempts: int = 2,
    ) -> None:
        super().__init__(name, model=model, next_agent=next_agent, max_attempts=max_attempts)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise GraderError(f"threshold must be a number from 0 to 100, not {threshold!r}")
        if not 0 <= threshold <= 100:
            raise GraderError(f"threshold must be from 0 to 100, not {threshold!r}")
        self.threshold = threshold

    def _grade(self, parsed: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        if "rating" not in parsed:
            raise HandlerError("the object has no 'rating'")
        rating = _rating(parsed["rating"])
        return rating > self.threshold, {RATING: rating, "explanation": parsed.get("explanation")}

    def _feedback(self, context: FlowContext) -> str:
        return _feedback_text(
            f"A grader rated your previous answer {context.get(RATING)}/100; it needs more than "
            f"{self.threshold:g} to pass.",
            context,
        )


class BinaryAnswerGrader(_Grader):
    """Decides whether ``qaAnswer`` resolves ``qaQuestion`` (``qaPassed``), with an explanation
    (``qaExplanation``) unless ``qaOutputDescription`` is false. The feedback loop, the next
    agent and the model are as for :class:`AnswerGrader`."""

    formats = (BINARY_FORMAT, BINARY_FORMAT_SHORT)
    template = BINARY_TEMPLATE

    def __init__(
        self,
        name: str = "AnswerGraderBinary",
        *,
        model: Any = None,
        next_agent: str | None = None,
        max_attempts: int = 2,
    ) -> None:
        super().__init__(name, model=model, next_agent=next_agent, max_attempts=max_attempts)

    def _grade(self, parsed: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        if "passed" not in parsed:
            raise HandlerError("the object has no 'passed'")
        return _boolean(parsed["passed"], "passed"), {"explanation": parsed.get("explanation")}

    def _feedback(self, context: FlowContext) -> str:
        return _feedback_text(
            "A grader found that your previous answer does not resolve the question.", context
        )


def _feedback_text(verdict: str, context: FlowContext) -> str:
    parts = [verdict]
    explanation = context.text(EXPLANATION).strip()
    if explanation:
        parts.append(f"The grader's explanation: {explanation}")
    parts.append(f"Your previous answer:\n{context.text(ANSWER)}")
    parts.append("Write an improved answer that addresses this feedback.")
    return "\n\n".join(parts)


def describes(context: FlowContext) -> bool:
    """Whether the graders ask for an explanation: ``qaOutputDescription``, true by default
    (false, ``"false"``, ``"no"``, ``0`` or ``[False]`` turn it off)."""
    value = context.first(OUTPUT_DESCRIPTION, True)
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "no", "0", "off", "")
    return bool(value)


def feedback_loop(agent: Any, answer_key: str = "answer") -> Any:
    """A copy of ``agent`` made the source of a grader's feedback loop.

    Before it runs, its context gets ``qaFeedback = ""`` and ``qaFeedbackLoopDestination`` =
    its name unless they are set (a template may then name ``{{qaFeedback}}`` from the first
    attempt on: templates refuse unknown keys); after it, its answer under ``answer_key`` is
    copied to ``qaAnswer`` for the grader. The agent's own ``pre_process`` and ``post_process``
    still run (before, respectively after, these). Its ``choose_next`` should name the grader.
    """
    source = copy.copy(agent)
    name = str(agent.name)
    before, after = getattr(agent, "pre_process", None), getattr(agent, "post_process", None)

    async def pre_process(context: FlowContext) -> None:
        context.values.setdefault(FEEDBACK, "")
        context.values.setdefault(DESTINATION, name)
        await _maybe(before, context)

    async def post_process(context: FlowContext) -> None:
        await _maybe(after, context)
        if answer_key not in context:
            raise GraderError(
                f"agent {name} should leave its answer under {answer_key!r} for the grader, and "
                f"the context has no such key (its keys: {', '.join(sorted(context)) or 'none'})"
            )
        context[ANSWER] = copy.deepcopy(context[answer_key])

    source.pre_process = pre_process
    source.post_process = post_process
    return source


async def _maybe(hook: Callable[[FlowContext], Any] | None, context: FlowContext) -> None:
    if hook is None or not callable(hook):
        return
    value = hook(context)
    if inspect.isawaitable(value):
        await value


def _rating(value: Any) -> int:
    number: float
    if isinstance(value, bool):
        raise HandlerError(f"the rating {value!r} is not a number from 0 to 100")
    if isinstance(value, int | float):
        number = float(value)
    else:
        match = re.search(r"-?\d+(?:\.\d+)?", str(value))
        if match is None:
            raise HandlerError(f"the rating {value!r} is not a number from 0 to 100")
        number = float(match.group(0))
    if not 0 <= number <= 100:
        raise HandlerError(f"the rating {value!r} is not from 0 to 100")
    return round(number)


_TRUE = ("true", "yes", "pass", "passed", "1")
_FALSE = ("false", "no", "fail", "failed", "0")


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in (*_TRUE, *_FALSE):
        return value.strip().lower() in _TRUE
    raise HandlerError(f"{name!r} is {value!r}; it must be true or false")
