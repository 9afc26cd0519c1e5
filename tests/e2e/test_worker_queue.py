"""Queue handlers on a real worker: ack, retries with backoff, dead letters, payloads."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from azync_flow.errors import Skip, Snooze
from azync_flow.retry import RetryPolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.postgres._base import job_from_row
from azync_flow.store.queue import DequeueParams, EnqueueParams, Job, JobState, Source
from azync_flow.testing import MovableClock
from azync_flow.worker import JobContext, Worker

FAST = {
    "poll_interval": timedelta(milliseconds=50),
    "maintenance_interval": timedelta(milliseconds=50),
    "handle_signals": False,
}


async def enqueue(store: PostgresStore, kind: str, payload: Any, **kw: Any) -> uuid.UUID:
    job_id = uuid.uuid4()
    raw = payload if isinstance(payload, bytes) else msgspec.json.encode(payload)
    assert await store.enqueue(EnqueueParams(id=job_id, kind=kind, payload=raw, **kw))
    return job_id


async def get(store: PostgresStore, job_id: uuid.UUID) -> Job:
    row = await store.pool.fetchrow("SELECT * FROM azync_jobs WHERE id = $1", job_id)
    assert row is not None
    return job_from_row(row)


async def test_handler_return_acks_job_and_context_carries_job_facts(
    store: PostgresStore,
) -> None:
    seen: list[tuple[Any, int, str, dict[str, str]]] = []
    worker = Worker(store, **FAST)

    @worker.register("greet")
    async def greet(payload: dict[str, str], ctx: JobContext) -> None:
        seen.append((payload, ctx.attempt, ctx.kind, dict(ctx.meta)))

    job_id = await enqueue(store, "greet", {"name": "ada"}, meta={"tenant": "t1"})
    await worker.run_until_idle()

    assert seen == [({"name": "ada"}, 1, "greet", {"tenant": "t1"})]
    job = await get(store, job_id)
    assert job.state == JobState.SUCCEEDED
    assert job.attempt == 1


class Order(msgspec.Struct):
    id: int
    items: list[str]


async def test_typed_payload_decodes_to_struct_and_bad_payload_is_dead_at_once(
    store: PostgresStore,
) -> None:
    got: list[Order] = []
    worker = Worker(store, **FAST)

    @worker.register("order")
    async def handle(order: Order) -> None:
        got.append(order)

    good = await enqueue(store, "order", {"id": 7, "items": ["a", "b"]})
    bad = await enqueue(store, "order", {"id": "seven"})
    await worker.run_until_idle()

    assert got == [Order(id=7, items=["a", "b"])]
    assert (await get(store, good)).state == JobState.SUCCEEDED
    dead = await get(store, bad)
    assert dead.state == JobState.DEAD
    assert dead.attempt == 1
    assert dead.last_error.startswith(
        "PayloadError: payload of kind 'order' does not match Order: "
    )


async def test_failing_handler_retries_with_backoff_then_dead_letters(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(datetime.now(UTC))
    policy = RetryPolicy(
        initial_interval=timedelta(seconds=10),
        backoff_coefficient=3.0,
        maximum_interval=timedelta(seconds=60),
        jitter=0.1,
    )
    calls: list[int] = []
    worker = Worker(store, **FAST)

    @worker.register("flaky", max_attempts=3, retry=policy)
    async def flaky(payload: Any, ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        raise ValueError(f"boom {ctx.attempt}")

    job_id = await enqueue(store, "flaky", {})
    expected_base = [10.0, 30.0]
    for attempt, base in enumerate(expected_base, start=1):
        await worker.run_until_idle()
        job = await get(store, job_id)
        assert job.state == JobState.SCHEDULED
        assert job.last_error == f"ValueError: boom {attempt}"
        delay = (job.run_at - job.failed_at).total_seconds()
        assert base * 0.9 <= delay <= base * 1.1
        # Not due yet: an idle pass must not run it early.
        clock.advance(timedelta(seconds=base * 0.85))
        await worker.run_until_idle()
        assert calls == list(range(1, attempt + 1))
        clock.advance(timedelta(seconds=base * 0.3))
    await worker.run_until_idle()

    assert calls == [1, 2, 3]
    job = await get(store, job_id)
    assert job.state == JobState.DEAD
    assert job.last_error == "ValueError: boom 3"
    attempts = await store.job_attempts(Source.QUEUE, job_id)
    assert [(a.attempt, a.error) for a in attempts] == [
        (1, "ValueError: boom 1"),
        (2, "ValueError: boom 2"),
        (3, "ValueError: boom 3"),
    ]


class Fatal(Exception):
    pass


class VeryFatal(Fatal):
    pass


async def test_non_retryable_error_type_dead_letters_on_first_attempt(
    store: PostgresStore,
) -> None:
    worker = Worker(store, retry=RetryPolicy(non_retryable_error_types=("Fatal",)), **FAST)

    @worker.register("strict", max_attempts=10)
    async def strict(payload: Any) -> None:
        raise VeryFatal("bad card\x00 number")

    job_id = await enqueue(store, "strict", None)
    await worker.run_until_idle()
    job = await get(store, job_id)
    assert job.state == JobState.DEAD
    assert job.attempt == 1
    # NUL is shown escaped so recording the failure cannot fail.
    assert job.last_error == "VeryFatal: bad card\\x00 number"


async def test_job_of_unregistered_kind_is_dead_with_clear_error(store: PostgresStore) -> None:
    worker = Worker(store, **FAST)

    @worker.register("known")
    async def known(payload: Any) -> None:
        return None

    job_id = await enqueue(store, "ghost", {})
    (job,) = await store.dequeue_batch(
        Source.QUEUE, DequeueParams(kind="ghost", limit=1, lease=timedelta(seconds=30))
    )
    loop = worker.loops[(Source.QUEUE, "known")]
    from azync_flow.worker import LeaseHandle

    handle = LeaseHandle(store, job, timedelta(seconds=30), asyncio.get_running_loop().time())
    await loop.runner(job, handle)
    dead = await get(store, job_id)
    assert dead.state == JobState.DEAD
    assert dead.last_error == ("UnknownKindError: no handler is registered for kind 'ghost'")


async def test_register_rejects_sync_handlers_and_duplicate_kinds(store: PostgresStore) -> None:
    worker = Worker(store, **FAST)

    def sync_handler(payload: Any) -> None:
        return None

    with pytest.raises(TypeError, match="async function"):
        worker.register("k", sync_handler)  # type: ignore[type-var]

    async def ok(payload: Any) -> None:
        return None

    worker.register("k", ok)
    with pytest.raises(ValueError, match="already registered"):
        worker.register("k", ok)


async def test_snoozing_never_spends_attempts_and_first_failure_gets_first_backoff(
    store: PostgresStore, clock: MovableClock
) -> None:
    """10 snoozes, one failure, then success on the second real attempt of 3."""
    clock.set(datetime.now(UTC))
    policy = RetryPolicy(initial_interval=timedelta(seconds=5), jitter=0.1)
    calls: list[int] = []
    worker = Worker(store, **FAST)

    @worker.register("poll", max_attempts=3, retry=policy)
    async def poll(payload: Any, ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        if len(calls) <= 10:
            raise Snooze(timedelta(seconds=1))
        if len(calls) == 11:
            raise RuntimeError("flaky upstream")

    job_id = await enqueue(store, "poll", {})
    for _ in range(10):
        await worker.run_until_idle()
        job = await get(store, job_id)
        assert job.state == JobState.SCHEDULED
        assert job.attempt == 0
        clock.advance(timedelta(seconds=1))
    await worker.run_until_idle()
    failed = await get(store, job_id)
    assert failed.state == JobState.SCHEDULED
    assert failed.attempt == 1
    assert 4.5 <= (failed.run_at - failed.failed_at).total_seconds() <= 5.5
    clock.advance(timedelta(seconds=6))
    await worker.run_until_idle()

    assert calls == [1] * 11 + [2]
    done = await get(store, job_id)
    assert done.state == JobState.SUCCEEDED
    assert done.attempt == 2
    attempts = await store.job_attempts(Source.QUEUE, job_id)
    assert [(a.attempt, a.error) for a in attempts] == [(1, "RuntimeError: flaky upstream")]


async def test_skip_settles_job_as_skipped_with_reason(store: PostgresStore) -> None:
    worker = Worker(store, **FAST)

    @worker.register("maybe")
    async def maybe(payload: Any) -> None:
        try:
            raise Skip("order already shipped")
        except Exception:  # a handler's broad except must not swallow the signal
            pytest.fail("Skip was caught as an Exception")

    job_id = await enqueue(store, "maybe", {})
    await worker.run_until_idle()
    job = await get(store, job_id)
    assert job.state == JobState.SKIPPED
    assert job.last_error == "order already shipped"


async def test_interceptors_wrap_each_attempt_and_see_its_outcome(store: PostgresStore) -> None:
    events: list[str] = []
    worker = Worker(store, retry=RetryPolicy(initial_interval=timedelta(0), jitter=0), **FAST)

    async def outer(ctx: JobContext, call_next: Any) -> None:
        events.append(f"outer>{ctx.attempt}")
        try:
            await call_next()
        except Exception as exc:
            events.append(f"outer!{type(exc).__name__}")
            raise
        events.append("outer<")

    async def inner(ctx: JobContext, call_next: Any) -> None:
        events.append("inner>")
        await call_next()

    worker.add_interceptor(outer)
    worker.add_interceptor(inner)

    @worker.register("wrapped", max_attempts=2)
    async def wrapped(payload: Any) -> None:
        events.append("handler")
        if len([e for e in events if e == "handler"]) == 1:
            raise ValueError("first try fails")

    job_id = await enqueue(store, "wrapped", {})
    await worker.run_until_idle()
    assert events == [
        "outer>1",
        "inner>",
        "handler",
        "outer!ValueError",
        "outer>2",
        "inner>",
        "handler",
        "outer<",
    ]
    assert (await get(store, job_id)).state == JobState.SUCCEEDED
