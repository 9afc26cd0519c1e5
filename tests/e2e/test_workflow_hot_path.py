"""The hot path on a real Worker and PostgreSQL: activities leased in the pass's
commit and run at once (local dispatch), an activity's completion committed with
the next pass (folded), and a start committed with its first pass (eager start);
every fence failure falling back to the plain path without a lost or doubled
result. Each test runs with the sticky cache on and off."""

from __future__ import annotations

import asyncio
import uuid
import weakref
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from azync_flow import activity, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.runtime import WorkflowRuntime
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import Job
from azync_flow.store.workflows import WorkflowState
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext

CALLS: list[str] = []


@activity(name="inc")
async def inc(i: int) -> int:
    CALLS.append(f"inc:{i}")
    return i + 1


@activity(name="slow_inc")
async def slow_inc(i: int) -> int:
    CALLS.append(f"slow_inc:{i}")
    await asyncio.sleep(0.05 * (i + 1))  # the first of a gather ends well before the rest
    return i + 1


@activity(name="elsewhere")
async def elsewhere(i: int) -> int:
    CALLS.append(f"elsewhere:{i}")
    return i * 10


@workflow(name="three_steps")
async def three_steps(ctx: WorkflowContext, i: int) -> int:
    return await inc(await inc(await inc(i)))


@workflow(name="fan_out")
async def fan_out(ctx: WorkflowContext, n: int) -> list[int]:
    return list(await asyncio.gather(*(slow_inc(i) for i in range(n))))


@workflow(name="uses_elsewhere")
async def uses_elsewhere(ctx: WorkflowContext, i: int) -> int:
    return await inc(await elsewhere(i))


@workflow(name="signal_after_step")
async def signal_after_step(ctx: WorkflowContext, i: int) -> list[Any]:
    first = await inc(i)
    got = await ctx.wait_signal("go")
    return [first, got, await inc(first)]


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def cache_size(request: pytest.FixtureRequest) -> int:
    CALLS.clear()
    return int(request.param)


#: The workflow runtime :func:`make_worker` attached to each worker.
RUNTIMES: weakref.WeakKeyDictionary[Worker, WorkflowRuntime] = weakref.WeakKeyDictionary()


def runtime_of(worker: Worker) -> WorkflowRuntime:
    """The workflow runtime attached to ``worker`` by :func:`make_worker`."""
    return RUNTIMES[worker]


def make_worker(
    store: PostgresStore, cache_size: int, activities: list[Any] | None = None, **options: Any
) -> Worker:
    worker = Worker(
        store,
        lease=timedelta(seconds=30),
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        maintain=(),
        handle_signals=False,
    )
    RUNTIMES[worker] = attach_workflows(
        worker,
        [three_steps, fan_out, uses_elsewhere, signal_after_step],
        activities if activities is not None else [inc, slow_inc],
        cache_size=cache_size,
        **options,
    )
    return worker


async def jobs_of(store: PostgresStore, run_id: uuid.UUID) -> list[tuple[str, str, int]]:
    rows = await store.pool.fetch(
        "SELECT kind, state, attempt FROM azync_jobs WHERE run_id = $1 ORDER BY enqueued_at, kind",
        run_id,
    )
    return [(r["kind"], r["state"], r["attempt"]) for r in rows]


async def history_types(client: Client, run_id: uuid.UUID) -> list[str]:
    return [type(e.event).__name__ for e in await client.get_handle(run_id).history()]


async def test_pass_leases_registered_activities_to_its_worker_and_runs_them_at_once(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size)
    async with worker:
        handle = await Client(store).start(three_steps, 1)
        assert await handle.result(timeout=10) == 4
    loop = runtime_of(worker).activity_loops[0]
    assert loop.stats.local == 3  # never dequeued: each leased in the commit that scheduled it
    ops = [j for j in await jobs_of(store, handle.id) if j[0].startswith("$op:")]
    assert ops == [("$op:inc@1", "succeeded", 1)] * 3
    assert CALLS == ["inc:1", "inc:2", "inc:3"]


async def test_completion_is_committed_with_the_next_pass_of_a_cached_execution(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size)
    async with worker:
        handle = await Client(store).start(three_steps, 1)
        assert await handle.result(timeout=10) == 4
    tasks = [j for j in await jobs_of(store, handle.id) if j[0] == "$wft"]
    # sticky: one workflow task (the first pass); each completion carried the next
    # pass. Full replay: every completion schedules a workflow task as before.
    assert len(tasks) == (1 if cache_size else 4)
    types = await history_types(Client(store), handle.id)
    assert types == [
        "ActivityScheduled",
        "ActivityCompleted",
        "ActivityScheduled",
        "ActivityCompleted",
        "ActivityScheduled",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]


async def test_eager_start_commits_the_first_pass_with_the_execution(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size)
    async with worker:
        client = Client.for_worker(worker)
        handle = await client.start(three_steps, 5)
        assert handle.started
        assert await handle.result(timeout=10) == 8
    assert runtime_of(worker).eager.started == 1
    jobs = await jobs_of(store, handle.id)
    tasks = [j for j in jobs if j[0] == "$wft"]
    assert len(tasks) == (0 if cache_size else 3)  # no workflow task for the first pass
    assert [j for j in jobs if j[0] != "$wft"] == [("$op:inc@1", "succeeded", 1)] * 3


async def test_eager_start_with_an_idempotency_key_keeps_its_dedupe(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size)
    async with worker:
        client = Client(store, worker=worker)
        first = await client.start(three_steps, 1, idempotency_key="k")
        again = await client.start(three_steps, 1, idempotency_key="k")
        assert again.id == first.id
        assert not again.started
        assert await first.result(timeout=10) == 4
        # a duplicate id through the eager path writes nothing and finds the winner
        dup = await runtime_of(worker).eager.start(_params(first.id, b"1"), trace_context={})
        assert (dup.inserted, dup.id, dup.commit) == (False, first.id, None)
    assert CALLS == ["inc:1", "inc:2", "inc:3"]


def _params(run_id: uuid.UUID, data: bytes) -> Any:
    from azync_flow.store.workflows import WorkflowStartParams

    return WorkflowStartParams(id=run_id, name=three_steps.name, input=data)


async def test_gathered_completions_all_recorded_once(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size)
    async with worker:
        handle = await Client.for_worker(worker).start(fan_out, 6)
        assert await handle.result(timeout=10) == [1, 2, 3, 4, 5, 6]
    types = await history_types(Client(store), handle.id)
    assert types.count("ActivityCompleted") == 6
    assert sorted(CALLS) == sorted(f"slow_inc:{i}" for i in range(6))


async def test_activities_beyond_free_slots_are_inserted_pending_and_dequeued(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size, activity_concurrency=2)
    async with worker:
        handle = await Client(store).start(fan_out, 5)
        assert await handle.result(timeout=10) == [1, 2, 3, 4, 5]
    loop = next(lp for lp in runtime_of(worker).activity_loops if lp.kind == "$op:slow_inc@1")
    assert loop.stats.local == 2  # the two free slots; three were dequeued
    assert loop.stats.leased == 5


async def test_unregistered_activity_stays_pending_for_a_worker_that_has_it(
    store: PostgresStore, cache_size: int
) -> None:
    only_inc = make_worker(store, cache_size, activities=[inc])
    async with only_inc:
        handle = await Client.for_worker(only_inc).start(uses_elsewhere, 2)
        await asyncio.sleep(0.3)
        jobs = await jobs_of(store, handle.id)
        assert ("$op:elsewhere@1", "pending", 0) in jobs
    other = make_worker(store, cache_size, activities=[inc, elsewhere])
    async with other:
        assert await handle.result(timeout=10) == 21


async def test_fence_failure_falls_back_without_a_lost_or_doubled_result(
    store: PostgresStore, cache_size: int
) -> None:
    """The next_seq moves between the end of an attempt and its folded commit (a
    sibling's outcome recorded first): the folded commit writes nothing and the
    outcome is recorded alone; every result is in history exactly once."""
    worker = make_worker(store, cache_size)
    runtime = runtime_of(worker)
    sibling_done: list[uuid.UUID] = []
    hooked: list[uuid.UUID] = []
    recorded = asyncio.Event()

    async def record_sibling_first(job: Job, event_type: str) -> None:
        if hooked:
            # the sibling's own report waits until the hook has recorded its
            # outcome (its shorter sleep alone does not ensure it on a busy machine)
            await recorded.wait()
            return
        hooked.append(job.id)
        try:
            await record_a_sibling(job)
        finally:
            recorded.set()

    async def record_a_sibling(job: Job) -> None:
        row = await store.pool.fetchrow(
            "SELECT id, lease_token FROM azync_jobs WHERE run_id = $1 AND kind = $2"
            " AND state = 'active' AND id <> $3 LIMIT 1",
            job.run_id,
            job.kind,
            job.id,
        )
        if row is None:
            return
        sibling_done.append(row["id"])
        from azync_flow._operations import decode_operation
        from azync_flow.replay.events import ActivityCompleted, encode_event

        payload = await store.pool.fetchval(
            "SELECT payload FROM azync_jobs WHERE id = $1", row["id"]
        )
        seq = decode_operation(bytes(payload)).seq
        event = ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(b"100"), attempts=1)
        assert job.run_id is not None
        await store.complete_operation(
            row["id"], row["lease_token"], job.run_id, *encode_event(event)
        )

    runtime.activities.before_settle = record_sibling_first
    async with worker:
        handle = await Client.for_worker(worker).start(fan_out, 2)
        result = await handle.result(timeout=10)
    assert sibling_done
    assert sorted(result) in ([1, 100], [2, 100])
    completed = [
        e.event
        for e in await Client(store).get_handle(handle.id).history()
        if type(e.event).__name__ == "ActivityCompleted"
    ]
    assert sorted(e.scheduled_seq for e in completed) == [1, 2]  # type: ignore[attr-defined]
    if cache_size:
        assert runtime.folder is not None
        assert runtime.folder.fallbacks >= 1


async def test_signal_buffered_before_a_folded_pass_is_still_delivered(
    store: PostgresStore, cache_size: int
) -> None:
    """A signal that arrives while the activity runs is consumed even though the
    pass folded into the completion never loaded it."""
    worker = make_worker(store, cache_size)
    client = Client.for_worker(worker)
    sent: list[bool] = []

    async def signal_during_first_step(job: Job, event_type: str) -> None:
        if not sent:
            assert job.run_id is not None
            sent.append(await client.get_handle(job.run_id).signal("go", "now"))

    runtime_of(worker).activities.before_settle = signal_during_first_step
    async with worker:
        handle = await client.start(signal_after_step, 1)
        assert await handle.result(timeout=10) == [2, "now", 3]
    assert sent == [True]


async def test_plain_path_when_local_dispatch_is_off(store: PostgresStore, cache_size: int) -> None:
    worker = make_worker(store, cache_size, local_dispatch=False)
    async with worker:
        handle = await Client.for_worker(worker).start(three_steps, 1)
        assert await handle.result(timeout=10) == 4
    assert runtime_of(worker).activity_loops[0].stats.local == 0
    tasks = [j for j in await jobs_of(store, handle.id) if j[0] == "$wft"]
    assert len(tasks) == 3  # the first pass was eager; each completion scheduled a task
    assert (await client_state(store, handle.id)) == WorkflowState.SUCCEEDED


async def client_state(store: PostgresStore, run_id: uuid.UUID) -> WorkflowState:
    return (await Client(store).get_handle(run_id).describe()).state


async def test_a_client_shares_one_listen_connection_across_sequential_results_by_default(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size)
    async with worker:
        client = Client(store)  # the remote-client path, default options
        assert await (await client.start(three_steps, 1)).result(timeout=10) == 4
        first = client._waits.watcher.sub
        assert first is not None  # lingers after its waiter left
        assert await (await client.start(three_steps, 2)).result(timeout=10) == 5
        assert client._waits.watcher.sub is first  # reused: no new connection
        await client.close()
        assert client._waits.watcher.sub is None


async def test_closing_the_store_closes_a_lingering_listen_connection(
    store: PostgresStore, cache_size: int
) -> None:
    own = await open_store(store.dsn, Config(schema=store.schema), migrate=False)
    worker = make_worker(store, cache_size)
    async with worker:
        client = Client(own, listen_linger=timedelta(minutes=10))
        assert await (await client.start(three_steps, 1)).result(timeout=10) == 4
        sub = client._waits.watcher.sub
        assert sub is not None
        pid = sub._conn.get_server_pid()
        await own.close()  # the client is never closed
        assert sub._conn is None
        for _ in range(100):  # the server saw the connection go
            gone = await store.pool.fetchval(
                "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid
            )
            if gone:
                break
            await asyncio.sleep(0.05)
        assert gone


async def test_bound_client_keeps_one_listen_connection_across_sequential_results(
    store: PostgresStore, cache_size: int
) -> None:
    worker = make_worker(store, cache_size)
    async with worker:
        # the linger outlasts starting the next run even on a loaded machine
        client = Client.for_worker(worker, listen_linger=timedelta(seconds=3))
        assert await (await client.start(three_steps, 1)).result(timeout=10) == 4
        first = client._waits.watcher.sub
        assert first is not None  # lingers after its waiter left
        assert await (await client.start(three_steps, 2)).result(timeout=10) == 5
        assert client._waits.watcher.sub is first  # reused: no new connection
        for _ in range(200):  # closed once idle for the linger (within 10 s)
            if client._waits.watcher.sub is None:
                break
            await asyncio.sleep(0.05)
        assert client._waits.watcher.sub is None
        assert await (await client.start(three_steps, 3)).result(timeout=10) == 6
        await client.close()
        assert client._waits.watcher.sub is None  # close() does not wait for the linger
