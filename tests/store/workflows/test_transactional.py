"""Transactional steps in the workflow store (``TransactionalOperationStore``):
the step's own SQL and the operation's recorded outcome commit in one
transaction, fenced by the operation's lease; the step's SQL runs with the
database's default search_path, not the store's schema."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Source
from azync_flow.store.workflows import OperationSettle, PassWrite, TransactionalOperationStore
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import (
    LEASE,
    commit_workflow_task,
    jobs_of,
    lease_task,
    op_params,
    runnable_tasks,
    started,
)

from .test_hot_path import leased_op


@pytest.fixture
async def ledger(store: PostgresStore) -> AsyncIterator[str]:
    """A user table outside the store's schema (its own schema, dropped after)."""
    name = f"app_{uuid.uuid4().hex[:12]}"
    await store.pool.execute(f"CREATE SCHEMA {name}")
    await store.pool.execute(f"CREATE TABLE {name}.ledger (step text PRIMARY KEY, cents int)")
    yield f"{name}.ledger"
    await store.pool.execute(f"DROP SCHEMA {name} CASCADE")


async def op_state(store: PostgresStore, run_id: uuid.UUID) -> str:
    return {r["task_key"]: r["state"] for r in await jobs_of(store, run_id)}[f"{run_id}/1"]


async def rows(store: PostgresStore, table: str) -> list[tuple[str, int]]:
    return [tuple(r) for r in await store.pool.fetch(f"SELECT * FROM {table} ORDER BY step")]


def settle_of(job: object, payload: bytes = b'{"r":1}') -> OperationSettle:
    return OperationSettle(
        job_id=job.id,  # type: ignore[attr-defined]
        lease_token=job.lease_token,  # type: ignore[attr-defined]
        event_type="ActivityCompleted",
        payload=payload,
    )


async def test_the_store_offers_transactional_steps(store: PostgresStore) -> None:
    assert isinstance(store, TransactionalOperationStore)


async def test_step_writes_and_completion_commit_together(
    store: PostgresStore, clock: MovableClock, ledger: str
) -> None:
    wid, job = await leased_op(store, clock)
    async with store.operation_transaction(wid_job(job), job.lease_token, wid) as tx:  # type: ignore[attr-defined]
        await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('debit', 5)")
        seq = await tx.complete("ActivityCompleted", b'{"r":1}')
    assert seq == 2
    assert await rows(store, ledger) == [("debit", 5)]
    assert await op_state(store, wid) == "succeeded"
    history = await store.list_history(wid)
    assert [(e.seq, e.type) for e in history] == [
        (1, "ActivityScheduled"),
        (2, "ActivityCompleted"),
    ]
    assert len(await runnable_tasks(store, wid)) == 1  # the next pass is scheduled


async def test_leaving_without_an_outcome_rolls_the_step_writes_back(
    store: PostgresStore, clock: MovableClock, ledger: str
) -> None:
    wid, job = await leased_op(store, clock)

    async def step_raises() -> None:
        async with store.operation_transaction(wid_job(job), job.lease_token, wid) as tx:  # type: ignore[attr-defined]
            await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('debit', 5)")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await step_raises()
    assert await rows(store, ledger) == []
    assert await op_state(store, wid) == "active"  # still the attempt's: it may run again
    assert [e.type for e in await store.list_history(wid)] == ["ActivityScheduled"]


async def test_a_stale_lease_token_opens_no_transaction(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    entered = False
    with pytest.raises(NotFoundError):
        async with store.operation_transaction(wid_job(job), uuid.uuid4(), wid):
            entered = True
    assert not entered
    assert await op_state(store, wid) == "active"


async def test_an_attempt_whose_lease_was_taken_meanwhile_writes_nothing(
    store: PostgresStore, clock: MovableClock, ledger: str
) -> None:
    """The step's lease expires while it runs, the reaper hands the operation to
    a second attempt: the first one's completion meets the fence and its
    writes roll back; the second one's commit."""
    clock.advance(timedelta(0))
    wid, job = await leased_op(store, clock)
    async with store.operation_transaction(wid_job(job), job.lease_token, wid) as stale:  # type: ignore[attr-defined]
        await stale.connection.execute(f"INSERT INTO {ledger} VALUES ('stale', 1)")
        clock.advance(LEASE + timedelta(seconds=1))
        assert await store.reap_expired_operations(lambda j, r: ("F", b"")) == (1, 0)
        (again,) = await store.dequeue_batch(
            Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=1, lease=LEASE)
        )
        assert again.lease_token is not None
        async with store.operation_transaction(again.id, again.lease_token, wid) as fresh:
            await fresh.connection.execute(f"INSERT INTO {ledger} VALUES ('fresh', 2)")
            await fresh.complete("ActivityCompleted", b"2")
        with pytest.raises(NotFoundError):
            await stale.complete("ActivityCompleted", b"1")
    assert await rows(store, ledger) == [("fresh", 2)]
    assert [e.type for e in await store.list_history(wid)] == [
        "ActivityScheduled",
        "ActivityCompleted",
    ]


async def test_step_sql_runs_with_the_database_default_search_path(
    store: PostgresStore, clock: MovableClock, pg_dsn: str
) -> None:
    import asyncpg

    plain = await asyncpg.connect(pg_dsn)
    try:
        expected = await plain.fetchval("SHOW search_path")
    finally:
        await plain.close()
    wid, job = await leased_op(store, clock)
    async with store.operation_transaction(wid_job(job), job.lease_token, wid) as tx:  # type: ignore[attr-defined]
        seen = await tx.connection.fetchval("SHOW search_path")
        await tx.complete("ActivityCompleted", b"1")
    assert seen == expected
    assert store.schema not in seen
    # the pooled connection is the store's again: its own statements still work
    assert await store.pool.fetchval("SHOW search_path") == f'"{store.schema}"'


async def test_completion_folded_with_the_next_pass_commits_with_the_step_writes(
    store: PostgresStore, clock: MovableClock, ledger: str
) -> None:
    wid, job = await leased_op(store, clock)
    async with store.operation_transaction(wid_job(job), job.lease_token, wid) as tx:  # type: ignore[attr-defined]
        await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('debit', 7)")
        result = await tx.commit_completions(
            settle_of(job), PassWrite(expected_next_seq=2, events=[("Marker", b"{}")])
        )
    assert result.next_seq == 4
    assert await rows(store, ledger) == [("debit", 7)]
    assert [e.type for e in await store.list_history(wid)] == [
        "ActivityScheduled",
        "ActivityCompleted",
        "Marker",
    ]
    assert await runnable_tasks(store, wid) == []  # no workflow task carried this pass


async def test_a_refused_fold_leaves_the_transaction_open_for_the_completion_alone(
    store: PostgresStore, clock: MovableClock, ledger: str
) -> None:
    wid, job = await leased_op(store, clock)
    await store.append_history(wid, "Marker", b"{}")  # another writer: next_seq is 3 now
    async with store.operation_transaction(wid_job(job), job.lease_token, wid) as tx:  # type: ignore[attr-defined]
        await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('debit', 9)")
        with pytest.raises(ConflictError):
            await tx.commit_completions(settle_of(job), PassWrite(expected_next_seq=2))
        assert await tx.complete("ActivityCompleted", b"1") == 3
    assert await rows(store, ledger) == [("debit", 9)]
    assert [e.type for e in await store.list_history(wid)] == [
        "ActivityScheduled",
        "Marker",
        "ActivityCompleted",
    ]


async def test_serializable_isolation_is_the_step_transactions(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    async with store.operation_transaction(
        wid_job(job),
        job.lease_token,  # type: ignore[attr-defined]
        wid,
        isolation="serializable",
    ) as tx:
        level = await tx.connection.fetchval("SHOW transaction_isolation")
        await tx.complete("ActivityCompleted", b"1")
    assert level == "serializable"


async def test_an_unknown_isolation_level_is_refused(
    store: PostgresStore, clock: MovableClock
) -> None:
    wid, job = await leased_op(store, clock)
    with pytest.raises(ValueError, match="isolation"):
        async with store.operation_transaction(
            wid_job(job),
            job.lease_token,  # type: ignore[attr-defined]
            wid,
            isolation="chaos",  # type: ignore[arg-type]
        ):
            pass


def wid_job(job: object) -> uuid.UUID:
    return job.id  # type: ignore[attr-defined,no-any-return]


async def test_a_step_reporting_after_its_schedule_to_close_deadline_commits_nothing(
    store: PostgresStore, clock: MovableClock, ledger: str
) -> None:
    clock.advance(timedelta(0))
    wid = await started(store)
    task = await lease_task(store, wid)
    op = op_params(wid, 1)
    op.schedule_to_close = timedelta(minutes=1)
    await commit_workflow_task(
        store, task.id, task.lease_token, wid, 1, events=[("ActivityScheduled", b"{}")],
        operations=[op],
    )  # fmt: skip
    (job,) = await store.dequeue_batch(
        Source.WORKFLOW, DequeueParams(kind="$op:charge@1", limit=1, lease=LEASE)
    )
    clock.advance(timedelta(minutes=1, seconds=1))

    async def step() -> None:
        async with store.operation_transaction(job.id, job.lease_token, wid) as tx:  # type: ignore[arg-type]
            await tx.connection.execute(f"INSERT INTO {ledger} VALUES ('debit', 3)")
            await tx.complete("ActivityCompleted", b"1")

    with pytest.raises(NotFoundError, match="schedule-to-close"):
        await step()
    assert await rows(store, ledger) == []  # the step's own writes went with it
    assert [e.type for e in await store.list_history(wid)] == ["ActivityScheduled"]
    assert await op_state(store, wid) == "active"  # for the timeouts step to end
