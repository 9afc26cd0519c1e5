"""DAG lifecycle events on the ledger: published with the state change, once each."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import msgspec
import pytest

from azync_flow.dag import DAGEvent
from azync_flow.store.dags import DAGState, OnFailurePolicy
from azync_flow.store.events import EventFilter, Subscriber
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import DequeueParams, Source
from tests.store.dag_helpers import LEASE, create, kill, params, succeed, task

SUSPEND = OnFailurePolicy.SUSPEND
ALL_TYPES = list(DAGEvent)


def _comp(key: str, **kw: object):
    return task(key, compensation_kind=f"undo:{key}", compensation_payload=b"null", **kw)


async def _subscribe(store: PostgresStore, name: str = "ops") -> None:
    for t in ALL_TYPES:
        await store.register_subscriber(Subscriber(name=name, event_type=t))


async def _events(store: PostgresStore, dag_id: uuid.UUID) -> list[tuple[str, dict[str, Any]]]:
    """(type, payload) of every event of the DAG, oldest first; asserts one delivery each."""
    rows, _ = await store.list_events(EventFilter(), 0, 10_000)
    mine = [r for r in rows if r.aggregate_type == "dag" and r.aggregate_id == str(dag_id)]
    order = [DAGEvent.FAILED, DAGEvent.COMPENSATION_STARTED, DAGEvent.COMPENSATION_FAILED]
    mine.sort(key=lambda r: (r.occurred_at, order.index(r.type) if r.type in order else 9))
    subs = {s.event_type for s in await store.list_subscriber_views("")}
    for r in mine:
        assert r.deliveries == (1 if r.type in subs else 0), r
    return [(r.type, msgspec.json.decode(r.payload)) for r in mine]


def _types(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [t for t, _ in events]


async def test_cancel_policy_publishes_one_failed_and_one_compensation_started(
    store: PostgresStore,
) -> None:
    await _subscribe(store)
    p = params(
        [_comp("a"), task("b", max_attempts=1), task("c", max_attempts=1)],
        [("b", "a"), ("c", "a")],
        name="order",
    )
    dag_id = await create(store, p)
    await succeed(store, dag_id, "a")
    assert await store.promote_unblocked() == 2
    await kill(store, dag_id, "b")
    await kill(store, dag_id, "c")
    [failure] = await store.apply_failure_policy()
    assert await store.apply_failure_policy() == []  # acts once
    assert await store.complete_dags() == 0
    events = await _events(store, dag_id)
    assert _types(events) == [DAGEvent.FAILED, DAGEvent.COMPENSATION_STARTED]
    failed, started = events[0][1], events[1][1]
    assert failed == {
        "dag_id": str(dag_id),
        "name": "order",
        "policy": "cancel",
        "state": "compensating",
        "reason": "dead tasks: b: boom; c: boom",
        "triggered_by": ["b", "c"],
        "dead_tasks": ["b", "c"],
    }
    assert failure.dead_tasks == ["b", "c"]
    assert started == {
        "dag_id": str(dag_id),
        "name": "order",
        "trigger": "failure_policy",
        "reason": "dead tasks: b: boom; c: boom",
        "compensations": ["comp:a"],
    }
    # the subscriber's deliveries exist and carry the ledger record
    jobs = await store.dequeue_batch(Source.EVENT, DequeueParams(kind="ops", limit=10, lease=LEASE))
    assert sorted(j.event.type for j in jobs if j.event) == sorted(_types(events))
    # the compensation settles: one terminal event naming every dead task
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    assert await store.complete_dags() == 0
    events = await _events(store, dag_id)
    assert _types(events)[2:] == [DAGEvent.SETTLED]
    assert events[2][1] == {
        "dag_id": str(dag_id),
        "name": "order",
        "state": "failed",
        "reason": "dead tasks: b: boom; c: boom",
        "dead_tasks": ["b", "c"],
    }


async def test_dead_task_without_compensations_fails_with_failed_and_settled(
    store: PostgresStore,
) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([task("a", max_attempts=1)]))
    await kill(store, dag_id, "a")
    await store.apply_failure_policy()
    assert (await store.get_dag(dag_id)).state == DAGState.FAILED
    events = await _events(store, dag_id)
    assert _types(events) == [DAGEvent.FAILED, DAGEvent.SETTLED]
    assert events[0][1]["state"] == "failed"
    assert events[1][1]["dead_tasks"] == ["a"]
    assert await store.complete_dags() == 0
    assert len(await _events(store, dag_id)) == 2


async def test_suspend_policy_publishes_failed_once_per_firing(store: PostgresStore) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([task("a")], on_failure=SUSPEND))
    await kill(store, dag_id, "a")
    await store.apply_failure_policy()
    await store.apply_failure_policy()
    events = await _events(store, dag_id)
    assert _types(events) == [DAGEvent.FAILED]
    assert (events[0][1]["policy"], events[0][1]["state"]) == ("suspend", "suspended")
    # a retry that dies again is a new firing of the policy
    await store.retry_dag(dag_id)
    await kill(store, dag_id, "a")
    await store.apply_failure_policy()
    assert _types(await _events(store, dag_id)) == [DAGEvent.FAILED, DAGEvent.FAILED]


async def test_successful_run_publishes_only_settled_succeeded(store: PostgresStore) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([task("a"), task("b")], [("b", "a")], name="ok"))
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await succeed(store, dag_id, "b")
    assert await store.complete_dags() == 1
    assert await store.complete_dags() == 0
    assert await _events(store, dag_id) == [
        (
            DAGEvent.SETTLED,
            {
                "dag_id": str(dag_id),
                "name": "ok",
                "state": "succeeded",
                "reason": "",
                "dead_tasks": [],
            },
        )
    ]


async def test_tolerated_death_settles_failed_without_firing_the_policy(
    store: PostgresStore,
) -> None:
    await _subscribe(store)
    dag_id = await create(
        store, params([task("a"), task("b", ignore_dead_deps=True)], [("b", "a")])
    )
    await kill(store, dag_id, "a")
    assert await store.apply_failure_policy() == []
    await store.promote_unblocked()
    await succeed(store, dag_id, "b")
    assert await store.complete_dags() == 1
    events = await _events(store, dag_id)
    assert _types(events) == [DAGEvent.SETTLED]
    assert (events[0][1]["state"], events[0][1]["dead_tasks"]) == ("failed", ["a"])


async def test_cancel_publishes_settled_cancelled_once(store: PostgresStore) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([task("a")]))
    await store.cancel_dag(dag_id)
    assert await store.complete_dags() == 0
    events = await _events(store, dag_id)
    assert [(t, e["state"]) for t, e in events] == [(DAGEvent.SETTLED, "cancelled")]


async def test_cancel_during_compensation_publishes_settled_cancelled_after_it(
    store: PostgresStore,
) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([_comp("a"), task("b")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await kill(store, dag_id, "b")
    await store.apply_failure_policy()
    await store.cancel_dag(dag_id)
    assert _types(await _events(store, dag_id)) == [
        DAGEvent.FAILED,
        DAGEvent.COMPENSATION_STARTED,
    ]
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    events = await _events(store, dag_id)
    assert [(t, e.get("state")) for t, e in events][2:] == [(DAGEvent.SETTLED, "cancelled")]


async def test_manual_compensate_publishes_compensation_started_only(store: PostgresStore) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([_comp("a"), _comp("b"), task("c")], [("c", "b")]))
    await succeed(store, dag_id, "a")
    await succeed(store, dag_id, "b")
    await store.compensate_dag(dag_id)
    events = await _events(store, dag_id)
    assert _types(events) == [DAGEvent.COMPENSATION_STARTED]
    assert events[0][1]["trigger"] == "manual"
    assert events[0][1]["compensations"] == ["comp:b", "comp:a"]


async def test_dead_compensation_publishes_compensation_failed_then_retry_settles(
    store: PostgresStore,
) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([_comp("a"), task("b")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await kill(store, dag_id, "b")
    await store.apply_failure_policy()
    await kill(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    assert (await store.get_dag(dag_id)).state == DAGState.SUSPENDED
    events = await _events(store, dag_id)
    assert events[2][0] == DAGEvent.COMPENSATION_FAILED
    assert events[2][1]["dead_compensations"] == ["comp:a"]
    await store.retry_dag(dag_id)
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    events = await _events(store, dag_id)
    assert [(t, e.get("state")) for t, e in events][3:] == [(DAGEvent.SETTLED, "failed")]


async def test_events_without_subscribers_are_recorded_without_deliveries(
    store: PostgresStore,
) -> None:
    dag_id = await create(store, params([task("a")]))
    await kill(store, dag_id, "a")
    await store.apply_failure_policy()
    assert _types(await _events(store, dag_id)) == [DAGEvent.FAILED, DAGEvent.SETTLED]


async def test_state_change_never_commits_without_its_events(
    store: PostgresStore, pg_dsn: str
) -> None:
    await _subscribe(store)
    dag_id = await create(store, params([_comp("a"), task("b")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await kill(store, dag_id, "b")
    blocker = await asyncpg.connect(pg_dsn, server_settings={"search_path": store.schema})
    try:
        # hold the ledger so the event insert cannot proceed, then abandon the pass
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE azync_events IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(store.apply_failure_policy(), 0.5)
        await tx.rollback()
    finally:
        await blocker.close()
    # the abandoned pass rolled back as a whole: no state change, no event, no job
    assert (await store.get_dag(dag_id)).state == DAGState.RUNNING
    assert await _events(store, dag_id) == []
    assert "comp:a" not in {j.task_key for j in await store.dag_tasks(dag_id)}
    # the next pass does both
    [f] = await store.apply_failure_policy()
    assert f.dag_id == dag_id
    assert (await store.get_dag(dag_id)).state == DAGState.COMPENSATING
    assert _types(await _events(store, dag_id)) == [
        DAGEvent.FAILED,
        DAGEvent.COMPENSATION_STARTED,
    ]


@pytest.mark.parametrize("policy", [OnFailurePolicy.CANCEL, SUSPEND])
async def test_events_carry_the_runs_trace_context_as_meta(
    store: PostgresStore, policy: OnFailurePolicy
) -> None:
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    p = params([task("a")], on_failure=policy)
    inserted, _ = await store.create_dag(p, trace_context=carrier)
    assert inserted
    await kill(store, p.id, "a")
    await store.apply_failure_policy()
    rows, _ = await store.list_events(EventFilter(type=DAGEvent.FAILED), 0, 10)
    [row] = [r for r in rows if r.aggregate_id == str(p.id)]
    assert row.meta == carrier
