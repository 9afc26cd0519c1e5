"""Workflows end to end on a real PostgreSQL on a real Worker (``LocalRuntime`` is a
Worker with ``attach_workflows``): lease, pass, commit.

Each test runs with the sticky cache on and off (``cache_size`` 1000 / 0).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import (
    ActivityError,
    IdempotencyConflictError,
    NotFoundError,
    WorkflowFailedError,
)
from azync_flow.replay import Replayer
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

CALLS: list[str] = []


class Order(msgspec.Struct):
    id: str
    amount: int


@activity(name="reserve")
def reserve(order: Order) -> str:
    CALLS.append(f"reserve:{order.id}")
    return f"res-{order.id}"


@activity(name="charge")
async def charge(order: Order) -> dict[str, Any]:
    CALLS.append(f"charge:{order.id}")
    if order.amount < 0:
        raise ValueError(f"bad amount {order.amount}")
    return {"charged": order.amount}


@activity(name="refund")
def refund(order: Order) -> str:
    CALLS.append(f"refund:{order.id}")
    return "refunded"


@activity(name="ship")
def ship(order: Order) -> str:
    CALLS.append(f"ship:{order.id}")
    return "shipped"


@activity(name="echo")
def echo(value: Any) -> Any:
    return value


@workflow(name="order", version="1")
async def order_workflow(ctx: WorkflowContext, order: Order) -> dict[str, Any]:
    reservation = await reserve(order)
    try:
        payment = await charge.with_options(
            retry=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(0), jitter=0)
        )(order)
    except ActivityError as err:
        await refund(order)
        return {"status": "failed", "error": err.error_type, "reservation": reservation}
    try:
        approval = await ctx.wait_signal("approve", timeout=timedelta(hours=1))
    except TimeoutError:
        await refund(order)
        return {"status": "timed out"}
    await ctx.sleep(timedelta(minutes=5))
    shipped = await ship(order)
    return {"status": shipped, "payment": payment, "approval": approval}


@workflow(name="echo_wf")
async def echo_workflow(ctx: WorkflowContext, value: Any) -> Any:
    got = await echo(value)
    sig = await ctx.wait_signal("s")
    return [got, sig]


WORKFLOWS = [order_workflow, echo_workflow]
ACTIVITIES = [reserve, charge, refund, ship, echo]


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def runtime(request: pytest.FixtureRequest, store: PostgresStore) -> LocalRuntime:
    CALLS.clear()
    return LocalRuntime(store, Registry(WORKFLOWS, ACTIVITIES), cache_size=request.param)


def _with_activity(store: PostgresStore, runtime: LocalRuntime, defn: Any) -> LocalRuntime:
    """A runtime like ``runtime`` (same cache mode) that also runs ``defn``: a
    Worker's activity loops are fixed when the workflows are registered."""
    registry = runtime.registry
    registry.add_activity(defn)
    return LocalRuntime(store, registry, cache_size=runtime.workflows.cache.max_size)


async def test_order_completes_after_signal_and_durable_sleep(
    store: PostgresStore, runtime: LocalRuntime, clock: MovableClock
) -> None:
    client = Client(store)
    handle = await client.start(order_workflow, Order("o1", 30))
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.RUNNING
    assert await handle.signal("approve", {"by": "ann"}, message_id="a1")
    assert not await handle.signal("approve", {"by": "ann"}, message_id="a1")  # duplicate
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.RUNNING  # sleeping 5 min
    clock.advance(timedelta(minutes=5, seconds=1))
    await runtime.run_until_idle()
    result = await handle.result(timeout=5)
    assert result == {"status": "shipped", "payment": {"charged": 30}, "approval": {"by": "ann"}}
    assert CALLS == ["reserve:o1", "charge:o1", "ship:o1"]
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types.count("SignalReceived") == 1
    assert types[-1] == "WorkflowCompleted"
    # the stored history replays cleanly against the current code
    recorded = await handle.recorded_history()
    verdict = Replayer([order_workflow]).replay(recorded)
    assert verdict.ok, verdict.error


async def test_activity_failure_after_retry_budget_compensates(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(order_workflow, Order("o2", -1))
    await runtime.run_until_idle()
    result = await handle.result(timeout=5)
    assert result == {"status": "failed", "error": "ValueError", "reservation": "res-o2"}
    assert CALLS == ["reserve:o2", "charge:o2", "charge:o2", "refund:o2"]
    failed = [e.event for e in await handle.history() if type(e.event).__name__ == "ActivityFailed"]
    assert failed[0].attempts == 2
    assert "bad amount -1" in failed[0].message


async def test_approval_timeout_is_a_durable_timer(
    store: PostgresStore, runtime: LocalRuntime, clock: MovableClock
) -> None:
    handle = await Client(store).start(order_workflow, Order("o3", 5))
    await runtime.run_until_idle()
    clock.advance(timedelta(hours=1, seconds=1))
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == {"status": "timed out"}
    assert CALLS == ["reserve:o3", "charge:o3", "refund:o3"]


async def test_signal_sent_right_after_start_is_buffered_c06(
    store: PostgresStore, runtime: LocalRuntime, clock: MovableClock
) -> None:
    client = Client(store)
    handles = []
    for i in range(10):
        handle = await client.start(order_workflow, Order(f"k{i}", 1))
        await handle.signal("approve", {"key": f"k{i}"}, message_id=f"r{i}")
        handles.append(handle)
    await runtime.run_until_idle()
    clock.advance(timedelta(minutes=6))
    await runtime.run_until_idle()
    for i, handle in enumerate(handles):
        assert (await handle.result(timeout=5))["approval"] == {"key": f"k{i}"}


async def test_cancel_lets_the_workflow_clean_up(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    @workflow(name="cancel_me")
    async def cancel_me(ctx: WorkflowContext, order: Order) -> str:
        await reserve(order)
        try:
            await ctx.wait_signal("never")
        except asyncio.CancelledError:
            await refund(order)
            raise
        return "unreachable"

    runtime.registry.add_workflow(cancel_me)
    handle = await Client(store).start(cancel_me, Order("c1", 1))
    await runtime.run_until_idle()
    await handle.cancel()
    await runtime.run_until_idle()
    view = await handle.describe()
    assert view.state == WorkflowState.CANCELLED
    assert CALLS == ["reserve:c1", "refund:c1"]
    with pytest.raises(NotFoundError):
        await handle.signal("never", 1)


async def test_workflow_exception_fails_the_execution(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    @workflow(name="raises")
    async def raises(ctx: WorkflowContext, _: None) -> None:
        raise RuntimeError("broken \x00 invariant")

    runtime.registry.add_workflow(raises)
    handle = await Client(store).start(raises, None)
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError) as info:
        await handle.result(timeout=5)
    assert "broken \\x00 invariant" in str(info.value)


@pytest.mark.parametrize(
    "value",
    [{"s": "a\u0000b"}, "emoji 🎉 𝄞", {"z": 1, "a": [1, {"b": None}]}],
    ids=["nul", "emoji", "order"],
)
async def test_payloads_round_trip_byte_for_byte(
    store: PostgresStore, runtime: LocalRuntime, value: Any
) -> None:
    handle = await Client(store).start(echo_workflow, value)
    await handle.signal("s", value)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == [value, value]
    encoded = msgspec.json.encode(value)
    view = await handle.describe()
    assert view.input == encoded
    assert view.result == b"[" + encoded + b"," + encoded + b"]"


async def test_ten_mib_input_round_trips(store: PostgresStore, runtime: LocalRuntime) -> None:
    big = "x\u0000🎉" * (10 * 1024 * 1024 // 8)
    handle = await Client(store).start(echo_workflow, big)
    await handle.signal("s", "small")
    await runtime.run_until_idle()
    assert await handle.result(timeout=30) == [big, "small"]


async def test_changed_code_suspends_and_resume_after_fix_continues(
    store: PostgresStore, clock: MovableClock
) -> None:
    CALLS.clear()

    @workflow(name="evolving")
    async def v1(ctx: WorkflowContext, order: Order) -> str:
        await reserve(order)
        await ctx.wait_signal("go")
        return await ship(order)

    @workflow(name="evolving")
    async def v2(ctx: WorkflowContext, order: Order) -> str:
        await refund(order)  # inserted before the recorded position: not gated
        await ctx.wait_signal("go")
        return await ship(order)

    activities = [reserve, refund, ship]
    handle = await Client(store).start(v1, Order("e1", 1))
    await LocalRuntime(store, Registry([v1], activities)).run_until_idle()
    await handle.signal("go")
    await LocalRuntime(store, Registry([v2], activities)).run_until_idle()
    view = await handle.describe()
    assert view.state == WorkflowState.SUSPENDED
    assert CALLS == ["reserve:e1"]  # refund never ran
    # the view says why: the reason, and the history seq where the code disagreed
    assert "seq 1" in view.suspend_reason
    assert "reserve" in view.suspend_reason
    assert "refund" in view.suspend_reason
    assert (view.suspend_seq, view.suspend_operation_id) == (1, None)
    # the Replayer flags the same history before a deploy
    assert not Replayer([v2]).replay(await handle.recorded_history()).ok
    await handle.resume()
    await LocalRuntime(store, Registry([v1], activities)).run_until_idle()
    assert await handle.result(timeout=5) == "shipped"
    assert CALLS == ["reserve:e1", "ship:e1"]


async def test_a_forbidden_call_suspends_and_describe_says_which_call(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    import time

    @workflow(name="clock_reader")
    async def clock_reader(ctx: WorkflowContext, _: None) -> float:
        return time.time()  # wall clock inside a workflow: forbidden

    runtime.registry.add_workflow(clock_reader)
    handle = await Client(store).start(clock_reader, None)
    await runtime.run_until_idle()
    view = await handle.describe()
    assert view.state == WorkflowState.SUSPENDED
    assert "time.time" in view.suspend_reason
    assert "forbidden" in view.suspend_reason
    assert (view.suspend_seq, view.suspend_operation_id) == (None, None)
    (listed,) = (await Client(store).list(clock_reader, state="suspended")).executions
    assert listed.suspend_reason == view.suspend_reason


async def test_idempotent_start_returns_the_live_execution_and_rejects_other_input(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    client = Client(store)
    first = await client.start(order_workflow, Order("i1", 1), idempotency_key="K")
    again = await client.start(order_workflow, Order("i1", 1), idempotency_key="K")
    assert first.started
    assert not again.started
    assert again.id == first.id
    with pytest.raises(IdempotencyConflictError):
        await client.start(order_workflow, Order("i1", 2), idempotency_key="K")


async def test_each_activity_runs_once_per_step_in_sticky_and_full_modes(
    store: PostgresStore, runtime: LocalRuntime, clock: MovableClock
) -> None:
    handle = await Client(store).start(order_workflow, Order("once", 3))
    await handle.signal("approve", True)
    await runtime.run_until_idle()
    clock.advance(timedelta(minutes=6))
    await runtime.run_until_idle()
    assert (await handle.result(timeout=5))["status"] == "shipped"
    assert CALLS == ["reserve:once", "charge:once", "ship:once"]
    assert runtime.workflows.conflicts == 0


async def test_uncertain_activity_suspends_until_an_operator_decides(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    from azync_flow.errors import Uncertain

    attempts: list[int] = []

    @activity(name="wire", idempotent=False)
    def wire(amount: int) -> str:
        attempts.append(amount)
        raise Uncertain("bank timed out after the request was sent")

    @workflow(name="payout")
    async def payout(ctx: WorkflowContext, amount: int) -> str:
        return await wire(amount)

    runtime.registry.add_workflow(payout)
    runtime = _with_activity(store, runtime, wire)
    client = Client(store)
    handle = await client.start(payout, 70)
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    assert attempts == [70]  # never retried blindly
    [op] = await client.list_uncertain(handle.id)
    await client.resolve_uncertain(
        op, "complete", result="wired (confirmed by bank)", decided_by="ann"
    )
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "wired (confirmed by bank)"
    assert attempts == [70]
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types == [
        "ActivityScheduled",
        "OperationUncertain",
        "OperationResolved",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]


async def test_retried_signal_after_completion_gets_the_same_answer_c07(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    @workflow(name="pay_loop")
    async def pay_loop(ctx: WorkflowContext, _: None) -> int:
        count = 0
        while True:
            v = await ctx.wait_signal("pay")
            count += 1
            if v["last"]:
                return count

    runtime.registry.add_workflow(pay_loop)
    handle = await Client(store).start(pay_loop, None)
    assert await handle.signal("pay", {"last": False}, message_id="p1")
    assert not await handle.signal("pay", {"last": False}, message_id="p1")
    await runtime.run_until_idle()
    assert not await handle.signal("pay", {"last": False}, message_id="p1")
    assert await handle.signal("pay", {"last": True}, message_id="p2")
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 2
    assert not await handle.signal("pay", {"last": True}, message_id="p2")  # after completion


async def test_a_pass_no_worker_can_run_waits_untouched_for_one_that_can(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    """A task for a workflow this worker does not register is never leased by it
    (not lost, not failed, no attempt spent); a worker that registers it
    completes the run."""

    @workflow(name="elsewhere")
    async def elsewhere(ctx: WorkflowContext, x: int) -> int:
        return x * 2

    handle = await Client(store).start(elsewhere, 21)
    await runtime.run_until_idle()  # runtime without `elsewhere`
    row = await store.pool.fetchrow(
        "SELECT state, attempt, last_error FROM azync_jobs WHERE run_id = $1 AND kind = '$wft'",
        handle.id,
    )
    assert (row["state"], row["attempt"], row["last_error"]) == ("pending", 0, "")
    await LocalRuntime(store, Registry([elsewhere], [])).run_until_idle()
    assert await handle.result(timeout=5) == 42


async def test_c19_reused_id_returns_the_finished_run_and_rejects_other_args_or_type(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    """With execution ids as keys: same id + same input after completion returns
    the stored result without a new run; other input or another workflow type is an
    explicit conflict and runs nothing."""
    import uuid

    client = Client(store)
    run_id = uuid.uuid4()
    first = await client.start(echo_workflow, 1, id=run_id)
    await first.signal("s", 1)
    await runtime.run_until_idle()
    assert await first.result(timeout=5) == [1, 1]
    again = await client.start(echo_workflow, 1, id=run_id)
    assert not again.started
    assert await again.result(timeout=5) == [1, 1]
    with pytest.raises(IdempotencyConflictError):
        await client.start(echo_workflow, 2, id=run_id)
    with pytest.raises(IdempotencyConflictError):
        await client.start(order_workflow, Order("x", 1), id=run_id)
    assert await runtime.run_until_idle() == 0  # nothing new to run
    history = await first.history()
    assert sum(type(e.event).__name__ == "WorkflowCompleted" for e in history) == 1


async def test_activity_heartbeat_extends_its_lease(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    from azync_flow.activity import current_activity

    leases: list[Any] = []

    @activity(name="long_haul", heartbeat_timeout=timedelta(minutes=10))
    async def long_haul(n: int) -> int:
        info = current_activity()
        assert info is not None
        before = await store.pool.fetchval(
            "SELECT lease_until FROM azync_jobs WHERE id = $1", info.job.id
        )
        await info.heartbeat()
        after, left = await store.pool.fetchrow(
            "SELECT lease_until, lease_until - now() FROM azync_jobs WHERE id = $1", info.job.id
        )
        leases.append((before, after, left, info.seq, info.attempt))
        return n

    @workflow(name="hauler")
    async def hauler(ctx: WorkflowContext, n: int) -> int:
        return await long_haul(n)

    runtime.registry.add_workflow(hauler)
    runtime = _with_activity(store, runtime, long_haul)
    handle = await Client(store).start(hauler, 5)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 5
    [(before, after, left, seq, attempt)] = leases
    assert after > before  # the heartbeat moved it on
    assert left > timedelta(minutes=9)  # by heartbeat_timeout, not the worker's 30 s lease
    assert (seq, attempt) == (1, 1)
