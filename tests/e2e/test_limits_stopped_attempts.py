"""A limit's slot under racing workers (real Workers, real PostgreSQL): two
workers never run two calls of a one-slot limit at once; a completion that
arrives after the call's schedule-to-close deadline is refused and the run
sees the timeout; a call ended from outside frees its slot as soon as its
attempt stopped, and the next call gets it at once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import datetime, timedelta

import msgspec
import pytest

from azync_flow import ConcurrencyLimit, WorkflowContext, activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.errors import ActivityTimeoutError
from azync_flow.runtime.worker_runtime import WORKFLOW_LEADERSHIP
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.worker import Worker

ONE = ConcurrencyLimit("one-psp-slot", 1)
IN_FLIGHT: list[str] = []
SEEN: dict[str, int] = {"max": 0}
STARTED: dict[str, datetime] = {}
STOPPED: dict[str, datetime] = {}
GATE: list[asyncio.Event] = []


def _now() -> datetime:
    return datetime.now().astimezone()


@activity(name="psp_call", limits=[ONE])
async def psp_call(name: str, hold_s: float) -> str:
    IN_FLIGHT.append(name)
    SEEN["max"] = max(SEEN["max"], len(IN_FLIGHT))
    STARTED[name] = _now()
    try:
        if hold_s < 0:
            await GATE[0].wait()
        else:
            await asyncio.sleep(hold_s)
        return name
    finally:
        STOPPED[name] = _now()
        IN_FLIGHT.remove(name)


class Call(msgspec.Struct):
    name: str
    hold_s: float  # negative: until the gate opens (or the call is cancelled)


@activity(name="psp_call_sync", limits=[ONE])
def psp_call_sync(name: str, hold_s: float) -> str:
    STARTED[name] = _now()
    time.sleep(hold_s)  # a thread: cancelling the attempt's task does not stop it
    STOPPED[name] = _now()
    return name


@workflow(name="psp_run_sync")
async def psp_run_sync(ctx: WorkflowContext, call: Call) -> str:
    return await psp_call_sync(call.name, call.hold_s)


@workflow(name="psp_run")
async def psp_run(ctx: WorkflowContext, call: Call) -> str:
    return await psp_call(call.name, call.hold_s)


@workflow(name="psp_run_by_deadline")
async def psp_run_by_deadline(ctx: WorkflowContext, call: Call) -> str:
    limited = psp_call.with_options(schedule_to_close=timedelta(seconds=1))
    try:
        return await limited(call.name, call.hold_s)
    except ActivityTimeoutError as exc:
        return f"timed out: {exc.kind}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    IN_FLIGHT.clear()
    SEEN["max"] = 0
    STARTED.clear()
    STOPPED.clear()
    GATE[:] = [asyncio.Event()]


def _worker(store: PostgresStore, lease: timedelta = timedelta(seconds=30)) -> Worker:
    w = Worker(
        store,
        lease=lease,
        poll_interval=timedelta(seconds=5),  # a freed slot must wake, not be polled for
        maintenance_interval=timedelta(milliseconds=200),
        handle_signals=False,
    )
    attach_workflows(
        w, [psp_run, psp_run_by_deadline, psp_run_sync], [psp_call, psp_call_sync],
        activity_concurrency=4,
    )  # fmt: skip
    return w


@pytest.fixture
async def two_workers(store: PostgresStore) -> AsyncIterator[list[Worker]]:
    workers = [_worker(store, lease=timedelta(seconds=6)) for _ in range(2)]
    async with AsyncExitStack() as stack:
        for w in workers:
            await stack.enter_async_context(w)
        yield workers


async def _until(check: Callable[[], Awaitable[bool]], what: str, within: float = 20) -> None:
    try:
        async with asyncio.timeout(within):
            while not await check():  # noqa: ASYNC110
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def _started(name: str) -> bool:
    return name in STARTED


async def _op(store: PostgresStore, wid: uuid.UUID) -> dict[str, object]:
    row = await store.pool.fetchrow(
        "SELECT id, state, lease_token, lease_until, close_deadline FROM azync_jobs"
        " WHERE run_id = $1 AND task_key <> '$wft'",
        wid,
    )
    assert row is not None
    return dict(row)


async def test_two_workers_racing_for_one_slot_never_run_two_calls_at_once(
    store: PostgresStore, two_workers: list[Worker]
) -> None:
    client = Client(store)
    handles = [await client.start(psp_run, Call(f"call-{i}", 0.05)) for i in range(8)]
    results = [await asyncio.wait_for(h.result(), 30) for h in handles]
    assert results == [f"call-{i}" for i in range(8)]
    assert SEEN["max"] == 1


async def test_a_terminated_calls_slot_frees_when_its_attempt_stops_and_the_next_call_gets_it(
    store: PostgresStore, two_workers: list[Worker]
) -> None:
    client = Client(store)
    first = await client.start(psp_run, Call("first", -1.0))  # runs until cancelled
    await _until(lambda: _started("first"), "the first call to start")
    second = await client.start(psp_run, Call("second", 0.0))
    await asyncio.sleep(0.5)
    assert "second" not in STARTED  # the slot is taken
    await first.terminate("stop", terminated_by="ops")
    held = await store.pool.fetchval(
        "SELECT held_until FROM azync_limit_slots WHERE limit_name = $1 AND holder IS NOT NULL",
        ONE.name,
    )
    assert held is not None  # held while its attempt may still run
    assert "second" not in STARTED
    assert await asyncio.wait_for(second.result(), 20) == "second"
    # the attempt stopped first (never two in flight), and the next call did not
    # wait for the terminated attempt's lease to end
    assert STOPPED["first"] <= STARTED["second"] < held
    assert SEEN["max"] == 1


async def test_a_terminated_sync_calls_slot_stays_held_while_its_thread_runs(
    store: PostgresStore, two_workers: list[Worker]
) -> None:
    client = Client(store)
    first = await client.start(psp_run_sync, Call("first", 3.0))
    await _until(lambda: _started("first"), "the first call to start")
    second = await client.start(psp_run_sync, Call("second", 0.0))
    await first.terminate("stop", terminated_by="ops")
    assert await asyncio.wait_for(second.result(), 30) == "second"
    # its worker cancelled the attempt after about a third of the lease, but the
    # thread ran on: the next call waited for the held slot, never beside it
    assert STOPPED["first"] <= STARTED["second"]


async def test_a_completion_after_the_schedule_to_close_deadline_is_refused_and_the_run_times_out(
    store: PostgresStore,
) -> None:
    # the timeouts step does not run until the test lets it: a held election
    blocker = await store.acquire_leadership_lease(
        WORKFLOW_LEADERSHIP, timedelta(minutes=5), holder="test"
    )
    assert blocker is not None
    async with _worker(store):
        client = Client(store)
        late = await client.start(psp_run_by_deadline, Call("late", -1.0))
        await _until(lambda: _started("late"), "the call to start")
        waiting = await client.start(psp_run, Call("next", 0.0))

        async def past_deadline() -> bool:
            return bool(
                await store.pool.fetchval(
                    "SELECT close_deadline < now() FROM azync_jobs"
                    " WHERE run_id = $1 AND task_key <> '$wft'",
                    late.id,
                )
            )

        await _until(past_deadline, "the deadline to pass")
        GATE[0].set()  # the attempt completes after its deadline
        assert await asyncio.wait_for(waiting.result(), 10) == "next"
        op = await _op(store, late.id)
        assert op["state"] == "active"  # refused: not completed, not yet timed out
        history = [type(e.event).__name__ for e in await client.get_handle(late.id).history()]
        assert "ActivityCompleted" not in history
        assert SEEN["max"] == 1
        await blocker.release()  # the worker leads the timeouts step now
        assert await asyncio.wait_for(late.result(), 20) == "timed out: schedule_to_close"
    assert (await late.describe()).state == WorkflowState.SUCCEEDED
    assert (await _op(store, late.id))["state"] == "dead"
