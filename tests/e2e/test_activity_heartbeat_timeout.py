"""``heartbeat_timeout`` is enforced with real workers and real lease expiry.

The worker's lease is 30 s here, so without enforcement the background
renewal would keep a silent attempt alive for the whole test: only the
attempt's own heartbeats may renew its lease.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import StatusCode

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.activity import current_activity
from azync_flow.client import Client
from azync_flow.errors import LeaseLost, NotFoundError
from azync_flow.replay.events import ActivityCompleted, OperationUncertain
from azync_flow.retry import RetryPolicy
from azync_flow.runtime import WorkflowRuntime
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing_otel import SpanCapture, nesting_violations
from azync_flow.worker import Worker

HEARTBEAT = timedelta(seconds=1)
BACKOFF = RetryPolicy(initial_interval=timedelta(milliseconds=500), jitter=0, maximum_attempts=3)

STARTS: list[tuple[int, float]] = []
CANCELLED: list[int] = []
LATE: dict[str, Any] = {}


def _now() -> float:
    return asyncio.get_running_loop().time()


@activity(name="fetch_quote", heartbeat_timeout=HEARTBEAT, retry=BACKOFF)
async def fetch_quote(n: int) -> str:
    info = current_activity()
    assert info is not None
    STARTS.append((info.attempt, _now()))
    if info.attempt == 1:
        try:
            await asyncio.sleep(60)  # a stuck socket: no heartbeat, no progress
        except asyncio.CancelledError:
            CANCELLED.append(info.attempt)
            raise
    return f"quote {n} on attempt {info.attempt}"


@activity(name="stubborn_quote", heartbeat_timeout=HEARTBEAT, retry=BACKOFF)
async def stubborn_quote(n: int) -> str:
    """Attempt 1 ignores its cancellation and reports after attempt 2 finished."""
    info = current_activity()
    assert info is not None
    if info.attempt > 1:
        return f"quote {n} on attempt {info.attempt}"
    LATE["job"] = info.job
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        CANCELLED.append(info.attempt)
    await LATE["retry_done"].wait()
    try:
        await info.heartbeat()
    except LeaseLost as exc:
        LATE["heartbeat"] = exc
    return "late quote of attempt 1"


@activity(name="send_payment", idempotent=False, heartbeat_timeout=HEARTBEAT)
async def send_payment(n: int) -> str:
    STARTS.append((1, _now()))
    await asyncio.sleep(60)  # the bank call hangs without heartbeating
    return "paid"


@activity(name="long_export", heartbeat_timeout=timedelta(milliseconds=1200))
async def long_export(n: int) -> int:
    info = current_activity()
    assert info is not None
    # 4 s: over three heartbeat timeouts, heartbeating every 0.2 s (a timeout
    # six beats long, so a loaded machine's late beat does not reap it)
    for _ in range(20):
        await asyncio.sleep(0.2)
        await info.heartbeat()
    return info.attempt


ACTIVITIES = {a.name: a for a in (fetch_quote, stubborn_quote, send_payment, long_export)}


@workflow(name="one_call")
async def one_call(ctx: WorkflowContext, call: tuple[str, int]) -> Any:
    """Calls the activity named ``call[0]`` with ``call[1]`` and returns its result."""
    name, n = call
    return await ACTIVITIES[name](n)


@pytest.fixture(autouse=True)
def _reset() -> None:
    STARTS.clear()
    CANCELLED.clear()
    LATE.clear()


class _Worker(Worker):
    runtime: WorkflowRuntime


def _worker(store: PostgresStore, tracer_provider: TracerProvider | None = None) -> _Worker:
    worker = _Worker(
        store,
        lease=timedelta(seconds=30),
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=100),
        shutdown_grace=timedelta(milliseconds=200),
        handle_signals=False,
    )
    worker.runtime = attach_workflows(
        worker, [one_call], list(ACTIVITIES.values()), tracer_provider=tracer_provider
    )
    return worker


def _loop(worker: Worker, name: str) -> Any:
    return worker.loops[(Source.WORKFLOW, f"$op:{name}@1")]


async def _op_row(store: PostgresStore, run_id: object) -> Any:
    return await store.pool.fetchrow(
        "SELECT * FROM azync_jobs WHERE run_id = $1 AND task_key <> '$wft'", run_id
    )


async def test_a_silent_attempt_is_reaped_and_retried_after_backoff(
    store: PostgresStore,
) -> None:
    worker = _worker(store)
    handle = await Client(store).start(one_call, ("fetch_quote", 7))
    async with worker:
        result = await handle.result(timeout=15)
    assert result == "quote 7 on attempt 2"
    (first, t1), (second, t2) = STARTS
    assert (first, second) == (1, 2)
    # lost after the heartbeat timeout, then the policy's backoff before attempt 2
    assert t2 - t1 >= HEARTBEAT.total_seconds() + 0.5
    assert CANCELLED == [1]  # the hung coroutine no longer holds a slot
    assert _loop(worker, "fetch_quote").stats.lost == 1
    completed = [h.event for h in await handle.history() if isinstance(h.event, ActivityCompleted)]
    assert [c.attempts for c in completed] == [2]
    row = await _op_row(store, handle.id)
    assert (row["attempt"], row["reap_count"], row["state"]) == (2, 1, "succeeded")


def _attempt_spans(capture: SpanCapture, name: str) -> list[tuple[Any, StatusCode, str | None]]:
    """(attempt, status, description) of each exported ``activity <name>`` span."""
    rows = [
        ((s.attributes or {}).get("azync.attempt"), s.status.status_code, s.status.description)
        for s in capture.named(f"activity {name}")
    ]
    return sorted(rows, key=lambda r: (r[0], r[1].value, r[2] or ""))


async def test_a_lost_attempt_is_exported_once_by_the_reaper_not_again_by_its_worker(
    store: PostgresStore,
) -> None:
    capture = SpanCapture()
    worker = _worker(store, capture.provider)
    client = Client(store, tracer_provider=capture.provider)
    handle = await client.start(one_call, ("fetch_quote", 5))
    async with worker:
        assert await handle.result(timeout=15) == "quote 5 on attempt 2"
    assert CANCELLED == [1]
    assert _attempt_spans(capture, "fetch_quote") == [
        (1, StatusCode.ERROR, "lease expired"),
        (2, StatusCode.UNSET, None),
    ]
    assert nesting_violations(capture.spans()) == []


async def test_the_lost_attempt_late_heartbeat_and_completion_are_refused(
    store: PostgresStore,
) -> None:
    LATE["retry_done"] = asyncio.Event()
    capture = SpanCapture()
    worker = _worker(store, capture.provider)
    runtime = worker.runtime
    handle = await Client(store, tracer_provider=capture.provider).start(
        one_call, ("stubborn_quote", 3)
    )
    async with worker:
        result = await handle.result(timeout=15)
        old = LATE["job"]
        with pytest.raises(NotFoundError):  # the store's fence: the old token owns nothing
            await store.extend_lease(old.id, old.lease_token, timedelta(seconds=30))
        LATE["retry_done"].set()
        for _ in range(200):
            if not _loop(worker, "stubborn_quote").in_flight:
                break
            await asyncio.sleep(0.02)
        late_ignored = runtime.activities.late_ignored
    assert result == "quote 3 on attempt 2"
    assert CANCELLED == [1]
    assert isinstance(LATE["heartbeat"], LeaseLost)
    assert late_ignored == 1  # the late report was fenced off, not recorded
    completed = [h.event for h in await handle.history() if isinstance(h.event, ActivityCompleted)]
    assert [(c.attempts, bytes(c.result)) for c in completed] == [(2, b'"quote 3 on attempt 2"')]
    # the fenced-off late report exports nothing: the reaper closed attempt 1
    assert _attempt_spans(capture, "stubborn_quote") == [
        (1, StatusCode.ERROR, "lease expired"),
        (2, StatusCode.UNSET, None),
    ]
    assert nesting_violations(capture.spans()) == []


async def test_a_silent_non_idempotent_attempt_is_parked_uncertain_and_the_run_suspended(
    store: PostgresStore,
) -> None:
    worker = _worker(store)
    client = Client(store)
    handle = await client.start(one_call, ("send_payment", 9))
    async with worker:
        for _ in range(150):
            if (await handle.describe()).state == WorkflowState.SUSPENDED:
                break
            await asyncio.sleep(0.1)
        view = await handle.describe()
        ops = await client.list_uncertain(handle.id)
    assert view.state == WorkflowState.SUSPENDED
    assert [op.activity for op in ops] == ["send_payment"]
    assert len(STARTS) == 1  # never re-run blindly
    row = await _op_row(store, handle.id)
    assert (row["state"], row["attempt"]) == ("uncertain", 1)
    events = [h.event for h in await handle.history()]
    assert any(isinstance(e, OperationUncertain) for e in events)


async def test_a_heartbeating_attempt_outlives_several_timeouts_as_attempt_one(
    store: PostgresStore,
) -> None:
    worker = _worker(store)
    handle = await Client(store).start(one_call, ("long_export", 1))
    async with worker:
        assert await handle.result(timeout=15) == 1
    assert _loop(worker, "long_export").stats.lost == 0
    row = await _op_row(store, handle.id)
    assert (row["attempt"], row["reap_count"]) == (1, 0)
