"""Pure tests of the replay engine: matching, fan-out, ordering, timers, cancellation.

Every test runs in both cache modes (``full`` replay per pass and ``sticky``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.errors import ActivityError
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


class Order(msgspec.Struct):
    id: str
    amount: int


@activity(name="price")
def price(order: Order) -> Order:
    return Order(order.id, order.amount * 2)


FAKES = {"A": act_a, "B": act_b, "price": price}


def replay_ok(sim: Sim, defn: Any) -> None:
    """The finished history replays cleanly and issues no new commands."""
    history = RecordedHistory.from_rows(defn.name, sim.input, sim.history, sim.info.execution_id)
    result = Replayer([defn]).replay(history)
    assert result.ok, result.error
    assert result.outcome.new_events == []
    assert result.outcome.commands == []


def test_sequential_activities_record_schedule_and_completion(mode: str) -> None:
    @workflow(name="seq3")
    async def wf(ctx: WorkflowContext, n: int) -> list[str]:
        return [await act_a(i) for i in range(n)]

    sim = Sim(wf, 3, mode=mode, activities=FAKES)
    sim.run()
    assert sim.result() == ["a:0", "a:1", "a:2"]
    assert sim.types() == ["ActivityScheduled", "ActivityCompleted"] * 3 + ["WorkflowCompleted"]
    assert len(sim.outcomes) == 4  # one pass per completion plus the first
    replay_ok(sim, wf)


def test_activity_result_decodes_to_annotated_struct(mode: str) -> None:
    @workflow(name="typed")
    async def wf(ctx: WorkflowContext, order: Order) -> int:
        priced = await price(order)
        assert isinstance(priced, Order)
        return priced.amount

    sim = Sim(wf, Order("o1", 21), mode=mode, activities=FAKES)
    sim.run()
    assert sim.result() == 42


def test_gather_fans_out_in_one_pass_and_keeps_argument_order(mode: str) -> None:
    @workflow(name="fan")
    async def wf(ctx: WorkflowContext, n: int) -> list[str]:
        return list(await asyncio.gather(*(act_a(i) for i in range(n))))

    sim = Sim(wf, 4, mode=mode, activities=FAKES)
    first = sim.run_pass()
    assert [c.seq for c in first.activities] == [1, 2, 3, 4]
    # complete out of order, one pass each
    for seq in (3, 1, 4, 2):
        sim.complete(seq, f"r{seq}")
        sim.run_pass()
    assert sim.result() == ["r1", "r2", "r3", "r4"]
    replay_ok(sim, wf)


def test_asyncio_wait_first_completed_sees_completions_one_at_a_time(mode: str) -> None:
    """completions are delivered in history order, one at a time, so
    FIRST_COMPLETED returns the same single task on replay."""

    @workflow(name="waitfirst")
    async def wf(ctx: WorkflowContext, _: None) -> list[str]:
        tasks = [asyncio.ensure_future(act_a(x)) for x in ("x", "y", "z")]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1
        first = await act_b(next(iter(done)).result())
        rest = await asyncio.gather(*(t for t in tasks if t in pending))
        return [first, *rest]

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run_pass()
    # all three finish before the next pass runs (within a few ms of each other)
    sim.complete(2, "y")
    sim.complete(3, "z")
    sim.complete(1, "x")
    sim.run()
    assert sim.result() == ["b:y", "x", "z"]
    replay_ok(sim, wf)


def test_ctx_wait_returns_done_in_completion_order(mode: str) -> None:
    @workflow(name="ctxwait")
    async def wf(ctx: WorkflowContext, _: None) -> list[str]:
        done, pending = await ctx.wait([act_a(1), act_a(2), act_a(3)])
        assert pending == []
        return [t.result() for t in done]

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run_pass()
    sim.complete(3, "c")
    sim.complete(1, "a")
    sim.complete(2, "b")
    sim.run_pass()
    assert sim.result() == ["c", "a", "b"]
    replay_ok(sim, wf)


def test_activity_failure_raises_activity_error_with_type_and_message(mode: str) -> None:
    @activity(name="flaky")
    def flaky(x: int) -> int:
        raise KeyError(f"no {x}")

    @workflow(name="comp")
    async def wf(ctx: WorkflowContext, _: None) -> dict[str, Any]:
        try:
            await flaky(7)
        except ActivityError as err:
            refund = await act_b("refund")
            return {"type": err.error_type, "msg": err.message, "refund": refund, "seq": err.seq}
        return {}

    sim = Sim(wf, None, mode=mode, activities={**FAKES, "flaky": flaky})
    sim.run()
    assert sim.result() == {"type": "KeyError", "msg": "'no 7'", "refund": "b:refund", "seq": 1}
    replay_ok(sim, wf)


def test_uncaught_exception_fails_the_execution(mode: str) -> None:
    @workflow(name="boom")
    async def wf(ctx: WorkflowContext, _: None) -> None:
        await act_a(1)
        raise RuntimeError("bad \x00 state")

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    out = sim.run()
    assert out.status is PassStatus.FAILED
    assert out.error.error_type == "RuntimeError"
    assert out.error.message == "bad \x00 state"
    assert "\x00" not in out.failure_reason
    assert sim.types()[-1] == "WorkflowFailed"
    replay_ok(sim, wf)


def test_sleep_is_a_durable_timer_and_advances_virtual_time(mode: str) -> None:
    @workflow(name="sleepy")
    async def wf(ctx: WorkflowContext, _: None) -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await ctx.sleep(30)
        await asyncio.sleep(60)
        return loop.time() - t0

    sim = Sim(wf, None, mode=mode)
    out = sim.run_pass()
    assert [t.fire_after.total_seconds() for t in out.timers] == [30.0]
    assert sim.run_pass().new_events == []  # not due yet: nothing happens
    sim.advance(30)
    out = sim.run_pass()
    assert [t.fire_after.total_seconds() for t in out.timers] == [60.0]
    sim.advance(60)
    sim.run_pass()
    assert sim.result() == 90.0
    assert sim.types() == ["TimerStarted", "TimerFired"] * 2 + ["WorkflowCompleted"]
    replay_ok(sim, wf)


def test_wait_for_cancels_its_timer_when_the_activity_wins(mode: str) -> None:
    @workflow(name="waitfor")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        return await asyncio.wait_for(act_a(1), timeout=10)

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run()
    assert sim.result() == "a:1"
    assert "TimerCancelled" in sim.types()
    assert sim.timers == {}
    replay_ok(sim, wf)


def test_asyncio_timeout_expires_on_a_durable_timer(mode: str) -> None:
    @workflow(name="tmo")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        try:
            async with asyncio.timeout(5):
                await act_a(1)
        except TimeoutError:
            return "timed out"
        return "finished"

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run_pass()
    sim.advance(5)
    sim.run_pass()
    assert sim.result() == "timed out"
    replay_ok(sim, wf)


def test_cancel_request_raises_cancelled_error_at_the_current_await(mode: str) -> None:
    @workflow(name="cancellable")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        await act_a("reserve")
        try:
            await ctx.wait_signal("approve")
        except asyncio.CancelledError:
            await act_b("release")  # cleanup still runs durably
            return "cleaned up"
        return "approved"

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run()
    assert sim.status is PassStatus.BLOCKED
    sim.cancel_requested = True
    sim.run()
    assert sim.result() == "cleaned up"
    assert sim.types().count("CancelRequested") == 1
    replay_ok(sim, wf)


def test_uncaught_cancellation_ends_cancelled(mode: str) -> None:
    @workflow(name="cancelled")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        await ctx.sleep(100)
        return "slept"

    sim = Sim(wf, None, mode=mode)
    sim.run_pass()
    sim.cancel_requested = True
    out = sim.run_pass()
    assert out.status is PassStatus.CANCELLED
    assert sim.types() == ["TimerStarted", "CancelRequested", "TimerCancelled", "WorkflowCancelled"]
    replay_ok(sim, wf)


def test_create_task_and_cancelling_a_child_task(mode: str) -> None:
    @workflow(name="children")
    async def wf(ctx: WorkflowContext, _: None) -> list[str]:
        slow = asyncio.create_task(ctx.sleep(3600))
        fast = asyncio.create_task(act_a("fast"))
        got = await fast
        slow.cancel()
        try:
            await slow
        except asyncio.CancelledError:
            return [got, "slow cancelled"]
        return [got]

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run()
    assert sim.result() == ["a:fast", "slow cancelled"]
    assert sim.types() == [
        "TimerStarted",
        "ActivityScheduled",
        "ActivityCompleted",
        "TimerCancelled",
        "WorkflowCompleted",
    ]
    replay_ok(sim, wf)


def test_now_random_uuid_are_identical_on_replay(mode: str) -> None:
    @workflow(name="det")
    async def wf(ctx: WorkflowContext, _: None) -> list[str]:
        first = [ctx.now().isoformat(), str(ctx.random()), str(ctx.uuid4())]
        await ctx.sleep(10)
        second = [ctx.now().isoformat(), str(ctx.random()), str(ctx.uuid4())]
        return first + second

    sim = Sim(wf, None, mode=mode)
    sim.run_pass()
    sim.advance(10)
    sim.run_pass()
    values = sim.result()
    assert values[0] == "2026-01-01T00:00:00+00:00"
    assert values[3] == "2026-01-01T00:00:10+00:00"
    assert values[1] != values[4]
    assert values[2] != values[5]
    # a full replay of the whole history returns the same values
    again = Replayer([wf]).replay(
        RecordedHistory.from_rows(wf.name, sim.input, sim.history[:-1], sim.info.execution_id)
    )
    assert again.ok
    assert msgspec.json.decode(again.outcome.result) == values


def test_evicted_instance_never_runs_activities_as_plain_calls() -> None:
    """Closing an instance (eviction, end of a pass) runs pending finally blocks inside
    the closing engine: a durable call there aborts instead of calling the function."""
    calls: list[str] = []

    @activity(name="refund")
    def refund(x: str) -> str:
        calls.append(x)
        return x

    @workflow(name="stubborn")
    async def wf(ctx: WorkflowContext, _: None) -> None:
        try:
            while True:
                try:
                    await ctx.wait_signal("never")
                except asyncio.CancelledError:
                    continue  # swallows cancellation
        finally:
            await refund("oops")

    sim = Sim(wf, None, mode="sticky")
    sim.run_pass()
    instance = sim.instance
    assert instance is not None
    instance.close()
    import gc

    gc.collect()
    assert calls == []
    assert not instance.reusable


def test_uncertain_operation_stays_pending_until_its_outcome_event(mode: str) -> None:
    """Issue 5 events: OperationUncertain and OperationResolved are audit-only; the
    ActivityCompleted that follows a "complete" decision resolves the call."""
    from azync_flow.replay import OperationResolved, OperationUncertain

    @workflow(name="uncertain")
    async def wf(ctx: WorkflowContext, _: None) -> Any:
        return await act_a("pay")

    sim = Sim(wf, None, mode=mode, activities=FAKES)
    sim.run_pass()
    sim.append(OperationUncertain(scheduled_seq=1, reason="worker died mid-call"))
    assert sim.run_pass().status is PassStatus.BLOCKED
    sim.append(OperationResolved(scheduled_seq=1, decision="complete", decided_by="ops"))
    sim.complete(1, "paid (reconciled)")
    sim.run_pass()
    assert sim.result() == "paid (reconciled)"
    replay_ok(sim, wf)


def test_logging_inside_a_workflow_is_allowed(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    @workflow(name="logs")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        if not ctx.is_replaying:
            logging.getLogger("wf").warning("charging %s", "o1")
        return "ok"

    with caplog.at_level(logging.WARNING, logger="wf"):
        sim = Sim(wf, None)
        sim.run_pass()
    assert sim.result() == "ok"
    assert "charging o1" in caplog.text


def test_root_task_runs_in_the_given_context_and_children_inherit_it() -> None:
    """The runtime runs workflow code in a context of its choosing (telemetry passes
    one with spans suppressed)."""
    import contextvars
    import uuid

    from azync_flow.replay import WorkflowInfo, WorkflowInstance

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="ambient")

    @workflow(name="ctxvar")
    async def wf(ctx: WorkflowContext, _: None) -> list[str]:
        child = await asyncio.create_task(asyncio.sleep(0, result=marker.get()))
        return [marker.get(), child]

    context = contextvars.copy_context()
    context.run(marker.set, "suppressed")
    info = WorkflowInfo(uuid.UUID(int=3), "ctxvar")
    out = WorkflowInstance(wf, b"null", info, task_context=context).advance([])
    assert msgspec.json.decode(out.result) == ["suppressed", "suppressed"]
    assert marker.get() == "ambient"


def test_events_replayed_counts_only_new_events_on_a_cached_instance(mode: str) -> None:
    @workflow(name="count_replayed")
    async def wf(ctx: WorkflowContext, n: int) -> None:
        for i in range(n):
            await act_a(i)

    sim = Sim(wf, 3, mode=mode, activities=FAKES)
    sim.run()
    replayed = [o.events_replayed for o in sim.outcomes]
    if mode == "sticky":
        assert replayed == [0, 1, 1, 1]  # only the completion appended since
    else:
        assert replayed == [0, 2, 4, 6]


def test_instance_cache_evicts_least_recently_used_and_rejects_stale() -> None:
    import uuid

    from azync_flow.replay import InstanceCache, WorkflowInfo, WorkflowInstance

    @workflow(name="cached")
    async def wf(ctx: WorkflowContext, _: None) -> None:
        await ctx.wait_signal("never")

    def blocked(n: int) -> WorkflowInstance:
        instance = WorkflowInstance(wf, b"null", WorkflowInfo(uuid.UUID(int=n), "cached"))
        instance.advance([])
        return instance

    cache = InstanceCache(max_size=2)
    a, b, c = (blocked(n) for n in (1, 2, 3))
    cache.put(uuid.UUID(int=1), a)
    cache.put(uuid.UUID(int=2), b)
    cache.put(uuid.UUID(int=3), c)  # evicts 1
    assert len(cache) == 2
    assert cache.take(uuid.UUID(int=1)) is None
    assert not a.reusable  # closed on eviction
    assert cache.take(uuid.UUID(int=2), next_seq=1) is b
    assert cache.take(uuid.UUID(int=3), next_seq=0) is None  # ran ahead of the store: dropped
    off = InstanceCache(max_size=0)
    d = blocked(4)
    off.put(uuid.UUID(int=4), d)
    assert len(off) == 0
    assert not d.reusable
