"""Graders: the stand-alone majority vote, and the agent graders with their feedback loop.

The entrypoints recorded and replayed here (``refine_flow``, ``vote_entry``) are module-level
functions, importable as ``test_flow_graders:NAME`` (pyproject puts tests/ on the path), so a
replay loads them from the record's entrypoint like any other run's.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from rar.flow import (
    Agent,
    AgentType,
    AnswerGrader,
    BaseAgent,
    BinaryAnswerGrader,
    Flow,
    FlowContext,
    TextHandler,
    agrade_binary,
    feedback_loop,
    grade_binary,
)
from rar.flow.graders import GraderError
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.llm.providers.scripted import ScriptedModel
from rar.llm.types import Request
from rar.redaction import Redactor
from rar.replay import execute, replay
from rar.runtime.run import Run
from rar.runtime.start import record
from rar.store.store import Store

QUIET = Redactor(env={})
QUESTION = "Explain recursion to a beginner."
WRITER_TEMPLATE = "Explain recursion to a beginner.\n\n{{qaFeedback}}"
POOR = "Recursion is when something is recursive."
BETTER = "Recursion is a function calling itself on a smaller input, e.g. factorial(n - 1)."


# --- scripted models: answers are functions of the request ----------------------------------


def last_user(request: Request) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")


def graded_answer(prompt: str) -> str:
    """The answer section of a grader's prompt."""
    return prompt.split("Answer:\n", 1)[1].rsplit("\n\nAnswer with only", 1)[0]


def grade_script(request: Request) -> str:
    """Writer and graders: a poor answer first, a better one once feedback is in the prompt;
    the graders grade by the answer's text (an example makes it good)."""
    prompt = last_user(request)
    if prompt.startswith("Rate how well"):
        if "e.g." in graded_answer(prompt):
            return json.dumps({"rating": 85, "explanation": "Clear, with an example."})
        return json.dumps({"rating": 30, "explanation": "It is circular: give an example."})
    if prompt.startswith("Decide whether the answer"):
        if "e.g." in graded_answer(prompt):
            return json.dumps({"passed": True, "explanation": "It explains with an example."})
        return json.dumps({"passed": False, "explanation": "It is circular: give an example."})
    return BETTER if "give an example" in prompt else POOR


def never_satisfied(request: Request) -> str:
    prompt = last_user(request)
    if prompt.startswith("Rate how well"):
        return json.dumps({"rating": 20, "explanation": "Still circular: give an example."})
    return POOR  # the writer never learns


def flow_of(agents: list[Any], script: Callable[[Request], Any]) -> Flow:
    return Flow(agents, model=ScriptedModel(script, model="graders"), profiles=Profiles())


def writer() -> Any:
    return feedback_loop(
        Agent(
            "Writer",
            AgentType.COMPLETION,
            template=WRITER_TEMPLATE,
            handler=TextHandler("answer"),
            choose_next=lambda ctx: "AnswerGrader",
        ),
        answer_key="answer",
    )


def graded_writer(grader: str) -> list[Any]:
    source = writer()
    if grader == "binary":
        source.choose_next = "AnswerGraderBinary"
        return [source, BinaryAnswerGrader()]
    return [source, AnswerGrader()]


def refine_flow(run: Run, grader: str = "rating") -> dict[str, Any]:
    """Entrypoint: Writer → grader with the feedback loop (replayed from the record)."""
    result = flow_of(graded_writer(grader), grade_script).walk(
        "Writer", {"qaQuestion": [QUESTION]}, run=run
    )
    return {"graph": result.graph, "values": result.contexts[0].values}


def llm_requests(store: Store, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The run's llm effects: (span, the recorded request)."""
    return [
        (event["span"], store.resolve_payload(event["request"]))
        for event in store.events(run_id)
        if event["type"] == "effect" and event.get("kind") == "llm"
    ]


def prompt_of(request: dict[str, Any]) -> str:
    messages = request["request"]["messages"]
    return str(next(m["content"] for m in reversed(messages) if m["role"] == "user"))


# --- the feedback loop ------------------------------------------------------------------------

REFINED = {
    "rating": "M, Writer, →, M, AnswerGrader, ✗, →, M, Writer, →, M, AnswerGrader, ✓",
    "binary": "M, Writer, →, M, AnswerGraderBinary, ✗, →, M, Writer, →, M, AnswerGraderBinary, ✓",
}


@pytest.mark.parametrize("grader", ["rating", "binary"])
def test_the_feedback_loop_refines_the_answer_and_replays(store: Store, grader: str) -> None:
    run = execute(refine_flow, inputs={"grader": grader}, store=store, seed=5, redactor=QUIET)
    result = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert result["graph"] == REFINED[grader]
    values = result["values"]
    assert values["qaPassed"] is True and values["qaAttempts"] == 2
    assert values["answer"] == values["qaAnswer"] == BETTER
    assert values["qaExplanation"] in ("Clear, with an example.", "It explains with an example.")
    if grader == "rating":
        assert values["qaRating"] == 85

    requests = llm_requests(store, run.id)
    spans = [span.rsplit("/", 1)[1] for span, _ in requests]
    grader_name = "AnswerGraderBinary" if grader == "binary" else "AnswerGrader"
    assert spans == ["Writer", grader_name, "Writer#2", f"{grader_name}#2"]
    first, second = prompt_of(requests[0][1]), prompt_of(requests[2][1])
    assert first == "Explain recursion to a beginner.\n\n"  # qaFeedback starts out empty
    assert "It is circular: give an example." in second  # the explanation reached the writer
    assert f"Your previous answer:\n{POOR}" in second
    assert values["qaFeedback"] in second
    assert POOR in prompt_of(requests[1][1]) and BETTER in prompt_of(requests[3][1])
    steps = [e for e in store.events(run.id) if e["type"] == "flow.step"]
    assert [(e["agent"], e["grade"], e["next"]) for e in steps] == [
        ("Writer", None, grader_name),
        (grader_name, False, "Writer"),
        ("Writer", None, grader_name),
        (grader_name, True, None),
    ]

    report = replay(run.id, store=store, redactor=QUIET)  # the entrypoint loads from the record
    assert report.replay_status == "reproducible" and report.reproducible
    assert report.result_equal is True and report.mismatched == 0


def test_after_two_failed_grades_the_loop_stops_without_an_error() -> None:
    result = flow_of([writer(), AnswerGrader()], never_satisfied).walk(
        "Writer", {"qaQuestion": [QUESTION]}
    )
    assert result.graph == ("M, Writer, →, M, AnswerGrader, ✗, →, M, Writer, →, M, AnswerGrader, ✗")
    assert result.failed == [] and len(result.ok) == 1
    context = result.contexts[0]
    assert context.error is None
    assert context["qaPassed"] is False and context["qaRating"] == 20
    assert context["qaAttempts"] == 2
    assert result.statistics.requests == 4  # two answers, two grades: no third round


def test_max_attempts_sets_the_number_of_grades() -> None:
    result = flow_of([writer(), AnswerGrader(max_attempts=3)], never_satisfied).walk(
        "Writer", {"qaQuestion": [QUESTION]}
    )
    assert result.graph.count("✗") == 3 and result.graph.count("Writer") == 3
    assert result.contexts[0]["qaAttempts"] == 3
    single = flow_of([writer(), AnswerGrader(max_attempts=1)], never_satisfied).walk(
        "Writer", {"qaQuestion": [QUESTION]}
    )
    assert single.graph == "M, Writer, →, M, AnswerGrader, ✗"


def test_without_a_destination_a_failed_grade_goes_on_to_the_next_agent() -> None:
    publisher = Agent(
        "Publisher", AgentType.PROCESSING_ONLY, post_process=lambda ctx: ctx.add("log", "done")
    )
    flow = flow_of([AnswerGrader(next_agent="Publisher"), publisher], grade_script)
    failed = flow.walk("AnswerGrader", {"qaQuestion": QUESTION, "qaAnswer": [POOR]})
    assert failed.graph == "M, AnswerGrader, ✗, ↴, ○, Publisher"
    assert failed.contexts[0]["qaPassed"] is False and "qaFeedback" not in failed.contexts[0]
    passed = flow.walk("AnswerGrader", {"qaQuestion": QUESTION, "qaAnswer": [BETTER]})
    assert passed.graph == "M, AnswerGrader, ✓, ↴, ○, Publisher"
    assert passed.contexts[0]["log"] == ["done"]


@pytest.mark.parametrize(
    ("rating", "threshold", "passed"),
    [(60, 60, False), (61, 60, True), (50, 40, True), (100, 100, False)],
)
def test_a_rating_passes_only_above_the_threshold(
    rating: int, threshold: int, passed: bool
) -> None:
    flow = flow_of([AnswerGrader(threshold=threshold)], lambda r: json.dumps({"rating": rating}))
    result = flow.walk("AnswerGrader", {"qaQuestion": QUESTION, "qaAnswer": BETTER})
    assert result.contexts[0]["qaPassed"] is passed
    assert result.graph == f"M, AnswerGrader, {'✓' if passed else '✗'}"


@pytest.mark.parametrize(
    ("answer", "rating"),
    [
        ('{"rating": 75, "explanation": "fine"}', 75),
        ("Here is my grade:\n{rating: '80/100', explanation: 'good',} // done", 80),
        ('```json\n{"rating": 64.6}\n```', 65),
    ],
)
def test_grades_are_parsed_leniently(answer: str, rating: int) -> None:
    result = flow_of([AnswerGrader()], lambda r: answer).walk(
        "AnswerGrader", {"qaQuestion": QUESTION, "qaAnswer": BETTER}
    )
    assert result.contexts[0]["qaRating"] == rating
    assert "⚠" not in result.graph  # no repair was needed


def test_a_malformed_grade_gets_one_repair_attempt() -> None:
    prompts: list[str] = []

    def script(request: Request) -> str:
        prompts.append(last_user(request))
        if "could not be used as a grade" in last_user(request):
            return json.dumps({"passed": True, "explanation": "It resolves it."})
        return "Yes, this looks right to me."

    result = flow_of([BinaryAnswerGrader()], script).walk(
        "AnswerGraderBinary", {"qaQuestion": QUESTION, "qaAnswer": BETTER}
    )
    assert result.graph == "M, AnswerGraderBinary, ⚠, ✓"
    assert result.contexts[0]["qaPassed"] is True
    assert result.contexts[0]["qaExplanation"] == "It resolves it."
    assert len(prompts) == 2
    assert "the answer holds no {...} object" in prompts[1]
    assert '{"passed": true or false, "explanation"' in prompts[1]  # the format asked again


def test_a_grade_malformed_twice_fails_the_context() -> None:
    result = flow_of([AnswerGrader()], lambda r: json.dumps({"rating": 180})).walk(
        "AnswerGrader", {"qaQuestion": QUESTION, "qaAnswer": BETTER}
    )
    assert result.graph == "M, AnswerGrader, ⚠, ☢"
    context = result.failed[0]
    assert context.error is not None and context.error["type"] == "HandlerError"
    assert "the rating 180 is not from 0 to 100" in context.error["message"]
    assert "qaPassed" not in context


def test_without_explanations_the_prompt_and_the_grade_are_shorter() -> None:
    seen: list[str] = []

    def script(request: Request) -> str:
        text = "\n".join(m.content or "" for m in request.messages)
        seen.append(text)
        if "explanation" in text:
            return json.dumps({"passed": True, "explanation": "It explains with an example."})
        return json.dumps({"passed": True})

    flow = flow_of([BinaryAnswerGrader()], script)
    full = flow.walk("AnswerGraderBinary", {"qaQuestion": QUESTION, "qaAnswer": BETTER})
    quick = flow.walk(
        "AnswerGraderBinary",
        {"qaQuestion": QUESTION, "qaAnswer": BETTER, "qaOutputDescription": False},
    )
    described, bare = seen
    assert "explanation" in described and "explanation" not in bare.lower()
    assert len(bare) < len(described)
    assert full.contexts[0]["qaExplanation"] == "It explains with an example."
    assert quick.contexts[0]["qaPassed"] is True and quick.contexts[0]["qaExplanation"] == ""
    assert quick.statistics.output_tokens < full.statistics.output_tokens


def test_without_explanations_a_volunteered_one_is_not_kept() -> None:
    seen: list[str] = []

    def script(request: Request) -> str:
        seen.append(last_user(request))
        return json.dumps({"rating": 90, "explanation": "Unasked."})

    result = flow_of([AnswerGrader()], script).walk(
        "AnswerGrader",
        {"qaQuestion": QUESTION, "qaAnswer": BETTER, "qaOutputDescription": [False]},
    )
    assert "explanation" not in seen[0]
    assert result.contexts[0]["qaRating"] == 90 and result.contexts[0]["qaExplanation"] == ""


def test_a_grader_without_an_answer_fails_the_context_clearly() -> None:
    result = flow_of([AnswerGrader()], grade_script).walk("AnswerGrader", {"qaQuestion": QUESTION})
    context = result.failed[0]
    assert context.error is not None and context.error["type"] == "GraderError"
    assert "'qaAnswer'" in context.error["message"] and "feedback_loop" in context.error["message"]
    assert result.statistics.requests == 0


def test_feedback_loop_copies_the_agent_and_keeps_its_own_hooks() -> None:
    calls: list[str] = []

    class Drafter(BaseAgent):
        name = "Drafter"
        agent_type = AgentType.COMPLETION
        template = "Draft.{{qaFeedback}}"

        def response_handler(self, context: FlowContext) -> TextHandler:
            return TextHandler("draft")

        def pre_process(self, context: FlowContext) -> None:
            calls.append(f"pre:{context.get('qaFeedback')!r}")

        async def post_process(self, context: FlowContext) -> None:
            calls.append("post")
            context["draft"] = [context["draft"], "(signed)"]

        def choose_next(self, context: FlowContext) -> str:
            return "AnswerGrader"

    original = Drafter()
    source = feedback_loop(original, answer_key="draft")
    assert source is not original and "pre_process" not in vars(original)

    def script(request: Request) -> str:
        return "My draft." if last_user(request) == "Draft." else json.dumps({"rating": 99})

    result = flow_of([source, AnswerGrader()], script).walk("Drafter", {"qaQuestion": QUESTION})
    context = result.contexts[0]
    assert result.graph == "M, Drafter, →, M, AnswerGrader, ✓"
    assert calls == ["pre:''", "post"]  # qaFeedback was set before the agent's own pre_process
    assert context["qaAnswer"] == ["My draft.", "(signed)"]  # after the agent's post_process
    assert context["qaFeedbackLoopDestination"] == "Drafter" and context["qaPassed"] is True


def test_feedback_loop_refuses_an_agent_that_leaves_no_answer() -> None:
    source = feedback_loop(
        Agent("Writer", AgentType.COMPLETION, template="Write.", choose_next="AnswerGrader"),
        answer_key="answer",
    )
    result = flow_of([source, AnswerGrader()], grade_script).walk(
        "Writer", {"qaQuestion": QUESTION}
    )
    context = result.failed[0]
    assert context.error is not None and context.error["type"] == "GraderError"
    assert "under 'answer'" in context.error["message"]
    assert result.graph == "M, Writer, ☢"


def test_grader_options_are_validated_and_names_default_as_lm_lib() -> None:
    assert AnswerGrader().name == "AnswerGrader"
    assert BinaryAnswerGrader().name == "AnswerGraderBinary"
    assert AnswerGrader("Judge", model="l", threshold=75).model == "l"
    with pytest.raises(GraderError, match="threshold must be from 0 to 100"):
        AnswerGrader(threshold=150)
    with pytest.raises(GraderError, match="max_attempts must be at least 1"):
        BinaryAnswerGrader(max_attempts=0)


# --- the majority vote ------------------------------------------------------------------------


def assessment(prompt: str) -> int:
    match = re.search(r"Assessment (\d+) of (\d+)", prompt)
    assert match is not None, "every vote says which assessment it is"
    return int(match.group(1))


def voting(pattern: list[bool]) -> Callable[[Request], str]:
    """A model voting ``pattern[k - 1]`` on assessment k."""

    def script(request: Request) -> str:
        k = assessment(last_user(request))
        passed = pattern[k - 1]
        return json.dumps({"passed": passed, "reason": f"vote {k}: {'yes' if passed else 'no'}"})

    return script


def vote_entry(run: Run, pattern: list[bool]) -> dict[str, Any]:
    """Entrypoint: a three-vote grade recorded in ``run``."""
    model = ScriptedModel(voting(pattern), model="voter")
    grade = grade_binary(
        "Does the text explain recursion?", BETTER, model=model, run=run, profiles=Profiles()
    )
    return grade.as_dict()


def test_the_majority_of_three_votes_decides() -> None:
    prompts: list[str] = []

    def script(request: Request) -> str:
        prompts.append(last_user(request))
        return voting([True, False, True])(request)

    grade = grade_binary(
        "Does the text explain recursion?",
        BETTER,
        model=ScriptedModel(script),
        profiles=Profiles(),
    )
    assert grade.passed is True and grade.votes == [True, False, True]
    assert grade.reasons == ["vote 1: yes", "vote 2: no", "vote 3: yes"]
    assert grade.requests == 3
    assert len(set(prompts)) == 3  # three different requests, so three cache keys
    assert all(BETTER in p and "Does the text explain recursion?" in p for p in prompts)
    assert (
        grade_binary(
            "q?", "t", model=ScriptedModel(voting([False, False, True])), profiles=Profiles()
        ).passed
        is False
    )


def test_a_tie_fails_and_the_number_of_votes_is_checked() -> None:
    tie = grade_binary(
        "q?", "t", model=ScriptedModel(voting([True, False])), votes=2, profiles=Profiles()
    )
    assert tie.votes == [True, False] and tie.passed is False
    one = grade_binary("q?", "t", model=ScriptedModel(voting([True])), votes=1, profiles=Profiles())
    assert one.passed is True and one.requests == 1
    for votes in (0, -1, True, 2.0):
        with pytest.raises(GraderError, match="votes must be a whole number of at least 1"):
            grade_binary("q?", "t", model=ScriptedModel(voting([True])), votes=votes)  # type: ignore[arg-type]


def test_an_unparseable_vote_is_repaired_once_then_counts_as_failed() -> None:
    def script(request: Request) -> str:
        k = assessment(request.messages[1].content or "")  # the vote's first prompt
        repairing = "could not be used" in last_user(request)
        if k == 1:
            return json.dumps({"passed": True, "reason": "fine"})
        if k == 2:  # garbage, then a good answer
            return "{passed: 'yes', reason: 'repaired',}" if repairing else "I'd say yes."
        return "still no JSON" if repairing else '{"passed": maybe}'

    grade = grade_binary("q?", "t", model=ScriptedModel(script), profiles=Profiles())
    assert grade.votes == [True, True, False] and grade.passed is True
    assert grade.reasons[:2] == ["fine", "repaired"]
    assert grade.reasons[2].startswith("no usable vote after a repair attempt")
    assert "holds no {...} object" in grade.reasons[2]
    assert grade.requests == 5  # 1 + 2 + 2


def test_votes_in_a_run_are_three_effects_in_three_spans_and_replay(store: Store) -> None:
    run = execute(
        vote_entry, inputs={"pattern": [True, False, True]}, store=store, seed=2, redactor=QUIET
    )
    result = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert result["passed"] is True and result["votes"] == [True, False, True]
    requests = llm_requests(store, run.id)
    assert [span for span, _ in requests] == [
        "run/grade/vote",
        "run/grade/vote#2",
        "run/grade/vote#3",
    ]
    digests = {e["request"]["digest"] for e in store.events(run.id) if e["type"] == "effect"}
    assert len(digests) == 3
    report = replay(run.id, store=store, redactor=QUIET)
    assert report.replay_status == "reproducible" and report.result_equal is True

    # a second run meets the response cache: each vote still gets its own answer
    again = execute(
        vote_entry, inputs={"pattern": [True, False, True]}, store=store, seed=3, redactor=QUIET
    )
    cached = [
        store.resolve_payload(e["result"])
        for e in store.events(again.id)
        if e["type"] == "effect" and e.get("kind") == "llm"
    ]
    assert [c["cached"] for c in cached] == [True, True, True]
    assert store.resolve_payload(store.events(again.id)[-1]["result"])["votes"] == [
        True,
        False,
        True,
    ]


def test_agrade_binary_from_async_code_and_grade_binary_refuses_a_running_loop() -> None:
    model = ScriptedModel(voting([False, True, True, True, False]))

    async def main() -> Any:
        grade = await agrade_binary("q?", "t", model=model, votes=5, profiles=Profiles())
        with pytest.raises(GraderError, match="await agrade_binary"):
            grade_binary("q?", "t", model=model, profiles=Profiles())
        return grade

    grade = asyncio.run(main())
    assert grade.votes == [False, True, True, True, False] and grade.passed is True


def test_a_client_recording_elsewhere_is_refused(store: Store) -> None:
    run = record("grader", store=store, seed=1, redactor=QUIET, durable=False)
    other = record("other", store=store, seed=1, redactor=QUIET, durable=False)
    client = Client(ScriptedModel(voting([True] * 3)), run=other, profiles=Profiles())
    with pytest.raises(GraderError, match="records into another run"):
        grade_binary("q?", "t", model=client, run=run)
    grade = grade_binary("q?", "t", model=client)  # the client's run records the votes
    assert grade.passed is True
    assert [span for span, _ in llm_requests(store, other.id)] == [
        "run/grade/vote",
        "run/grade/vote#2",
        "run/grade/vote#3",
    ]
    run.finish()
    other.finish()
