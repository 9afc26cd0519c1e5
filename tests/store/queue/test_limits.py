"""Limits in the queue store (real PostgreSQL): the lease of a limited kind
admits a job only with a free slot of every limit of its kind, for its key;
concurrency slots free when the lease ends, rate slots after their period;
keys are served round robin; unlimited kinds keep their plain lease plan."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import msgspec
import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import DequeueParams, Job, LimitSpec, Source, Wake
from azync_flow.testing import MovableClock, drop_schema, unique_schema

from ..helpers import LEASE, job, lease
from ..plans import DEQUEUE_ARGS, generic_plan, scans
from ..workflow_helpers import commit_workflow_task, lease_task, op_params, started


def conc(name: str, n: int, per_key: bool = False) -> LimitSpec:
    return LimitSpec(name=name, type="concurrency", capacity=n, per_key=per_key)


def rate(name: str, n: int, period: timedelta, per_key: bool = False) -> LimitSpec:
    return LimitSpec(name=name, type="rate", capacity=n, period=period, per_key=per_key)


async def test_a_concurrency_limit_admits_at_most_its_capacity_until_a_lease_ends(
    store: PostgresStore,
) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("two", 2)])
    assert all(await store.enqueue_many([job("k") for _ in range(5)]))
    first = await lease(store, "k", limit=10)
    assert len(first) == 2
    assert await lease(store, "k", limit=10) == []
    await store.ack(first[0].id, first[0].lease_token)  # type: ignore[arg-type]
    assert len(await lease(store, "k", limit=10)) == 1
    await store.release(first[1].id, first[1].lease_token)  # type: ignore[arg-type]
    assert len(await lease(store, "k", limit=10)) == 1  # the released job itself


async def test_an_expired_lease_frees_its_slot_once_reaped(
    store: PostgresStore, clock: MovableClock
) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("one", 1)])
    assert all(await store.enqueue_many([job("k") for _ in range(2)]))
    (held,) = await lease(store, "k", limit=5)
    clock.advance(LEASE + timedelta(seconds=1))
    assert await lease(store, "k", limit=5) == []  # expired but not reaped: still held
    await store.reap_expired(Source.QUEUE, ["k"])
    again = await lease(store, "k", limit=5)
    assert len(again) == 1
    assert again[0].lease_token != held.lease_token


async def test_a_per_key_limit_counts_each_key_apart(store: PostgresStore) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("per-customer", 1, per_key=True)])
    jobs = [job("k", limit_key=k) for k in ("a", "a", "b", "b", "c")]
    assert all(await store.enqueue_many(jobs))
    got = await lease(store, "k", limit=10)
    assert sorted(j.limit_key or "" for j in got) == ["a", "b", "c"]


async def test_a_rate_limit_admits_capacity_starts_per_period(
    store: PostgresStore, clock: MovableClock
) -> None:
    await store.declare_limits(Source.QUEUE, "k", [rate("r", 3, timedelta(minutes=1))])
    assert all(await store.enqueue_many([job("k") for _ in range(7)]))
    got = await lease(store, "k", limit=10)
    assert len(got) == 3
    for j in got:
        await store.ack(j.id, j.lease_token)  # type: ignore[arg-type]
    clock.advance(timedelta(seconds=59))
    assert await lease(store, "k", limit=10) == []  # finished, but the period is not over
    clock.advance(timedelta(seconds=2))
    assert len(await lease(store, "k", limit=10)) == 3


async def test_every_limit_of_a_kind_must_admit(store: PostgresStore) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("c", 5), rate("r", 2, timedelta(hours=1))])
    assert all(await store.enqueue_many([job("k") for _ in range(4)]))
    assert len(await lease(store, "k", limit=10)) == 2


async def test_keys_are_served_round_robin(store: PostgresStore) -> None:
    """All of key a is enqueued before key b and c; the lease still alternates."""
    await store.declare_limits(Source.QUEUE, "k", [conc("per", 10, per_key=True)])
    for k in ("a", "b", "c"):
        assert all(await store.enqueue_many([job("k", limit_key=k) for _ in range(4)]))
    got = await lease(store, "k", limit=6)
    assert sorted(j.limit_key or "" for j in got) == ["a", "a", "b", "b", "c", "c"]
    one = await lease(store, "k", limit=1)  # every key got 2: the oldest served goes next
    assert one[0].limit_key == "a"


async def test_racing_leases_never_take_one_slot_twice(store: PostgresStore) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("three", 3)])
    assert all(await store.enqueue_many([job("k") for _ in range(40)]))
    rounds = await asyncio.gather(*(lease(store, "k", limit=2) for _ in range(12)))
    assert sum(len(r) for r in rounds) == 3


async def test_declaring_again_replaces_the_kinds_limits(store: PostgresStore) -> None:
    assert all(await store.enqueue_many([job("k") for _ in range(3)]))  # keyless, before
    await store.declare_limits(Source.QUEUE, "k", [conc("a", 1)])
    assert len(await lease(store, "k", limit=5)) == 1  # the older jobs are limited too
    await store.declare_limits(Source.QUEUE, "k", [conc("a", 2)])
    assert len(await lease(store, "k", limit=5)) == 1  # capacity raised to 2
    await store.declare_limits(Source.QUEUE, "k", [])
    assert len(await lease(store, "k", limit=5)) == 1  # unlimited again: the last one


async def test_list_limits_shows_in_flight_and_waiting(store: PostgresStore) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("two", 2)])
    assert all(await store.enqueue_many([job("k") for _ in range(5)]))
    await lease(store, "k", limit=10)
    (usage,) = await store.list_limits()
    assert usage.spec == conc("two", 2)
    assert usage.kinds == ["queue:k"]
    assert (usage.in_flight, usage.waiting) == (2, 3)


async def test_a_waiting_job_names_the_full_limit_and_its_key(store: PostgresStore) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("per", 1, per_key=True)])
    first, second = job("k", limit_key="acme"), job("k", limit_key="acme")
    assert all(await store.enqueue_many([first, second]))
    (leased,) = await lease(store, "k", limit=5)
    waiting = second if leased.id == first.id else first
    view = await store.get_job(Source.QUEUE, waiting.id)
    assert view.blocked_reason == "waits for concurrency limit 'per' (key 'acme')"


@pytest.mark.parametrize(
    "bad",
    [
        LimitSpec(name="x", type="concurrency", capacity=0),
        LimitSpec(name="x", type="rate", capacity=1),
        LimitSpec(name="x", type="concurrency", capacity=1, period=timedelta(seconds=1)),
        LimitSpec(name="x", type="sometimes", capacity=1),
        LimitSpec(name="", type="concurrency", capacity=1),
    ],
)
async def test_a_bad_limit_is_refused_before_anything_is_written(
    store: PostgresStore, bad: LimitSpec
) -> None:
    with pytest.raises(ValueError):
        await store.declare_limits(Source.QUEUE, "k", [bad])
    assert await store.list_limits() == []


async def test_the_lease_of_an_unlimited_kind_stays_an_index_scan(store: PostgresStore) -> None:
    await store.declare_limits(Source.QUEUE, "other", [conc("o", 1)])
    async with store.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO azync_jobs (id, source, kind, state, run_at, enqueued_at, updated_at,
                                       payload)
               SELECT gen_random_uuid(), 'queue', 'k', 'pending',
                      now() - (g % 1000) * interval '1 second', now(), now(), '1'
               FROM generate_series(1, 100000) g"""
        )
        await conn.execute("ANALYZE azync_jobs")
        plan = await generic_plan(conn, "azync_job_lease", DEQUEUE_ARGS)
    found = scans(plan)
    assert ("Index Scan", "azync_jobs_ready") in found
    assert all(t != "Seq Scan" and not t.startswith("Bitmap") for t, _ in found), found
    text = json.dumps(plan)
    assert "One-Time Filter" in text  # the limited branch is gated, not run per row
    assert len(await lease(store, "k", limit=10)) == 10


async def test_a_finished_limited_job_wakes_the_workers_of_its_kind(
    pg_dsn: str, clock: MovableClock
) -> None:
    schema = unique_schema()
    s = await open_store(pg_dsn, Config(schema=schema, notify_channel=f"w_{schema}"), clock=clock)
    try:
        await s.declare_limits(Source.QUEUE, "k", [conc("one", 1)])
        assert all(await s.enqueue_many([job("k") for _ in range(2)]))
        (held,) = await lease(s, "k", limit=5)
        sub = await s.wake()
        assert sub is not None
        async with sub:
            await s.ack(held.id, held.lease_token)  # type: ignore[arg-type]
            async with asyncio.timeout(5):
                woken = await anext(sub)
        assert woken == Wake(source=Source.QUEUE, kind="k")
        assert len(await lease(s, "k", limit=5)) == 1
    finally:
        await s.close()
        await drop_schema(pg_dsn, schema)


async def test_vacuum_deletes_the_slots_of_idle_keys_only(
    store: PostgresStore, clock: MovableClock
) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("per", 2, per_key=True)])
    assert all(await store.enqueue_many([job("k", limit_key=k) for k in ("a", "b", "c")]))
    leased = await lease(store, "k", limit=10)
    assert len(leased) == 3
    for j in leased:
        if j.limit_key != "c":
            await store.ack(j.id, j.lease_token)  # type: ignore[arg-type]
    clock.advance(timedelta(minutes=30))
    assert all(await store.enqueue_many([job("k", limit_key="b")]))
    (again,) = await lease(store, "k", limit=10)  # b admitted again: not idle
    await store.ack(again.id, again.lease_token)  # type: ignore[arg-type]
    clock.advance(timedelta(minutes=31))

    assert await store.vacuum_limit_slots(timedelta(hours=1)) == 2  # a's two slots
    keys = await store.pool.fetch("SELECT DISTINCT key FROM azync_limit_slots ORDER BY key")
    assert [r["key"] for r in keys] == ["b", "c"]  # c still holds one: kept whole
    assert await store.vacuum_limit_slots(timedelta(hours=1)) == 0

    # a key used again gets its whole capacity back
    assert all(await store.enqueue_many([job("k", limit_key="a") for _ in range(3)]))
    assert len(await lease(store, "k", limit=10)) == 2
    with pytest.raises(ValueError, match="idle_for"):
        await store.vacuum_limit_slots(timedelta(seconds=-1))


async def test_vacuum_skips_a_key_whose_slot_an_admission_holds_locked(
    store: PostgresStore, clock: MovableClock
) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("per", 3, per_key=True)])
    assert all(await store.enqueue_many([job("k", limit_key="x")]))
    (j,) = await lease(store, "k", limit=10)
    await store.ack(j.id, j.lease_token)  # type: ignore[arg-type]
    clock.advance(timedelta(hours=2))
    async with store.pool.acquire() as conn, conn.transaction():
        # an admission in flight has locked the key's last slot
        await conn.execute(
            "SELECT 1 FROM azync_limit_slots WHERE key = 'x' AND slot = 3 FOR UPDATE"
        )
        assert await store.vacuum_limit_slots(timedelta(hours=1)) == 0
    assert await store.vacuum_limit_slots(timedelta(hours=1)) == 3


async def test_a_lowered_capacity_counts_the_calls_still_holding_slots_above_it(
    store: PostgresStore,
) -> None:
    await store.declare_limits(Source.QUEUE, "k", [conc("pool", 3)])
    assert all(await store.enqueue_many([job("k") for _ in range(5)]))
    held = await lease(store, "k", limit=10)
    assert len(held) == 3
    await store.declare_limits(Source.QUEUE, "k", [conc("pool", 1)])
    first = await store.pool.fetchval(
        "SELECT holder FROM azync_limit_slots WHERE limit_name = 'pool' AND slot = 1"
    )
    (done,) = [j for j in held if j.id == first]
    await store.ack(done.id, done.lease_token)  # type: ignore[arg-type]
    assert await lease(store, "k", limit=10) == []  # two still run: over the new capacity
    for j in held:
        if j.id != first:
            await store.ack(j.id, j.lease_token)  # type: ignore[arg-type]
    assert len(await lease(store, "k", limit=10)) == 1  # drained: the new capacity holds


async def test_a_lowered_rate_counts_the_slots_used_above_it_within_the_period(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.advance(timedelta(0))
    await store.declare_limits(Source.QUEUE, "k", [rate("r", 3, timedelta(minutes=1))])
    assert all(await store.enqueue_many([job("k") for _ in range(6)]))
    assert len(await lease(store, "k", limit=1)) == 1  # slot 1 at 0 s
    clock.advance(timedelta(seconds=30))
    assert len(await lease(store, "k", limit=10)) == 2  # slots 2 and 3 at 30 s
    await store.declare_limits(Source.QUEUE, "k", [rate("r", 2, timedelta(minutes=1))])
    clock.advance(timedelta(seconds=31))  # slot 1's use is past the period
    assert await lease(store, "k", limit=10) == []  # two uses in the last minute already
    clock.advance(timedelta(seconds=30))
    assert len(await lease(store, "k", limit=10)) == 2


async def _limited_call(
    store: PostgresStore, key: str, schedule_to_close: timedelta | None = None
) -> tuple[uuid.UUID, Job]:
    """A running execution whose limited charge call (key ``key``) is leased."""
    wid = await started(store)
    task = await lease_task(store, wid)
    op = msgspec.structs.replace(
        op_params(wid, 1), limit_key=key, schedule_to_close=schedule_to_close
    )
    await commit_workflow_task(
        store, task.id, task.lease_token, wid, 1, events=[("ActivityScheduled", b"{}")],
        operations=[op],
    )  # fmt: skip
    (leased,) = await _charges(store)
    return wid, leased


async def _charges(store: PostgresStore) -> list[Job]:
    return await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=5, lease=LEASE)
    )


@pytest.mark.parametrize("ended", ["terminated", "timed_out", "refused_late"])
async def test_a_stopped_attempt_frees_its_held_slot_at_once(
    store: PostgresStore, clock: MovableClock, ended: str
) -> None:
    clock.advance(timedelta(0))
    await store.declare_limits(Source.WORKFLOW, "$op:charge@1", [conc("per-customer", 1, True)])
    wid, running = await _limited_call(store, "acme", LEASE - timedelta(seconds=10))
    assert running.lease_token is not None
    await _limited_call_waiting(store)
    clock.advance(timedelta(seconds=5))
    if ended == "terminated":
        await store.terminate_workflow(
            wid, "stop", "ops@host", ("WorkflowTerminated", b'{"type":"WorkflowTerminated"}')
        )
    else:
        clock.advance(LEASE - timedelta(seconds=10))  # past the deadline, within the lease
        if ended == "timed_out":
            assert len(await store.time_out_operations(_op_timed_out)) == 1
        else:
            with pytest.raises(NotFoundError):
                await store.complete_operation(
                    running.id, running.lease_token, wid, "ActivityCompleted", b"{}"
                )
    # the attempt may still be running on its worker: its slot stays held
    assert await _charges(store) == []
    assert {u.spec.name: u.in_flight for u in await store.list_limits()} == {"per-customer": 1}
    # its worker says it stopped: the slot frees now, not at the lease's end
    assert await store.release_stopped_attempt(running.id, running.lease_token) == 1
    assert [j.limit_key for j in await _charges(store)] == ["acme"]
    assert await store.release_stopped_attempt(running.id, running.lease_token) == 0


async def test_a_running_attempt_keeps_its_slot_when_asked_to_free_it(
    store: PostgresStore,
) -> None:
    await store.declare_limits(Source.WORKFLOW, "$op:charge@1", [conc("per-customer", 1, True)])
    _, running = await _limited_call(store, "acme")
    await _limited_call_waiting(store)
    assert running.lease_token is not None
    assert await store.release_stopped_attempt(running.id, running.lease_token) == 0
    assert await store.release_stopped_attempt(running.id, uuid.uuid4()) == 0
    assert await _charges(store) == []


async def _limited_call_waiting(store: PostgresStore) -> None:
    """A second call of key acme, waiting for the slot."""
    wid = await started(store)
    task = await lease_task(store, wid)
    op = msgspec.structs.replace(op_params(wid, 1), limit_key="acme")
    await commit_workflow_task(
        store, task.id, task.lease_token, wid, 1, events=[("ActivityScheduled", b"{}")],
        operations=[op],
    )  # fmt: skip
    assert await _charges(store) == []


def _op_timed_out(job: Job, kind: str, timeout: timedelta) -> tuple[str, bytes]:
    return "ActivityFailed", b"{}"
