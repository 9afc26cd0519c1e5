"""Every NonDeterminismError case, the Replayer, and versioning with patches."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from azync_flow import activity, workflow
from azync_flow.errors import ForbiddenCallError, NonDeterminismError
from azync_flow.replay import PassStatus, RecordedHistory, Replayer
from azync_flow.workflow import WorkflowContext
from tests.unit.test_replay_sim import MODES, Sim


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@activity(name="A")
def act_a(x: Any) -> Any:
    return f"a:{x}"


@activity(name="B")
def act_b(x: Any) -> Any:
    return f"b:{x}"


@activity(name="B2")
def act_b2(x: Any) -> Any:
    return f"b2:{x}"


@activity(name="X")
def act_x(x: Any) -> Any:
    return f"x:{x}"


FAKES = {"A": act_a, "B": act_b, "B2": act_b2, "X": act_x}


def three_steps(calls: list[int], name: str = "W") -> Any:
    @workflow(name=name)
    async def wf(ctx: WorkflowContext, _: None) -> str:
        for i in calls:
            await act_a(i)
        return "done"

    return wf


def recorded(wf: Any, mode: str = "full") -> tuple[Sim, RecordedHistory]:
    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run()
    return sim, RecordedHistory.from_rows(wf.name, sim.input, sim.history, sim.info.execution_id)


def mismatch(defn: Any, history: RecordedHistory) -> NonDeterminismError:
    result = Replayer([defn]).replay(history)
    assert not result.ok
    assert result.outcome.status is PassStatus.NONDETERMINISM
    assert result.outcome.new_events == []
    assert result.outcome.commands == []
    assert isinstance(result.error, NonDeterminismError)
    return result.error


def test_c01_removed_last_step_is_caught_after_the_function_returns() -> None:
    """code now calls A twice; history has three calls."""
    _, history = recorded(three_steps([1, 2, 3]))
    err = mismatch(three_steps([1, 2]), history)
    assert err.seq == 5
    assert "ActivityScheduled(A" in err.recorded
    assert "[3]" in err.recorded
    assert err.new == 'WorkflowCompleted(result="done")'


def test_c01_added_step_after_recorded_completion_is_caught() -> None:
    """code now calls A four times."""
    _, history = recorded(three_steps([1, 2, 3]))
    err = mismatch(three_steps([1, 2, 3, 4]), history)
    assert err.seq == 7
    assert err.recorded == 'WorkflowCompleted(result="done")'
    assert err.new == "ActivityScheduled(A, input=[4])"


def test_c01_changed_argument_of_last_step_is_caught() -> None:
    """third call becomes A(99)."""
    _, history = recorded(three_steps([1, 2, 3]))
    err = mismatch(three_steps([1, 2, 99]), history)
    assert err.seq == 5
    assert "input=[3]" in err.recorded
    assert "input=[99]" in err.new
    assert "seq 5" in str(err)
    assert "[nondeterminism]" in str(err)


def test_c01_in_flight_step_matches_its_recorded_schedule() -> None:
    """history cut after step 3 was scheduled; unchanged code replays it."""
    wf = three_steps([1, 2, 3])
    sim, full = recorded(wf)
    partial = RecordedHistory.from_rows(wf.name, sim.input, sim.history[:5], sim.info.execution_id)
    result = Replayer([wf]).replay(partial)
    assert result.ok, result.error
    assert result.outcome.status is PassStatus.BLOCKED
    assert result.outcome.commands == []  # step 3 is not scheduled a second time
    # and execution continues normally from the partial history
    resumed = Sim(wf, None, activities=FAKES, history=partial.entries())
    resumed.ops = {5: sim.outcomes[2].commands[0]}
    resumed.run()
    assert resumed.result() == "done"
    assert resumed.types() == [type(e.event).__name__ for e in full.entries()]


def test_renamed_activity_is_a_mismatch_naming_both(mode: str) -> None:
    @workflow(name="v1")
    async def v1(ctx: WorkflowContext, _: None) -> str:
        await act_a(0)
        await act_b(0)
        await ctx.wait_signal("go")
        return "ok"

    @workflow(name="v1")
    async def v2(ctx: WorkflowContext, _: None) -> str:
        await act_a(0)
        await act_b2(0)
        await ctx.wait_signal("go")
        return "ok"

    sim = Sim(v1, None, mode=mode, activities=FAKES)
    sim.run()
    assert sim.status is PassStatus.BLOCKED
    new = Sim(v2, None, mode=mode, activities=FAKES, history=list(sim.history))
    new.signal("go")
    out = new.run_pass()
    assert out.status is PassStatus.NONDETERMINISM
    assert out.error.seq == 3
    assert "ActivityScheduled(B," in out.error.recorded
    assert "ActivityScheduled(B2," in out.error.new
    assert out.new_events == []
    assert out.consumed_signals == []


def test_swapped_steps_are_a_mismatch() -> None:
    @workflow(name="swap")
    async def ab(ctx: WorkflowContext, _: None) -> str:
        await act_a(0)
        await act_b(0)
        return "ok"

    @workflow(name="swap")
    async def ba(ctx: WorkflowContext, _: None) -> str:
        await act_b(0)
        await act_a(0)
        return "ok"

    _, history = recorded(ab)
    err = mismatch(ba, history)
    assert err.seq == 1


def test_timer_replaced_by_activity_is_a_mismatch() -> None:
    @workflow(name="t")
    async def timer(ctx: WorkflowContext, _: None) -> str:
        await ctx.sleep(1)
        return "ok"

    @workflow(name="t")
    async def act(ctx: WorkflowContext, _: None) -> str:
        await act_a(1)
        return "ok"

    _, history = recorded(timer)
    err = mismatch(act, history)
    assert err.recorded.startswith("TimerStarted")
    assert err.new.startswith("ActivityScheduled")


def test_recorded_step_skipped_before_a_later_input_is_a_mismatch() -> None:
    """The code no longer issues a recorded command that preceded a recorded input."""

    @workflow(name="sk")
    async def old(ctx: WorkflowContext, _: None) -> str:
        asyncio.ensure_future(act_b("side"))  # noqa: RUF006 - fire and forget
        await act_a(1)
        return "ok"

    @workflow(name="sk")
    async def new(ctx: WorkflowContext, _: None) -> str:
        await act_a(1)
        return "ok"

    _, history = recorded(old)
    err = mismatch(new, history)
    assert err.seq == 2
    assert "ActivityScheduled(B" in err.recorded
    assert err.new == ""
    assert "before ActivityCompleted(scheduled_seq=1" in err.detail
    assert err.detail.endswith("at seq 3")


def test_recorded_command_never_issued_at_end_of_partial_history_is_a_mismatch() -> None:
    @workflow(name="pe")
    async def old(ctx: WorkflowContext, _: None) -> str:
        await act_a(1)
        await act_b(2)
        return "ok"

    @workflow(name="pe")
    async def new(ctx: WorkflowContext, _: None) -> str:
        await act_a(1)
        await ctx.wait_signal("never")
        return "ok"

    sim, _ = recorded(old)
    partial = RecordedHistory.from_rows("pe", sim.input, sim.history[:3])
    err = mismatch(new, partial)
    assert err.seq == 3
    assert "end of the recorded history" in err.detail


def test_signal_consumed_in_history_without_a_waiting_wait_is_a_mismatch() -> None:
    @workflow(name="sg")
    async def old(ctx: WorkflowContext, _: None) -> Any:
        return await ctx.wait_signal("go")

    @workflow(name="sg")
    async def new(ctx: WorkflowContext, _: None) -> Any:
        return await ctx.wait_signal("went")

    sim = Sim(old, None, activities=FAKES)
    sim.signal("go", 1)
    sim.run()
    history = RecordedHistory.from_rows("sg", sim.input, sim.history)
    err = mismatch(new, history)
    assert err.seq == 1
    assert "SignalReceived" in err.recorded
    assert "'go'" in err.detail


def test_side_effect_replaced_is_a_mismatch() -> None:
    @workflow(name="se")
    async def old(ctx: WorkflowContext, _: None) -> Any:
        return ctx.now().isoformat()

    @workflow(name="se")
    async def new(ctx: WorkflowContext, _: None) -> Any:
        return ctx.side_effect(lambda: 4)

    _, history = recorded(old)
    err = mismatch(new, history)
    assert err.seq == 1
    assert "now" in err.recorded
    assert "side_effect" in err.new


def test_nondeterminism_is_caught_mid_run_and_nothing_is_written(mode: str) -> None:
    """A pass under changed code returns nondeterminism with no events/commands."""
    v1 = three_steps([1, 2, 3], name="mid")
    sim = Sim(v1, None, mode=mode, activities=FAKES)
    sim.run_pass()
    sim.run_activities()
    sim.run_pass()  # A(2) scheduled
    v2 = three_steps([1, 5, 3], name="mid")
    again = Sim(v2, None, mode=mode, activities=FAKES, history=list(sim.history))
    out = again.run_pass()
    assert out.status is PassStatus.NONDETERMINISM
    assert (out.new_events, out.commands, out.fired_timers) == ([], [], [])
    assert out.error.seq == 3


def test_replayer_reads_a_json_file(tmp_path: Path) -> None:
    wf = three_steps([1, 2, 3], name="file")
    _, history = recorded(wf)
    path = tmp_path / "h.json"
    path.write_bytes(history.to_json())
    assert Replayer([wf]).replay(path).ok
    assert Replayer([wf]).replay(str(path)).ok
    with pytest.raises(NonDeterminismError):
        Replayer([three_steps([1, 2], name="file")]).replay(path).raise_for_error()


def test_c04_patch_gate_old_executions_take_old_path_new_take_new(mode: str) -> None:
    """v2 inserts X between A and B behind ctx.patched; in-flight v1
    executions replay cleanly and do not run X; new ones run X."""

    def make(version: int) -> Any:
        @workflow(name="order")
        async def wf(ctx: WorkflowContext, _: None) -> list[str]:
            out = [await act_a(0)]
            if version >= 2 and ctx.patched("add-x"):
                out.append(await act_x(0))
            out.append(await act_b(0))
            out.append(await ctx.wait_signal("go"))
            if version >= 3 and ctx.patched("add-y"):
                out.append(await act_x("y"))
            out.append(await act_a("c"))
            return out

        return wf

    old = Sim(make(1), None, mode=mode, activities=FAKES)
    old.run()
    assert old.status is PassStatus.BLOCKED  # at the wait
    for version in (2, 3):
        resumed = Sim(make(version), None, mode=mode, activities=FAKES, history=list(old.history))
        resumed.signal("go", "go!")
        resumed.run()
        expected = ["a:0", "b:0", "go!", *(["x:y"] if version == 3 else []), "a:c"]
        assert resumed.result() == expected
        assert "x:0" not in resumed.result()
    fresh = Sim(make(2), None, mode=mode, activities=FAKES)
    fresh.signal("go", "go!")
    fresh.run()
    assert fresh.result() == ["a:0", "x:0", "b:0", "go!", "a:c"]
    assert "PatchMarker" in fresh.types()
    replay = Replayer([make(2)]).replay(
        RecordedHistory.from_rows("order", fresh.input, fresh.history)
    )
    assert replay.ok, replay.error


def test_c04_unpatched_insertion_before_the_current_position_is_reported(mode: str) -> None:
    @workflow(name="order2")
    async def v1(ctx: WorkflowContext, _: None) -> str:
        await act_a(0)
        await act_b(0)
        await ctx.wait_signal("go")
        return "ok"

    @workflow(name="order2")
    async def v2(ctx: WorkflowContext, _: None) -> str:
        await act_a(0)
        await act_x(0)
        await act_b(0)
        await ctx.wait_signal("go")
        return "ok"

    sim = Sim(v1, None, mode=mode, activities=FAKES)
    sim.run()
    resumed = Sim(v2, None, mode=mode, activities=FAKES, history=list(sim.history))
    resumed.signal("go")
    out = resumed.run_pass()
    assert out.status is PassStatus.NONDETERMINISM
    assert out.error.seq == 3
    assert "B" in out.error.recorded
    assert "X" in out.error.new
    assert resumed.ops == {}
    assert len(resumed.inbox) == 1


def test_removed_patch_call_replays_cleanly() -> None:
    @workflow(name="p")
    async def with_patch(ctx: WorkflowContext, _: None) -> str:
        if ctx.patched("fix"):
            await act_a("new")
        return "ok"

    @workflow(name="p")
    async def patch_removed(ctx: WorkflowContext, _: None) -> str:
        await act_a("new")
        return "ok"

    _, history = recorded(with_patch)
    assert Replayer([patch_removed]).replay(history).ok


@pytest.mark.parametrize(
    ("body", "call"),
    [
        ("time", "time.time()"),
        ("sleep", "time.sleep()"),
        ("executor", "loop.run_in_executor"),
        ("to_thread", "loop.run_in_executor"),
        ("thread", "threading.Thread.start()"),
        ("socket", "loop.create_connection"),
        ("monotonic", "time.monotonic()"),
        ("perf_counter", "time.perf_counter()"),
        ("random", "random.random()"),
        ("choice", "random.choice()"),
    ],
)
def test_forbidden_calls_name_the_call_and_suspend_even_if_swallowed(body: str, call: str) -> None:
    import threading
    import time

    caught: list[str] = []

    @workflow(name="forbidden")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        loop = asyncio.get_running_loop()
        try:
            if body == "time":
                time.time()
            elif body == "sleep":
                time.sleep(0)  # noqa: ASYNC251
            elif body == "executor":
                await loop.run_in_executor(None, print)
            elif body == "to_thread":
                await asyncio.to_thread(print)
            elif body == "thread":
                threading.Thread(target=print).start()
            elif body == "socket":
                await asyncio.open_connection("127.0.0.1", 5432)
            elif body == "monotonic":
                time.monotonic()
            elif body == "perf_counter":
                time.perf_counter()
            elif body == "random":
                random.random()
            elif body == "choice":
                random.choice([1, 2])
        except ForbiddenCallError as err:
            caught.append(str(err))
        return "swallowed"

    out = Sim(wf, None).run_pass()
    assert out.status is PassStatus.NONDETERMINISM
    assert isinstance(out.error, ForbiddenCallError)
    assert out.error.call == call
    assert out.new_events == []
    assert len(caught) == 1
    assert call in caught[0]
    assert "forbidden inside a workflow" in caught[0]
    if body in ("random", "choice"):
        assert "ctx.random()" in caught[0]
    if body in ("monotonic", "perf_counter"):
        assert "ctx.now()" in caught[0]


def test_time_functions_work_again_outside_workflow_code() -> None:
    import time

    assert time.time() > 0
    time.sleep(0)
    assert time.monotonic() > 0
    assert time.perf_counter() > 0
    assert 0 <= random.random() < 1


def test_asyncio_timers_and_ctx_random_inside_a_workflow_are_not_forbidden() -> None:
    @workflow(name="allowed")
    async def wf(ctx: WorkflowContext, _: None) -> float:
        async with asyncio.timeout(60):  # durable timer on the virtual clock
            await asyncio.sleep(0)
        return ctx.random()

    out = Sim(wf, None).run_pass()
    assert out.status is not PassStatus.NONDETERMINISM, out.error


def test_replayer_command_line_reports_each_history(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.unit.test_replay_c03_child import c03_gather, c3

    sim = Sim(c03_gather, None, activities={"C3": c3})
    sim.run()
    recorded = RecordedHistory.from_rows("c03_gather", sim.input, sim.history).to_json()
    good = tmp_path / "good.json"
    good.write_bytes(recorded)
    bad = tmp_path / "bad.json"  # the second call's argument edited: y -> q
    bad.write_bytes(recorded.replace(b'"input":["y"]', b'"input":["q"]', 1))
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "azync_flow.cli",
            "replay",
            "tests.unit.test_replay_c03_child:c03_gather",
            str(good),
            str(bad),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1
    assert lines[0] == f"ok    {good}"
    assert lines[1].startswith(f"FAIL  {bad}: [nondeterminism] at seq 2")


def test_new_command_where_history_has_a_recorded_input_is_a_mismatch() -> None:
    """The new code issues an extra command before a signal the old code consumed."""

    @workflow(name="extra")
    async def old(ctx: WorkflowContext, _: None) -> Any:
        return await ctx.wait_signal("go")

    @workflow(name="extra")
    async def new(ctx: WorkflowContext, _: None) -> Any:
        await ctx.sleep(5)
        return await ctx.wait_signal("go")

    sim = Sim(old, None)
    sim.signal("go", 1)
    sim.run()
    err = mismatch(new, RecordedHistory.from_rows("extra", sim.input, sim.history))
    assert err.seq == 1
    assert err.recorded == "SignalReceived(go, payload=1)"
    assert err.new == "TimerStarted(5s)"
