"""Replay re-executes a run against its record and says exactly where and why it diverges."""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rar.demo import QUESTION, SCRIPT, demo_agent, run_demo
from rar.llm import ScriptedModel
from rar.llm.client import Client
from rar.llm.profiles import Profiles
from rar.loop import Agent
from rar.redaction import Redactor
from rar.replay import (
    NondeterminismError,
    ReplayRefusedError,
    execute,
    replay,
)
from rar.runtime.run import Run
from rar.store.store import Store
from rar.store.verify import verify_store
from rar.tools import calculator

QUIET = Redactor(env={})


def variant(system: str) -> Any:
    """The demo agent with another system prompt: a one-line change of behaviour."""

    def agent(run: Run, question: str) -> dict[str, str]:
        client = Client(ScriptedModel(SCRIPT, model="demo"), run=run, profiles=Profiles())
        with run.span("agent", agent="assistant"):
            result = Agent(client, [calculator], max_steps=5, system_prompt=system).run(
                question, run=run
            )
        return {"answer": result.text, "stop_reason": result.stop_reason.value}

    return agent


def test_the_demo_replays_strictly_as_reproducible(store: Store) -> None:
    run = run_demo(store)
    report = replay(run.id, store=store, redactor=QUIET)
    assert report.replay_status == "reproducible" and report.reproducible
    assert report.served == 5 and report.live == 0 and report.mismatched == 0
    assert report.result_equal is True and report.first_divergence is None
    replayed = store.manifest(report.replay_run)
    assert replayed.parent is not None and replayed.parent.run_id == run.id
    assert replayed.tags["replay_mode"] == "strict"
    stored = [e for e in store.events(report.replay_run) if e["type"] == "replay"]
    assert store.resolve_payload(stored[0]["report"])["replay_status"] == "reproducible"
    assert verify_store(store).ok


def test_cached_replay_serves_by_request_digest(store: Store) -> None:
    run = run_demo(store)
    report = replay(run.id, store=store, mode="cached", redactor=QUIET)
    assert report.replay_status == "reproducible" and report.served == 5


def test_changed_agent_code_is_caught_at_the_first_model_call_with_a_field_diff(
    store: Store,
) -> None:
    run = run_demo(store)
    report = replay(run.id, store=store, function=variant("You are sloppy."), redactor=QUIET)
    assert report.replay_status == "non-reproducible" and report.mismatched == 1
    divergence = report.first_divergence
    assert divergence is not None
    assert (divergence["span"], divergence["ordinal"], divergence["kind"]) == (
        "run/agent/step",
        0,
        "llm",
    )
    fields = {d["field"] for d in divergence["differences"]}
    assert "request.messages[0].content" in fields
    assert report.error is not None and report.error["type"] == "NondeterminismError"


def test_code_that_does_more_than_recorded_is_nondeterministic(store: Store) -> None:
    def once(run: Run) -> int:
        return run.effect("tool", {"n": 1}, lambda: 1)

    def twice(run: Run) -> int:
        run.effect("tool", {"n": 1}, lambda: 1)
        return run.effect("tool", {"n": 2}, lambda: 2)

    run = execute(once, store=store, redactor=QUIET)
    report = replay(run.id, store=store, function=twice, redactor=QUIET)
    assert report.replay_status == "non-reproducible"
    assert "does more than it did" in report.first_divergence["reason"]


def test_code_that_does_less_than_recorded_is_nondeterministic(store: Store) -> None:
    def twice(run: Run) -> int:
        run.effect("tool", {"n": 1}, lambda: 1)
        return run.effect("tool", {"n": 2}, lambda: 2)

    run = execute(twice, store=store, redactor=QUIET)
    report = replay(
        run.id,
        store=store,
        function=lambda run: run.effect("tool", {"n": 1}, lambda: 1),
        redactor=QUIET,
    )
    assert report.replay_status == "non-reproducible"
    assert report.unconsumed == [{"span": "run", "ordinal": 1, "kind": "tool", "seq": 4}]


def test_effects_are_not_performed_again_in_a_replay(store: Store) -> None:
    performed: list[int] = []

    def work(run: Run) -> int:
        return run.effect("tool", {"n": 1}, lambda: performed.append(1) or 41) + 1

    run = execute(work, store=store, redactor=QUIET)
    assert performed == [1]
    report = replay(run.id, store=store, function=work, redactor=QUIET)
    assert report.reproducible and performed == [1]


def test_clock_randomness_and_ids_are_served_from_the_record(store: Store) -> None:
    def sample(run: Run) -> list[Any]:
        return [run.now().isoformat(), run.random(), str(run.uuid())]

    run = execute(sample, store=store, redactor=QUIET)
    report = replay(run.id, store=store, function=sample, redactor=QUIET)
    assert report.reproducible
    assert store.resolve_payload(store.events(report.replay_run)[-1]["result"]) == (
        store.resolve_payload(store.events(run.id)[-1]["result"])
    )


def test_a_recorded_error_is_raised_again_with_its_class(store: Store) -> None:
    def careful(run: Run) -> str:
        def boom() -> None:
            raise ZeroDivisionError("division by zero")

        try:
            run.effect("tool", {"op": "divide"}, boom)
        except ZeroDivisionError as exc:
            return f"recovered from {exc}"
        return "no error"

    run = execute(careful, store=store, redactor=QUIET)
    report = replay(run.id, store=store, function=careful, redactor=QUIET)
    assert report.reproducible and report.result_equal


def test_parallel_branches_that_interleave_differently_still_replay(store: Store) -> None:
    async def branch(run: Run, name: str, delays: list[float]) -> list[str]:
        out = []
        with run.span(name):
            for i, delay in enumerate(delays):

                async def call(i: int = i, delay: float = delay) -> str:
                    await asyncio.sleep(delay)
                    return f"{name}{i}"

                out.append(await run.aeffect("llm", {"b": name, "i": i}, call))
        return out

    def parallel(run: Run, delays_a: list[float], delays_b: list[float]) -> list[Any]:
        async def main() -> list[Any]:
            return list(
                await asyncio.gather(branch(run, "a", delays_a), branch(run, "b", delays_b))
            )

        return asyncio.run(main())

    run = execute(
        parallel,
        inputs={"delays_a": [0.02, 0.0], "delays_b": [0.0, 0.02]},
        store=store,
        redactor=QUIET,
    )
    report = replay(run.id, store=store, function=parallel, redactor=QUIET)
    assert report.reproducible


def test_cached_replay_reports_a_new_request_and_goes_live_only_when_allowed(
    store: Store,
) -> None:
    run = run_demo(store)
    report = replay(
        run.id, store=store, mode="cached", function=variant("Be terse."), redactor=QUIET
    )
    assert report.replay_status == "non-reproducible"
    assert "never recorded" in report.first_divergence["reason"]
    live = replay(
        run.id,
        store=store,
        mode="cached",
        function=variant("Be terse."),
        allow_live=True,
        redactor=QUIET,
    )
    assert live.replay_status == "partially-reproducible" and live.live >= 1


def test_fork_serves_up_to_k_then_goes_live_into_a_new_run(store: Store) -> None:
    def steps(run: Run) -> list[int]:
        return [run.effect("tool", {"n": i}, lambda i=i: i * 10) for i in range(4)]

    run = execute(steps, store=store, redactor=QUIET)
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    at = effects[1]["seq"]  # keep the first two effects
    report = replay(run.id, store=store, mode="fork", at=at, function=steps, redactor=QUIET)
    assert report.served == 2 and report.live == 2
    manifest = store.manifest(report.replay_run)
    assert manifest.parent is not None and (manifest.parent.run_id, manifest.parent.seq) == (
        run.id,
        at,
    )


def test_replay_refuses_an_entrypoint_that_no_longer_imports(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # recorded from a module that is deleted afterwards: the record itself stays sound
    code = tmp_path / "code"
    code.mkdir()
    (code / "rar_gone_agent.py").write_text(
        "def agent(run, n):\n    return run.effect('tool', {'n': n}, lambda: n * 2)\n"
    )
    monkeypatch.syspath_prepend(str(code))
    run = execute("rar_gone_agent:agent", inputs={"n": 21}, store=store, redactor=QUIET)
    assert store.manifest(run.id).entrypoint == "rar_gone_agent:agent"
    (code / "rar_gone_agent.py").unlink()
    monkeypatch.delitem(sys.modules, "rar_gone_agent")
    importlib.invalidate_caches()
    assert verify_store(store, [run.id]).ok  # refused for its code, not for its record
    gone = r"entrypoint rar_gone_agent:agent no longer imports \(ModuleNotFoundError"
    with pytest.raises(ReplayRefusedError, match=gone) as refused:
        replay(run.id, store=store, redactor=QUIET)
    assert refused.value.details == {"entrypoint": "rar_gone_agent:agent"}
    assert "pass the function to replay()" in refused.value.message
    assert store.run_ids() == [run.id]  # nothing was recorded for the refused replay


def test_replay_refuses_a_missing_entrypoint_module_cleanly(store: Store) -> None:
    from rar.replay.engine import load_entrypoint

    with pytest.raises(ReplayRefusedError, match="no longer imports"):
        load_entrypoint("rar.gone:agent")


def test_replay_refuses_a_corrupt_log_and_shows_the_verify_errors(store: Store) -> None:
    run = run_demo(store)
    log = store.run_dir(run.id) / "events.jsonl"
    log.write_bytes(log.read_bytes().replace(b"calculator", b"calculatoR", 1))
    with pytest.raises(ReplayRefusedError, match=r"fails verification.*chain"):
        replay(run.id, store=store)


def test_replay_refuses_a_run_that_is_still_being_written(store: Store) -> None:
    from rar.runtime.start import record

    open_run = record("busy", store=store, redactor=QUIET)
    try:
        with pytest.raises(ReplayRefusedError, match="still being written"):
            replay(open_run.id, store=store)
    finally:
        open_run.finish()


def test_branching_past_the_end_is_refused(store: Store) -> None:
    run = run_demo(store)
    with pytest.raises(ReplayRefusedError, match="cannot branch at 9999"):
        replay(run.id, store=store, mode="fork", at=9999)


def test_rar_replay_exits_0_when_reproducible_and_1_when_not(store_path: Path) -> None:
    import orjson

    from rar.cli import cli

    runner = CliRunner()
    out = runner.invoke(cli, ["--store", str(store_path), "demo", "--json"]).stdout
    run_id = orjson.loads(out)["run_id"]
    result = runner.invoke(cli, ["--store", str(store_path), "replay", run_id, "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["replay_status"] == "reproducible"
    human = runner.invoke(cli, ["--store", str(store_path), "replay", run_id[-8:]])
    assert human.exit_code == 0 and "reproducible" in human.stdout


def test_nondeterminism_error_carries_where_and_what(store: Store) -> None:
    def one(run: Run) -> int:
        return run.effect("tool", {"n": 1}, lambda: 1)

    run = execute(one, store=store, redactor=QUIET)
    from rar.replay import RecordedEffects

    source = RecordedEffects.load(store, run.id, "strict")
    with pytest.raises(NondeterminismError) as info:
        source.serve("run", 0, "tool", "sha256:" + "0" * 64)
    assert info.value.details["span"] == "run" and info.value.details["ordinal"] == 0


def test_the_demo_entrypoint_is_recorded_and_importable(store: Store) -> None:
    run = run_demo(store)
    assert store.manifest(run.id).entrypoint == "rar.demo:demo_agent"
    assert store.manifest(run.id).inputs["question"].value == QUESTION
    assert demo_agent.__module__ == "rar.demo"


def test_resume_continues_an_interrupted_run_in_the_same_log(store: Store) -> None:
    from rar.replay import resume

    calls: list[int] = []

    def steps(run: Run, stop_after: int) -> list[int]:
        out = []
        for i in range(4):
            out.append(run.effect("tool", {"n": i}, lambda i=i: calls.append(i) or i * 10))
            if len(out) == stop_after:
                raise KeyboardInterrupt  # the process is stopped here
        return out

    from rar.runtime.start import record

    run = record(
        "stopped", store=store, redactor=QUIET, inputs={"stop_after": 2}, entrypoint="tests:steps"
    )
    with pytest.raises(KeyboardInterrupt):
        steps(run, 2)
    run._writer.close()  # the process dies: the run stays RUNNING, lock released
    assert calls == [0, 1]
    report = resume(
        run.id, store=store, function=lambda run, stop_after: steps(run, 99), redactor=QUIET
    )
    assert report.reproducible and report.served == 2 and report.live == 2
    assert calls == [0, 1, 2, 3]
    events = store.events(run.id)
    effects = [e for e in events if e["type"] == "effect"]
    assert [e["ordinal"] for e in effects] == [0, 1, 2, 3]  # nothing written twice
    assert store.manifest(run.id).status == "completed"
    assert verify_store(store, [run.id]).ok


def test_resume_refuses_a_completed_run(store: Store) -> None:
    from rar.replay import resume

    run = run_demo(store)
    with pytest.raises(ReplayRefusedError, match="nothing to resume"):
        resume(run.id, store=store)


def test_branch_with_a_changed_setting_names_its_parent(store: Store) -> None:
    def sample(run: Run) -> list[float]:
        return [run.random() for _ in range(3)]

    run = execute(sample, store=store, seed=1, redactor=QUIET)
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    report = replay(
        run.id,
        store=store,
        mode="fork",
        at=effects[0]["seq"],
        function=sample,
        overrides={"seed": 2},
        redactor=QUIET,
    )
    original = store.resolve_payload(store.events(run.id)[-1]["result"])
    branched = store.resolve_payload(store.events(report.replay_run)[-1]["result"])
    assert branched[0] == original[0] and branched[1:] != original[1:]
    assert store.manifest(report.replay_run).config["seed"] == 2


def test_an_unknown_setting_is_refused_with_the_settable_ones(store: Store) -> None:
    run = run_demo(store)
    with pytest.raises(ReplayRefusedError, match=r"unknown setting .colour.*seed"):
        replay(run.id, store=store, mode="fork", at=3, overrides={"colour": "red"})


def test_a_run_that_now_fails_where_it_succeeded_is_not_reproducible(store: Store) -> None:
    def fine(run: Run) -> int:
        return run.effect("tool", {"n": 1}, lambda: 1)

    def breaks(run: Run) -> int:
        run.effect("tool", {"n": 1}, lambda: 1)
        raise KeyError("gone")

    run = execute(fine, store=store, redactor=QUIET)
    report = replay(run.id, store=store, function=breaks, redactor=QUIET)
    assert report.replay_status == "non-reproducible" and report.result_equal is False
    assert "now fails with KeyError" in report.first_divergence["reason"]


def test_a_live_call_served_by_another_model_is_named_in_the_boundary(store: Store) -> None:
    from rar.llm import Message, Response

    def ask(run: Run, served_by: str) -> str:
        model = ScriptedModel(lambda request: Response(content="hi", model=served_by))
        client = Client(model, run=run, profiles=Profiles(), cache=False)
        return client.complete(messages=[Message.user("hello")]).content or ""

    run = execute(ask, inputs={"served_by": "model-2024"}, store=store, redactor=QUIET)
    effects = [e for e in store.events(run.id) if e["type"] == "effect"]
    report = replay(
        run.id,
        store=store,
        mode="fork",
        at=effects[0]["seq"] - 1,
        function=lambda run, served_by: ask(run, "model-2025"),
        redactor=QUIET,
    )
    assert report.live == 1
    (entry,) = report.boundary["served_models"]
    assert entry["expected"] == ["model-2024"] and entry["actual"] == ["model-2025"]


def test_rar_show_summarises_the_replay_report(store_path: Path) -> None:
    import orjson

    from rar.cli import cli

    runner = CliRunner()
    run_id = orjson.loads(
        runner.invoke(cli, ["--store", str(store_path), "demo", "--json"]).stdout
    )["run_id"]
    report = orjson.loads(
        runner.invoke(cli, ["--store", str(store_path), "replay", run_id, "--json"]).stdout
    )
    shown = runner.invoke(cli, ["--store", str(store_path), "show", report["replay_run"]])
    assert f"reproducible replay of {run_id}: 5 served, 0 live" in shown.stdout


def test_the_live_result_is_the_recorded_one_so_replays_see_the_same_values(
    store: Store,
) -> None:
    def shows(run: Run) -> str:
        value = run.effect("tool", {"n": 1}, lambda: {"rows": [[2.0, 412.4]], "pair": (1, 2)})
        return repr(value)  # the agent re-serialises what it got

    run = execute(shows, store=store, redactor=QUIET)
    recorded = store.resolve_payload(store.events(run.id)[-1]["result"])
    assert recorded == "{'pair': [1, 2], 'rows': [[2, 412.4]]}"  # canonical: sorted keys
    assert replay(run.id, store=store, function=shows, redactor=QUIET).reproducible


def _big_input_entry(run: Any, items: list[str]) -> dict[str, Any]:
    return {"count": len(items), "first": items[0]}


def test_a_large_input_is_replayed_from_its_blob(tmp_path: Path) -> None:
    from rar.replay.engine import execute, replay

    items = [f"item number {n} with some text" for n in range(100)]  # well over the inline limit
    run = execute(_big_input_entry, inputs={"items": items}, store=tmp_path / "runs")
    manifest = run.store.manifest(run.id)
    assert manifest.inputs["items"].size > 1024  # held as a blob, "value": null in the JSON
    report = replay(run.id, store=tmp_path / "runs")
    assert report.replay_status == "reproducible", report.as_dict()
    assert report.result_equal


def _mode_entry(run: Any, mode: str) -> dict[str, Any]:
    return {"mode": mode, "config": run.config.get("mode")}


def test_a_branch_changes_a_setting_that_is_both_input_and_config(tmp_path: Path) -> None:
    from rar.replay.engine import execute, replay

    store = tmp_path / "runs"
    run = execute(
        _mode_entry, inputs={"mode": "owl_lite"}, store=store, config={"mode": "owl_lite"}
    )
    report = replay(run.id, store=store, mode="fork", at=1, overrides={"mode": "owl_dl"})
    assert report.replay_run is not None
    manifest = run.store.manifest(report.replay_run)
    assert manifest.config["mode"] == "owl_dl"
    assert run.store.resolve_payload(manifest.inputs["mode"].reference()) == "owl_dl"
    result = run.store.resolve_payload(run.store.events(report.replay_run)[-1]["result"])
    assert result == {"mode": "owl_dl", "config": "owl_dl"}
