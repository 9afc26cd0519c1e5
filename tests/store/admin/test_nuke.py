"""Contract clauses of ``JobAdmin.nuke_all`` (``NukeAll``): a development reset
that deletes every job, counter row and idempotency key of one source, reports
the counts per kind, and leaves the event ledger and the other sources alone."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow.store.admin import NukeReport
from azync_flow.store.events import PublishParams, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import LimitSpec, Source
from tests.store.dag_helpers import create, params, task
from tests.store.helpers import enqueue_and_lease, job, lease, stat_sums
from tests.store.workflow_helpers import started


async def _count(store: PostgresStore, table: str, source: Source) -> int:
    return int(
        await store.pool.fetchval(f"SELECT count(*) FROM {table} WHERE source = $1", source.value)
    )


async def test_nuke_all_deletes_every_job_of_the_source_in_every_state(
    store: PostgresStore,
) -> None:
    await store.enqueue(job("pending"))
    await store.enqueue(job("later", run_at=await store.current_time() + timedelta(hours=1)))
    await enqueue_and_lease(store, "active")
    dead = await enqueue_and_lease(store, "dead")
    await store.dead(dead.id, dead.lease_token, "boom")
    done = await enqueue_and_lease(store, "done")
    await store.ack(done.id, done.lease_token)

    report = await store.nuke_all(Source.QUEUE)

    assert report.jobs == 5
    assert await _count(store, "azync_jobs", Source.QUEUE) == 0
    # the failure history of the dead job went with it
    assert await store.job_attempts(Source.QUEUE, dead.id) == []


async def test_nuke_all_deletes_jobs_a_run_owns_too(store: PostgresStore) -> None:
    await started(store)  # its workflow task waits, pending
    dag_id = await create(store, params([task("t")]))  # its task waits, pending
    assert (await store.nuke_all(Source.WORKFLOW)).jobs == 1
    assert (await store.nuke_all(Source.DAG)).jobs == 1
    assert await store.pool.fetchval("SELECT count(*) FROM azync_jobs") == 0
    # the runs themselves are not jobs: they stay
    assert await store.pool.fetchval("SELECT count(*) FROM azync_workflow_executions") == 1
    assert await store.pool.fetchval("SELECT count(*) FROM azync_dags WHERE id = $1", dag_id) == 1


async def test_nuke_all_counts_folded_and_unfolded_counter_rows(store: PostgresStore) -> None:
    for kind in ("a", "b"):
        done = await enqueue_and_lease(store, kind)
        await store.ack(done.id, done.lease_token)
    await store.fold_stats(1000)  # folded daily rows of a and b
    await store.enqueue(job("c"))  # one more delta, not folded
    folded = await store.pool.fetchval("SELECT count(*) FROM azync_job_stats")
    deltas = await store.pool.fetchval("SELECT count(*) FROM azync_job_stat_deltas")
    assert folded >= 2
    assert deltas >= 1

    report = await store.nuke_all(Source.QUEUE)

    assert report.stats == folded + deltas
    assert await store.list_kinds(Source.QUEUE) == []
    # the daily window is still there, every day at zero
    days = await store.all_daily(Source.QUEUE)
    assert days
    assert all((d.enqueued, d.processed) == (0, 0) for d in days)


async def test_nuke_all_frees_the_idempotency_keys_of_the_source(store: PostgresStore) -> None:
    await store.enqueue(job(idempotency_key="K", idempotency_ttl=timedelta(hours=1)))
    assert not await store.enqueue(job(idempotency_key="K", idempotency_ttl=timedelta(hours=1)))

    report = await store.nuke_all(Source.QUEUE)

    assert (report.jobs, report.keys) == (1, 1)
    # the key (a TTL-window key outlives its job otherwise) no longer dedupes
    assert await store.enqueue(job(idempotency_key="K", idempotency_ttl=timedelta(hours=1)))


async def test_nuke_all_leaves_the_other_sources_alone(store: PostgresStore) -> None:
    await store.enqueue(job("q", idempotency_key="K", idempotency_ttl=timedelta(hours=1)))
    await started(store)
    before = {
        table: await _count(store, table, Source.WORKFLOW)
        for table in ("azync_jobs", "azync_job_stat_deltas")
    }

    await store.nuke_all(Source.QUEUE)

    for table, count in before.items():
        assert await _count(store, table, Source.WORKFLOW) == count, table
    assert (await stat_sums(store, "$wft", Source.WORKFLOW))["enqueued"] == 1


async def test_nuke_all_leaves_the_event_ledger_intact(store: PostgresStore) -> None:
    await store.register_subscriber(Subscriber(name="billing", event_type="order.placed"))
    published = PublishParams(id=uuid.uuid4(), type="order.placed", payload=b"{}")
    assert await store.publish(published) == 1

    report = await store.nuke_all(Source.EVENT)

    assert report.jobs == 1  # the delivery
    event = await store.get_event(published.id)
    assert (event.id, event.deliveries) == (published.id, 0)
    (view,) = await store.list_subscriber_views("order.placed")
    assert view.subscriber == "billing"
    # the registration still fans out
    again = PublishParams(id=uuid.uuid4(), type="order.placed", payload=b"{}")
    assert await store.publish(again) == 1


async def test_nuke_all_of_an_empty_source_reports_zeros(store: PostgresStore) -> None:
    assert await store.nuke_all(Source.DAG) == NukeReport(jobs=0, stats=0, keys=0)


async def test_nuke_all_accepts_the_source_s_value(store: PostgresStore) -> None:
    await store.enqueue(job())
    assert (await store.nuke_all("queue")).jobs == 1


@pytest.mark.parametrize("bad", ["queues", "", "QUEUE"])
async def test_nuke_all_refuses_an_unknown_source_and_deletes_nothing(
    store: PostgresStore, bad: str
) -> None:
    await store.enqueue(job())
    with pytest.raises(ValueError, match=r"unknown source .*one of queue, event, dag, workflow"):
        await store.nuke_all(bad)
    assert await _count(store, "azync_jobs", Source.QUEUE) == 1


async def test_nuke_all_frees_the_limit_slots_its_active_jobs_held(store: PostgresStore) -> None:
    one = LimitSpec(name="one", type="concurrency", capacity=1)
    await store.declare_limits(Source.QUEUE, "k", [one])
    assert all(await store.enqueue_many([job("k"), job("k")]))
    assert len(await lease(store, "k")) == 1  # holds the one slot
    assert await lease(store, "k") == []  # the other waits for it
    await store.nuke_all(Source.QUEUE)
    # the limit is kept (no job, counter or key) and its slot is free again
    await store.enqueue(job("k"))
    assert len(await lease(store, "k")) == 1
