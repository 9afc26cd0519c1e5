"""DAGStore admin clauses: PauseDAG, RetryDAG, CompensateDAG, CancelDAG, VacuumDAGs,
ListDAGs, DAGTasks, DAGDeps, DAGNameStateCounts, DAGTaskCounts, plus the DAG
task settle helpers (snooze budget, skip, reap)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.dags import DAGFilter, DAGSignalParams, DAGState, ReapedTask
from azync_flow.store.dags import OnFailurePolicy as P
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState, Source
from azync_flow.testing import MovableClock
from tests.store.dag_helpers import (
    LEASE,
    create,
    kill,
    lease,
    params,
    signal,
    sleep,
    states,
    succeed,
    task,
    tasks_by_key,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _comp(key: str, **kw: object):
    return task(key, compensation_kind=f"undo:{key}", **kw)


async def _compensating(store: PostgresStore) -> uuid.UUID:
    dag_id = await create(store, params([_comp("a"), task("b")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await kill(store, dag_id, "b")
    await store.apply_failure_policy()
    assert (await store.get_dag(dag_id)).state == DAGState.COMPENSATING
    return dag_id


# --- PauseDAG ----------------------------------------------------------------------


async def test_pause_freezes_runnable_tasks_and_keeps_blocked_waiting_active(
    store: PostgresStore,
) -> None:
    dag_id = await create(
        store,
        params([task("p"), sleep("nap", 60), task("b"), signal("w"), task("act")], [("b", "act")]),
    )
    act = await lease(store, dag_id, "act")
    await store.pause_dag(dag_id, "deploy")
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.PAUSED
    assert await states(store, dag_id) == {
        "p": JobState.PAUSED,
        "nap": JobState.PAUSED,
        "b": JobState.BLOCKED,
        "w": JobState.WAITING,
        "act": JobState.ACTIVE,
    }
    await store.ack_task_result(act.id, act.lease_token, None)  # type: ignore[arg-type]
    assert await store.promote_unblocked() == 0  # successors never start while paused
    assert await store.dag_dequeue(["k:p"], 10, LEASE) == []


async def test_pause_is_not_found_unless_running(store: PostgresStore) -> None:
    with pytest.raises(NotFoundError):
        await store.pause_dag(uuid.uuid4(), "x")
    dag_id = await create(store, params([task("a")]))
    await store.pause_dag(dag_id, "x")
    with pytest.raises(NotFoundError):
        await store.pause_dag(dag_id, "again")
    comp = await _compensating(store)
    with pytest.raises(NotFoundError):
        await store.pause_dag(comp, "x")


async def test_time_spent_paused_does_not_burn_the_snooze_budget(
    store: PostgresStore, clock: MovableClock
) -> None:
    """Race clause: a snooze budget stamped before a pause is fresh after resume."""
    clock.set(T0)
    dag_id = await create(store, params([task("poll", deadline=timedelta(minutes=10))]))
    j = await lease(store, dag_id, "poll")
    assert not await store.snooze(j.id, j.lease_token, timedelta(seconds=30), "late")  # type: ignore[arg-type]
    stamped = (await tasks_by_key(store, dag_id))["poll"]
    assert stamped.deadline_at == T0 + timedelta(minutes=10)
    await store.pause_dag(dag_id, "hold")
    clock.set(T0 + timedelta(hours=2))  # far past the stamped deadline
    await store.retry_dag(dag_id)
    t = (await tasks_by_key(store, dag_id))["poll"]
    assert t.state == JobState.PENDING
    assert t.deadline_at is None
    j = await lease(store, dag_id, "poll")
    assert not await store.snooze(j.id, j.lease_token, timedelta(0), "late")  # type: ignore[arg-type]
    assert (await tasks_by_key(store, dag_id))["poll"].deadline_at == clock() + timedelta(
        minutes=10
    )


# --- snooze / skip / reap of DAG tasks ----------------------------------------------


async def test_snooze_keeps_attempts_and_dies_past_the_deadline(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(store, params([task("poll", deadline=timedelta(seconds=60))]))
    for i in range(3):
        j = await lease(store, dag_id, "poll")
        assert j.attempt == 1
        assert not await store.snooze(j.id, j.lease_token, timedelta(seconds=10), "x")  # type: ignore[arg-type]
        clock.set(T0 + timedelta(seconds=10 * (i + 1)))
        assert await store.promote_due(Source.DAG) == 1
    clock.set(T0 + timedelta(seconds=60))  # exactly at the deadline: not yet past it
    j = await lease(store, dag_id, "poll")
    assert not await store.snooze(j.id, j.lease_token, timedelta(seconds=10), "x")  # type: ignore[arg-type]
    clock.set(T0 + timedelta(seconds=70))
    assert await store.promote_due(Source.DAG) == 1
    j = await lease(store, dag_id, "poll")
    assert await store.snooze(j.id, j.lease_token, timedelta(seconds=10), "deadline gone")  # type: ignore[arg-type]
    t = (await tasks_by_key(store, dag_id))["poll"]
    assert t.state == JobState.DEAD
    assert t.last_error == "deadline gone"
    with pytest.raises(NotFoundError):
        await store.snooze(j.id, j.lease_token, timedelta(0), "x")  # type: ignore[arg-type]
    # RetryDAG gives the dead task a fresh budget: the stamped deadline is cleared
    await store.retry_dag(dag_id)
    t = (await tasks_by_key(store, dag_id))["poll"]
    assert (t.state, t.deadline_at, t.attempt) == (JobState.PENDING, None, 0)


async def test_reap_returns_expired_task_then_kills_after_max_reaps(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(store, params([task("a"), task("b")], name="nightly", meta={"m": "1"}))
    await lease(store, dag_id, "a")
    clock.set(T0 + LEASE + timedelta(seconds=1))
    (reaped,) = await store.dag_reap_expired_tasks(2)
    assert reaped == ReapedTask(
        dag_id=dag_id,
        task_key="a",
        attempt=1,
        dead=False,
        meta={"m": "1"},
        kind="k:a",
        started_at=T0,
        dag_name="nightly",
    )
    assert (await states(store, dag_id))["a"] == JobState.PENDING
    assert await store.dag_reap_expired_tasks(2) == []  # nothing else expired
    again = T0 + LEASE + timedelta(seconds=1)
    await lease(store, dag_id, "a")
    clock.set(again + LEASE + timedelta(seconds=1))
    (killed,) = await store.dag_reap_expired_tasks(2)
    assert (killed.task_key, killed.attempt, killed.dead, killed.started_at) == (
        "a",
        2,
        True,
        again,
    )
    assert (await states(store, dag_id)) == {"a": JobState.DEAD, "b": JobState.PENDING}


# --- RetryDAG ----------------------------------------------------------------------


async def test_retry_resets_dead_tasks_with_fresh_budget_and_resumes_suspended(
    store: PostgresStore,
) -> None:
    dag_id = await create(store, params([task("a"), task("b")], [("b", "a")], on_failure=P.SUSPEND))
    await kill(store, dag_id, "a")
    await store.apply_failure_policy()
    assert (await store.get_dag(dag_id)).state == DAGState.SUSPENDED
    await store.retry_dag(dag_id)
    a = (await tasks_by_key(store, dag_id))["a"]
    assert a.state == JobState.PENDING
    assert a.attempt == 0
    assert a.reap_count == 0
    assert (await store.get_dag(dag_id)).state == DAGState.RUNNING
    await succeed(store, dag_id, "a")
    assert await store.promote_unblocked() == 1


async def test_retry_after_dead_compensation_resets_only_compensations(
    store: PostgresStore,
) -> None:
    dag_id = await _compensating(store)
    await kill(store, dag_id, "comp:a")
    await store.complete_dags()
    assert (await store.get_dag(dag_id)).state == DAGState.SUSPENDED
    await store.retry_dag(dag_id)
    assert (await store.get_dag(dag_id)).state == DAGState.COMPENSATING
    s = await states(store, dag_id)
    assert s["comp:a"] == JobState.PENDING
    assert s["b"] == JobState.DEAD  # original tasks never rerun
    await succeed(store, dag_id, "comp:a")
    await store.complete_dags()
    assert (await store.get_dag(dag_id)).state == DAGState.FAILED


async def test_retry_on_compensating_stays_compensating(store: PostgresStore) -> None:
    dag_id = await _compensating(store)
    await store.retry_dag(dag_id)
    assert (await store.get_dag(dag_id)).state == DAGState.COMPENSATING
    assert (await states(store, dag_id))["b"] == JobState.DEAD


async def test_retry_on_missing_or_terminal_is_not_found(store: PostgresStore) -> None:
    with pytest.raises(NotFoundError):
        await store.retry_dag(uuid.uuid4())
    dag_id = await create(store, params([task("a")]))
    await store.cancel_dag(dag_id)
    with pytest.raises(NotFoundError):
        await store.retry_dag(dag_id)


async def test_retry_resumes_paused_dag_releasing_tasks_by_run_at(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(store, params([task("now"), sleep("nap", 60)]))
    await store.pause_dag(dag_id, "x")
    await store.retry_dag(dag_id)
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.RUNNING
    t = await tasks_by_key(store, dag_id)
    assert t["now"].state == JobState.PENDING
    assert t["nap"].state == JobState.SCHEDULED
    assert t["nap"].run_at == T0 + timedelta(seconds=60)


async def test_promote_due_leaves_a_paused_dags_rescheduled_task_until_retry(
    store: PostgresStore, clock: MovableClock
) -> None:
    """A task leased before PauseDAG settles scheduled; the shared PromoteDue keeps it parked."""
    clock.set(T0)
    dag_id = await create(store, params([task("a")]))
    j = await lease(store, dag_id, "a")
    await store.pause_dag(dag_id, "hold")
    await store.reschedule(j.id, j.lease_token, timedelta(seconds=5), "boom")  # type: ignore[arg-type]
    clock.set(T0 + timedelta(minutes=1))
    assert await store.promote_due(Source.DAG) == 0
    assert (await states(store, dag_id))["a"] == JobState.SCHEDULED
    await store.retry_dag(dag_id)
    assert (await states(store, dag_id))["a"] == JobState.PENDING


# --- CompensateDAG -----------------------------------------------------------------


async def test_compensate_running_dag_by_hand(store: PostgresStore) -> None:
    dag_id = await create(store, params([_comp("a"), task("b"), signal("s")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    await store.compensate_dag(dag_id)
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.COMPENSATING
    s = await states(store, dag_id)
    assert s["b"] == JobState.CANCELLED
    assert s["s"] == JobState.CANCELLED
    assert s["comp:a"] == JobState.PENDING


async def test_compensate_suspended_dag_and_nothing_to_compensate_fails(
    store: PostgresStore,
) -> None:
    dag_id = await create(store, params([task("a"), task("b")], on_failure=P.SUSPEND))
    await kill(store, dag_id, "a")
    await store.apply_failure_policy()
    await store.compensate_dag(dag_id)
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.FAILED
    assert view.completed_at is not None
    assert (await states(store, dag_id))["b"] == JobState.CANCELLED


async def test_compensate_other_states_is_not_found(store: PostgresStore) -> None:
    with pytest.raises(NotFoundError):
        await store.compensate_dag(uuid.uuid4())
    comp = await _compensating(store)
    with pytest.raises(NotFoundError):
        await store.compensate_dag(comp)
    paused = await create(store, params([task("a")]))
    await store.pause_dag(paused, "x")
    with pytest.raises(NotFoundError):
        await store.compensate_dag(paused)


# --- CancelDAG ---------------------------------------------------------------------


async def test_cancel_running_dag_cancels_non_terminal_tasks(store: PostgresStore) -> None:
    dag_id = await create(
        store,
        params([task("a"), task("b"), sleep("z", 60), signal("s"), task("act")], [("b", "a")]),
    )
    await succeed(store, dag_id, "a")
    act = await lease(store, dag_id, "act")
    await store.cancel_dag(dag_id)
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.CANCELLED
    assert view.completed_at is not None
    s = await states(store, dag_id)
    assert s == {
        "a": JobState.SUCCEEDED,
        "b": JobState.CANCELLED,
        "z": JobState.CANCELLED,
        "s": JobState.CANCELLED,
        "act": JobState.ACTIVE,
    }
    await store.ack_task_result(act.id, act.lease_token, None)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        await store.cancel_dag(dag_id)


async def test_cancel_during_compensation_lands_cancelled_after_chain(store: PostgresStore) -> None:
    dag_id = await _compensating(store)
    await store.cancel_dag(dag_id)
    assert (await store.get_dag(dag_id)).state == DAGState.COMPENSATING
    assert (await states(store, dag_id))["comp:a"] == JobState.PENDING
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    assert (await store.get_dag(dag_id)).state == DAGState.CANCELLED


async def test_cancel_paused_dag_cancels_paused_tasks(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a")]))
    await store.pause_dag(dag_id, "x")
    await store.cancel_dag(dag_id)
    assert (await states(store, dag_id))["a"] == JobState.CANCELLED
    with pytest.raises(NotFoundError):
        await store.signal(DAGSignalParams(dag_id=dag_id, name="x"))


# --- VacuumDAGs --------------------------------------------------------------------


async def test_vacuum_removes_old_terminal_dags_with_tasks_edges_and_signals(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    old = await create(store, params([task("a"), signal("s")], [("s", "a")]))
    await store.signal(DAGSignalParams(dag_id=old, name="s"))
    await store.cancel_dag(old)
    live = await create(store, params([task("a")]))
    assert await store.vacuum_dags(timedelta(0)) == 0
    assert await store.vacuum_dags(timedelta(-1)) == 0
    clock.set(T0 + timedelta(hours=1))
    recent = await create(store, params([task("a")]))
    await store.cancel_dag(recent)
    assert await store.vacuum_dags(timedelta(minutes=30)) == 1
    with pytest.raises(NotFoundError):
        await store.dag_tasks(old)
    assert await store.dag_deps(old) == []
    async with store.pool.acquire() as conn:
        assert (
            await conn.fetchval("SELECT count(*) FROM azync_dag_signals WHERE dag_id=$1", old) == 0
        )
        assert await conn.fetchval("SELECT count(*) FROM azync_jobs WHERE dag_id=$1", old) == 0
    assert (await store.get_dag(live)).state == DAGState.RUNNING
    assert (await store.get_dag(recent)).state == DAGState.CANCELLED


# --- reads -------------------------------------------------------------------------


async def test_list_dags_newest_first_filtered_and_paginated(
    store: PostgresStore, clock: MovableClock
) -> None:
    ids = []
    for i in range(5):
        clock.set(T0 + timedelta(seconds=i))
        ids.append(await create(store, params([task("a")], name="even" if i % 2 == 0 else "odd")))
    await store.cancel_dag(ids[4])
    page, total = await store.list_dags(DAGFilter(), 1, 2)
    assert total == 5
    assert [v.id for v in page] == [ids[3], ids[2]]
    page, total = await store.list_dags(DAGFilter(name="even"), 0, 10)
    assert (total, [v.id for v in page]) == (3, [ids[4], ids[2], ids[0]])
    page, total = await store.list_dags(DAGFilter(name="even", state=DAGState.RUNNING), 0, 10)
    assert (total, [v.id for v in page]) == (2, [ids[2], ids[0]])
    page, total = await store.list_dags(DAGFilter(), 10, 10)
    assert (page, total) == ([], 5)


async def test_dag_tasks_not_found_for_unknown_and_deps_empty(store: PostgresStore) -> None:
    with pytest.raises(NotFoundError):
        await store.dag_tasks(uuid.uuid4())
    assert await store.dag_deps(uuid.uuid4()) == []


async def test_dag_deps_are_ordered_by_task_then_dependency(store: PostgresStore) -> None:
    dag_id = await create(
        store,
        params([task("z"), task("a"), task("m"), task("b")], [("z", "m"), ("z", "a"), ("b", "a")]),
    )
    assert [(d.task_key, d.depends_on_key) for d in await store.dag_deps(dag_id)] == [
        ("b", "a"),
        ("z", "a"),
        ("z", "m"),
    ]


async def test_name_state_counts_and_task_counts(store: PostgresStore) -> None:
    a = await create(store, params([task("x"), task("y")], name="alpha"))
    b = await create(store, params([task("x")], name="alpha"))
    c = await create(store, params([task("x")], name="beta"))
    await store.cancel_dag(b)
    await succeed(store, a, "x")
    counts = await store.dag_name_state_counts()
    assert counts == {
        "alpha": {DAGState.RUNNING: 1, DAGState.CANCELLED: 1},
        "beta": {DAGState.RUNNING: 1},
    }
    tc = await store.dag_task_counts([a, b, c, uuid.uuid4()])
    assert tc == {
        a: {JobState.SUCCEEDED: 1, JobState.PENDING: 1},
        b: {JobState.CANCELLED: 1},
        c: {JobState.PENDING: 1},
    }
    assert await store.dag_task_counts([]) == {}
