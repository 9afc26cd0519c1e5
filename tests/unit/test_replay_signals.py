"""Signals in the replay engine: buffering, exactly-once consumption, timeouts."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.replay import PassStatus, RecordedHistory, Replayer
from azync_flow.workflow import WorkflowContext
from tests.unit.test_replay_sim import MODES, Sim


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@activity(name="A")
def act_a(x: Any) -> Any:
    return f"a:{x}"


FAKES = {"A": act_a}


def assert_replays(sim: Sim, defn: Any) -> Any:
    result = Replayer([defn]).replay(RecordedHistory.from_rows(defn.name, sim.input, sim.history))
    assert result.ok, result.error
    assert result.outcome.commands == []
    return msgspec.json.decode(result.outcome.result) if result.outcome.result else None


@workflow(name="collect3")
async def collect3(ctx: WorkflowContext, _: None) -> list[int]:
    await act_a(0)
    return [await ctx.wait_signal("item") for _ in range(3)]


def test_c05_early_signals_are_each_consumed_once_in_arrival_order(mode: str) -> None:
    """two signals arrive while A runs; the third wait blocks until m3."""
    sim = Sim(collect3, None, mode=mode, activities=FAKES)
    sim.run_pass()
    sim.signal("item", 1, "m1")
    sim.signal("item", 2, "m2")
    out = sim.run()
    assert out.status is PassStatus.BLOCKED  # third wait blocks
    assert [c[0] for c in out.consumed_signals] == [1, 2]
    assert sim.inbox == []
    sim.signal("item", 3, "m3")
    sim.run()
    assert sim.result() == [1, 2, 3]
    assert sim.outcomes[-1].unconsumed_signals == 0
    assert sim.types().count("SignalReceived") == 3
    # replay yields the same list without reading the buffer again
    assert assert_replays(sim, collect3) == [1, 2, 3]


def test_c06_signal_sent_right_after_start_is_seen_by_the_wait(mode: str) -> None:
    @workflow(name="ready")
    async def wf(ctx: WorkflowContext, key: str) -> Any:
        await act_a(key)
        return await ctx.wait_signal("ready", timeout=60)

    sim = Sim(wf, "k1", mode=mode, activities=FAKES)
    sim.signal("ready", {"key": "k1"}, "r1")  # before the first pass
    sim.run()
    assert sim.result() == {"key": "k1"}
    assert_replays(sim, wf)


def test_c06_signal_after_a_timed_out_wait_stays_buffered_for_a_later_wait(mode: str) -> None:
    @workflow(name="late")
    async def wf(ctx: WorkflowContext, _: None) -> list[Any]:
        try:
            await ctx.wait_signal("ready", timeout=5)
        except TimeoutError:
            first = "timeout"
        else:
            first = "got it"
        await ctx.sleep(100)
        return [first, await ctx.wait_signal("ready")]

    sim = Sim(wf, None, mode=mode)
    sim.run_pass()
    sim.advance(5)
    out = sim.run_pass()  # timeout fires
    assert out.status is PassStatus.BLOCKED
    sim.signal("ready", "late one")
    out = sim.run_pass()  # nobody waits: stays buffered
    assert out.consumed_signals == []
    assert out.unconsumed_signals == 1
    assert len(sim.inbox) == 1
    sim.advance(100)
    sim.run_pass()
    assert sim.result() == ["timeout", "late one"]
    assert_replays(sim, wf)


def test_c07_one_signal_is_never_handed_to_two_concurrent_waits(mode: str) -> None:
    @workflow(name="pay")
    async def wf(ctx: WorkflowContext, _: None) -> list[Any]:
        first = asyncio.ensure_future(ctx.wait_signal("pay"))
        second = asyncio.ensure_future(ctx.wait_signal("pay"))
        return list(await asyncio.gather(first, second))

    sim = Sim(wf, None, mode=mode)
    sim.run_pass()
    assert sim.signal("pay", "p1", "p1")
    assert not sim.signal("pay", "p1", "p1")  # duplicate message id: dropped by the store
    out = sim.run_pass()
    assert out.status is PassStatus.BLOCKED
    assert len(out.consumed_signals) == 1
    sim.signal("pay", "p2", "p2")
    sim.run_pass()
    assert sim.result() == ["p1", "p2"]
    assert_replays(sim, wf)


def test_c07_counting_loop_sees_each_message_once(mode: str) -> None:
    @workflow(name="count")
    async def wf(ctx: WorkflowContext, _: None) -> int:
        count = 0
        while True:
            v = await ctx.wait_signal("pay")
            count += 1
            if v["last"]:
                return count

    sim = Sim(wf, None, mode=mode)
    sim.run_pass()
    sim.signal("pay", {"last": False}, "p1")
    sim.signal("pay", {"last": False}, "p1")
    sim.run_pass()
    sim.signal("pay", {"last": False}, "p1")
    sim.signal("pay", {"last": True}, "p2")
    sim.run_pass()
    assert sim.result() == 2
    assert assert_replays(sim, wf) == 2


def test_signals_of_other_names_stay_buffered_and_order_is_per_arrival(mode: str) -> None:
    @workflow(name="names")
    async def wf(ctx: WorkflowContext, _: None) -> list[Any]:
        a = await ctx.wait_signal("a")
        b = await ctx.wait_signal("b")
        return [a, b]

    sim = Sim(wf, None, mode=mode)
    sim.signal("b", 1)
    sim.signal("a", 2)
    sim.signal("b", 3)
    out = sim.run_pass()
    # a arrives second but is consumed first; then the oldest b
    assert [sid for sid, _ in out.consumed_signals] == [2, 1]
    assert sim.result() == [2, 1]
    assert [s.payload for s in sim.inbox] == [b"3"]


def test_signal_payload_with_extra_fields_decodes_into_a_struct(mode: str) -> None:
    """unknown extra fields are tolerated."""

    class Go(msgspec.Struct):
        amount: int

    @workflow(name="shape")
    async def wf(ctx: WorkflowContext, _: None) -> int:
        go = await ctx.wait_signal("go", type=Go)
        return go.amount

    sim = Sim(wf, None, mode=mode)
    sim.signal("go", {"amount": 5, "currency": "EUR", "extra": [1, 2]})
    sim.run_pass()
    assert sim.result() == 5


@workflow(name="typed_wait")
async def typed_wait(ctx: WorkflowContext, _: None) -> int:
    return await ctx.wait_signal("amount", type=int, timeout=60)


def test_a_signal_whose_payload_does_not_fit_the_type_is_dropped_and_the_wait_goes_on(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    sim = Sim(typed_wait, None, mode=mode)
    sim.run_pass()
    sim.signal("amount", "not a number")
    with caplog.at_level("WARNING", logger="azync_flow.workflow"):
        out = sim.run_pass()
    assert out.status is PassStatus.BLOCKED  # still waiting, not failed
    assert len(out.consumed_signals) == 1  # the bad one is consumed, not left buffered
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "dropped signal 'amount'" in warning
    assert "does not match int" in warning
    sim.signal("amount", 7)
    sim.run_pass()
    assert sim.result() == 7
    caplog.clear()
    with caplog.at_level("WARNING", logger="azync_flow.workflow"):
        assert assert_replays(sim, typed_wait) == 7  # replay drops it again, silently
    assert caplog.records == []


@workflow(name="typed_wait_or_give_up")
async def typed_wait_or_give_up(ctx: WorkflowContext, _: None) -> int:
    try:
        return await ctx.wait_signal("amount", type=int, timeout=60)
    except TimeoutError:
        return -1


def test_a_dropped_signal_does_not_restart_the_waits_timeout(mode: str) -> None:
    sim = Sim(typed_wait_or_give_up, None, mode=mode)
    sim.run_pass()
    sim.advance(50)
    sim.signal("amount", [1, 2])
    assert sim.run_pass().status is PassStatus.BLOCKED
    sim.advance(10)  # 60 s after the wait began, 10 s after the dropped signal
    sim.run_pass()
    assert sim.result() == -1
    assert assert_replays(sim, typed_wait_or_give_up) == -1


def test_signal_and_timer_due_in_the_same_pass_fire_timer_first(mode: str) -> None:
    """New inputs of one pass are delivered in a fixed order: cancel, timers, signals."""

    @workflow(name="race")
    async def wf(ctx: WorkflowContext, _: None) -> str:
        try:
            return await ctx.wait_signal("s", timeout=10)
        except TimeoutError:
            return "timeout"

    sim = Sim(wf, None, mode=mode)
    sim.run_pass()
    sim.advance(10)
    sim.signal("s", "signal")
    sim.run_pass()
    assert sim.result() == "timeout"
    assert len(sim.inbox) == 1
    assert_replays(sim, wf)


@workflow(name="wait_one")
async def wait_one(ctx: WorkflowContext, _: None) -> Any:
    return await ctx.wait_signal("go")


def _undelivered_row(seq: int) -> tuple[int, str, bytes]:
    # as the store writes it (jsonb text: spaces, keys in its own order)
    return (
        seq,
        "SignalsUndelivered",
        b'{"seq": %d, "type": "SignalsUndelivered", "signals": '
        b'[{"name": "go", "signal_id": 7, "message_id": "m2"}]}' % seq,
    )


def test_signals_undelivered_after_the_outcome_replays_and_is_ignored() -> None:
    received = b'{"type":"SignalReceived","seq":1,"name":"go","payload":1,"message_id":"m1"}'
    history = [
        (1, "SignalReceived", received),
        (2, "WorkflowCompleted", b'{"type":"WorkflowCompleted","seq":2,"result":1}'),
        _undelivered_row(3),
    ]
    result = Replayer([wait_one]).replay(RecordedHistory.from_rows("wait_one", b"null", history))
    assert result.ok, result.error
    assert result.outcome.status is PassStatus.COMPLETED
    assert result.outcome.new_events == []


def test_signals_undelivered_of_a_run_ended_from_outside_replays() -> None:
    """A run failed or cancelled by a store verb has no terminal command; the
    record of its buffered signals is still tolerated by replay."""
    history = [_undelivered_row(1)]
    result = Replayer([wait_one]).replay(RecordedHistory.from_rows("wait_one", b"null", history))
    assert result.ok, result.error
    assert result.outcome.status is PassStatus.BLOCKED
