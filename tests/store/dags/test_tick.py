"""DAGStore scheduler clauses: PromoteUnblocked, CompleteDueSleeps,
ApplyFailurePolicy, CompleteDAGs, and the race clauses between them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from azync_flow.store.dags import DAGState, OnFailurePolicy
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState, Source, Wake
from azync_flow.testing import MovableClock
from tests.store.dag_helpers import (
    create,
    kill,
    lease,
    params,
    signal,
    skip,
    sleep,
    states,
    succeed,
    task,
    tasks_by_key,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SUSPEND = OnFailurePolicy.SUSPEND


def _comp(key: str, **kw: object):
    return task(
        key, compensation_kind=f"undo:{key}", compensation_payload=f'"{key}"'.encode(), **kw
    )


# --- PromoteUnblocked --------------------------------------------------------------


async def test_promote_moves_task_once_every_dependency_succeeded(store: PostgresStore) -> None:
    dag_id = await create(
        store, params([task("a"), task("b"), task("j")], [("j", "a"), ("j", "b")])
    )
    await succeed(store, dag_id, "a")
    assert await store.promote_unblocked() == 0
    await succeed(store, dag_id, "b")
    assert await store.promote_unblocked() == 1
    assert (await states(store, dag_id))["j"] == JobState.PENDING
    assert await store.promote_unblocked() == 0


async def test_promote_chooses_runnable_state_by_kind(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(
        store,
        params(
            [task("a"), task("h"), sleep("nap", 60), signal("sig")],
            [("h", "a"), ("nap", "a"), ("sig", "a")],
        ),
    )
    await succeed(store, dag_id, "a")
    clock.set(T0 + timedelta(minutes=5))
    assert await store.promote_unblocked() == 3
    t = await tasks_by_key(store, dag_id)
    assert t["h"].state == JobState.PENDING
    assert t["sig"].state == JobState.WAITING
    assert t["nap"].state == JobState.SCHEDULED
    assert t["nap"].run_at == T0 + timedelta(minutes=6)  # timer starts at promotion


async def test_skipped_dependency_satisfies_like_succeeded(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a"), task("b")], [("b", "a")]))
    await skip(store, dag_id, "a")
    assert await store.promote_unblocked() == 1


async def test_dead_or_cancelled_dependency_satisfies_only_ignore_dead_deps_tasks(
    store: PostgresStore,
) -> None:
    dag_id = await create(
        store,
        params(
            [task("a"), task("strict"), task("tolerant", ignore_dead_deps=True)],
            [("strict", "a"), ("tolerant", "a")],
            on_failure=SUSPEND,
        ),
    )
    await kill(store, dag_id, "a")
    assert await store.promote_unblocked() == 1
    s = await states(store, dag_id)
    assert s["tolerant"] == JobState.PENDING
    assert s["strict"] == JobState.BLOCKED


async def test_promote_ignores_dags_that_are_not_running_or_compensating(
    store: PostgresStore,
) -> None:
    dag_id = await create(store, params([task("a"), task("b"), task("c")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    await store.pause_dag(dag_id, "hold")
    assert await store.promote_unblocked() == 0
    assert (await states(store, dag_id))["b"] == JobState.BLOCKED


# --- CompleteDueSleeps -------------------------------------------------------------


async def test_complete_due_sleeps_succeeds_only_due_sleep_tasks(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(store, params([sleep("short", 10), sleep("long", 100), task("h")]))
    assert await store.complete_due_sleeps() == 0
    clock.set(T0 + timedelta(seconds=10))
    assert await store.complete_due_sleeps() == 1
    t = await tasks_by_key(store, dag_id)
    assert t["short"].state == JobState.SUCCEEDED
    assert t["short"].completed_at == T0 + timedelta(seconds=10)
    assert t["long"].state == JobState.SCHEDULED
    assert t["h"].state == JobState.PENDING
    assert await store.complete_due_sleeps() == 0


# --- ApplyFailurePolicy ------------------------------------------------------------


async def test_cancel_policy_cancels_and_chains_compensations_in_reverse_completion_order(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(
        store,
        params(
            [
                _comp("t1"),
                _comp("t2a"),
                _comp("t2b"),
                task("plain"),
                task("t3"),
                task("later"),
                signal("sig"),
            ],
            [
                ("t2a", "t1"),
                ("t2b", "t1"),
                ("plain", "t1"),
                ("t3", "t2a"),
                ("t3", "t2b"),
                ("later", "t3"),
                ("sig", "t3"),
            ],
        ),
    )
    await succeed(store, dag_id, "t1")
    await store.promote_unblocked()
    a = await lease(store, dag_id, "t2a")
    clock.set(T0 + timedelta(seconds=1))
    await succeed(store, dag_id, "t2b")
    clock.set(T0 + timedelta(seconds=2))
    await store.ack_task_result(a.id, a.lease_token, None)  # type: ignore[arg-type]
    await succeed(store, dag_id, "plain")
    await store.promote_unblocked()
    await kill(store, dag_id, "t3")
    (failure,) = await store.apply_failure_policy()
    assert failure.dag_id == dag_id
    assert failure.policy == OnFailurePolicy.CANCEL
    assert failure.dead_tasks == ["t3"]
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.COMPENSATING
    assert "t3" in view.failure_reason
    t = await tasks_by_key(store, dag_id)
    assert t["later"].state == JobState.CANCELLED
    assert t["sig"].state == JobState.CANCELLED
    assert t["comp:t2a"].state == JobState.PENDING
    assert t["comp:t2b"].state == JobState.BLOCKED
    assert t["comp:t1"].state == JobState.BLOCKED
    assert "comp:plain" not in t
    assert t["comp:t2a"].kind == "undo:t2a"
    assert t["comp:t2a"].payload == b'"t2a"'
    assert t["comp:t2a"].snooze_budget == timedelta(0)
    chain = [d for d in await store.dag_deps(dag_id) if d.task_key.startswith("comp:")]
    assert {(d.task_key, d.depends_on_key) for d in chain} == {
        ("comp:t2b", "comp:t2a"),
        ("comp:t1", "comp:t2b"),
    }
    keys = [j.task_key for j in await store.dag_tasks(dag_id)]
    assert keys[-3:]
    assert set(keys[-3:]) == {"comp:t1", "comp:t2a", "comp:t2b"}
    assert await store.apply_failure_policy() == []


async def test_cancel_policy_with_nothing_to_compensate_fails_at_once(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a"), task("b")], [("b", "a")]))
    await kill(store, dag_id, "a")
    (f,) = await store.apply_failure_policy()
    assert f.dead_tasks == ["a"]
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.FAILED
    assert view.completed_at is not None
    assert (await states(store, dag_id))["b"] == JobState.CANCELLED


async def test_suspend_policy_parks_the_dag_and_leaves_tasks_untouched(
    store: PostgresStore,
) -> None:
    dag_id = await create(
        store, params([task("a"), task("b"), task("c")], [("b", "a")], on_failure=SUSPEND)
    )
    await kill(store, dag_id, "a")
    (f,) = await store.apply_failure_policy()
    assert f.policy == SUSPEND
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.SUSPENDED
    assert "a" in view.failure_reason
    assert await states(store, dag_id) == {
        "a": JobState.DEAD,
        "b": JobState.BLOCKED,
        "c": JobState.PENDING,
    }


async def test_dead_task_whose_dependents_all_tolerate_does_not_trigger(
    store: PostgresStore,
) -> None:
    dag_id = await create(
        store,
        params(
            [task("a"), task("t1", ignore_dead_deps=True), task("t2", ignore_dead_deps=True)],
            [("t1", "a"), ("t2", "a")],
        ),
    )
    await kill(store, dag_id, "a")
    assert await store.apply_failure_policy() == []
    assert (await store.get_dag(dag_id)).state == DAGState.RUNNING


async def test_dead_leaf_always_triggers_even_if_tolerant(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("leaf", ignore_dead_deps=True), task("other")]))
    await kill(store, dag_id, "leaf")
    (f,) = await store.apply_failure_policy()
    assert f.dead_tasks == ["leaf"]


async def test_dead_task_with_one_intolerant_dependent_triggers(store: PostgresStore) -> None:
    dag_id = await create(
        store,
        params(
            [task("a"), task("x"), task("ok", ignore_dead_deps=True), task("strict")],
            [("ok", "a"), ("strict", "a")],
        ),
    )
    await kill(store, dag_id, "a")
    await kill(store, dag_id, "x")
    (f,) = await store.apply_failure_policy()
    assert f.dead_tasks == ["a", "x"]


async def test_active_task_is_left_alone_and_completes_outside_the_chain(
    store: PostgresStore,
) -> None:
    dag_id = await create(store, params([_comp("a"), _comp("slow"), task("bad")], [("bad", "a")]))
    await succeed(store, dag_id, "a")
    running = await lease(store, dag_id, "slow")
    await store.promote_unblocked()
    await kill(store, dag_id, "bad")
    await store.apply_failure_policy()
    t = await tasks_by_key(store, dag_id)
    assert t["slow"].state == JobState.ACTIVE
    assert "comp:slow" not in t
    await store.ack_task_result(running.id, running.lease_token, b"1")  # type: ignore[arg-type]
    t = await tasks_by_key(store, dag_id)
    assert t["slow"].state == JobState.SUCCEEDED
    assert "comp:slow" not in t
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    assert (await store.get_dag(dag_id)).state == DAGState.FAILED


async def test_concurrent_failure_passes_compensate_once(store: PostgresStore) -> None:
    dag_id = await create(
        store, params([_comp("t0"), task("p1"), task("p2")], [("p1", "t0"), ("p2", "t0")])
    )
    await succeed(store, dag_id, "t0")
    await store.promote_unblocked()
    await kill(store, dag_id, "p1")
    await kill(store, dag_id, "p2")
    results = await asyncio.gather(*(store.apply_failure_policy() for _ in range(4)))
    acted = [f for r in results for f in r]
    assert len(acted) == 1
    assert acted[0].dead_tasks == ["p1", "p2"]
    comps = [j for j in await store.dag_tasks(dag_id) if j.task_key.startswith("comp:")]
    assert [c.task_key for c in comps] == ["comp:t0"]


# --- CompleteDAGs ------------------------------------------------------------------


async def test_complete_settles_all_succeeded_dag_as_succeeded(store: PostgresStore) -> None:
    dag_id = await create(store, params([task("a"), task("b")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    assert await store.complete_dags() == 0
    await store.promote_unblocked()
    await skip(store, dag_id, "b")
    assert await store.complete_dags() == 1
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.SUCCEEDED
    assert view.completed_at is not None
    assert await store.complete_dags() == 0


async def test_complete_fails_run_whose_deaths_were_all_tolerated(store: PostgresStore) -> None:
    dag_id = await create(
        store, params([task("a"), task("t", ignore_dead_deps=True)], [("t", "a")])
    )
    await kill(store, dag_id, "a")
    assert await store.apply_failure_policy() == []
    await store.promote_unblocked()
    await succeed(store, dag_id, "t")
    assert await store.complete_dags() == 1
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.FAILED
    assert view.failure_reason == "dead tasks: a [tolerated]: boom"


async def test_failure_reason_orders_deaths_by_time_not_key_and_cuts_long_errors(
    store: PostgresStore, clock: MovableClock
) -> None:
    dag_id = await create(
        store,
        params(
            [task("z_root"), task("b_fallback", ignore_dead_deps=True), task("a_other")],
            [("b_fallback", "z_root")],
        ),
    )
    clock.set(T0)
    await kill(store, dag_id, "z_root", "RuntimeError: upstream gone")
    assert await store.apply_failure_policy() == []  # tolerated: the fallback runs
    await store.promote_unblocked()
    clock.set(T0 + timedelta(seconds=1))
    await kill(store, dag_id, "b_fallback", "ValueError: " + "x" * 600)
    clock.set(T0 + timedelta(seconds=2))
    await kill(store, dag_id, "a_other", "")
    (f,) = await store.apply_failure_policy()
    assert f.dead_tasks == ["a_other", "b_fallback"]  # the triggering keys, sorted
    reason = (await store.get_dag(dag_id)).failure_reason
    root, fallback, other = reason.removeprefix("dead tasks: ").split("; ")
    assert root == "z_root [tolerated]: RuntimeError: upstream gone"
    assert fallback.startswith("b_fallback: ValueError: xxx")
    assert fallback.endswith("...")
    assert len(fallback) == len("b_fallback: ") + 500
    assert other == "a_other"


async def test_complete_leaves_all_terminal_run_with_intolerant_death_for_the_policy(
    store: PostgresStore,
) -> None:
    """Race clause: the task dies after ApplyFailurePolicy ran, before CompleteDAGs."""
    dag_id = await create(store, params([_comp("a"), task("b")]))
    await succeed(store, dag_id, "a")
    b = await lease(store, dag_id, "b")
    assert await store.apply_failure_policy() == []  # b still active: nothing to do
    await store.dead(b.id, b.lease_token, "abort")  # type: ignore[arg-type]
    assert await store.complete_dags() == 0
    assert (await store.get_dag(dag_id)).state == DAGState.RUNNING
    (f,) = await store.apply_failure_policy()
    assert f.dead_tasks == ["b"]
    assert (await store.get_dag(dag_id)).state == DAGState.COMPENSATING
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    assert (await store.get_dag(dag_id)).state == DAGState.FAILED


async def test_compensating_dag_settles_failed_after_its_chain(store: PostgresStore) -> None:
    dag_id = await create(
        store, params([_comp("a"), _comp("b"), task("c")], [("b", "a"), ("c", "b")])
    )
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await succeed(store, dag_id, "b")
    await store.promote_unblocked()
    await kill(store, dag_id, "c")
    await store.apply_failure_policy()
    await succeed(store, dag_id, "comp:b")
    assert await store.complete_dags() == 0
    await store.promote_unblocked()
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.FAILED
    assert view.completed_at is not None


async def test_dead_compensation_suspends_for_a_manual_decision(store: PostgresStore) -> None:
    dag_id = await create(store, params([_comp("a"), task("b")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await kill(store, dag_id, "b")
    await store.apply_failure_policy()
    await kill(store, dag_id, "comp:a", "undo failed")
    assert await store.complete_dags() == 1
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.SUSPENDED
    assert "comp:a" in view.failure_reason
    assert view.completed_at is None


# --- incremental passes (extension: since=) ----------------------------------------


async def test_incremental_promote_and_complete_only_see_recently_changed_dags(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    old = await create(store, params([task("a"), task("b")], [("b", "a")]))
    await succeed(store, old, "a")
    done = await create(store, params([task("a")]))
    await succeed(store, done, "a")
    clock.set(T0 + timedelta(minutes=1))
    fresh = await create(store, params([task("a"), task("b")], [("b", "a")]))
    await succeed(store, fresh, "a")
    since = T0 + timedelta(seconds=30)
    assert await store.promote_unblocked(since=since) == 1
    assert (await states(store, fresh))["b"] == JobState.PENDING
    assert (await states(store, old))["b"] == JobState.BLOCKED
    assert await store.complete_dags(since=since) == 0
    assert await store.promote_unblocked() == 1  # the full pass catches the old one
    assert await store.complete_dags() == 1
    assert (await store.get_dag(done)).state == DAGState.SUCCEEDED


async def test_incremental_promote_sees_a_resumed_header(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    dag_id = await create(store, params([task("a"), task("b")], [("b", "a")]))
    a = await lease(store, dag_id, "a")
    await store.pause_dag(dag_id, "x")
    await store.ack_task_result(a.id, a.lease_token, None)  # settles while paused  # type: ignore[arg-type]
    clock.set(T0 + timedelta(minutes=1))
    await store.retry_dag(dag_id)
    assert await store.promote_unblocked(since=T0 + timedelta(seconds=59)) == 1


async def test_scheduler_falls_back_to_a_full_pass_when_the_clock_moves_back(
    store: PostgresStore, clock: MovableClock
) -> None:
    from azync_flow.dag import DAGScheduler

    sched = DAGScheduler(store, full_scan_interval=timedelta(hours=1))
    clock.set(T0 + timedelta(hours=1))
    await sched.tick()
    assert sched.full_ticks == 1
    await sched.tick()
    assert sched.full_ticks == 1
    clock.set(T0)
    dag_id = await create(store, params([task("a"), task("b")], [("b", "a")]))
    await succeed(store, dag_id, "a")
    stats = await sched.tick()
    assert sched.full_ticks == 2
    assert stats.promoted == 1


async def test_dead_compensation_mid_chain_suspends_and_retry_finishes_the_chain(
    store: PostgresStore,
) -> None:
    dag_id = await create(
        store, params([_comp("a"), _comp("b"), task("c")], [("b", "a"), ("c", "b")])
    )
    await succeed(store, dag_id, "a")
    await store.promote_unblocked()
    await succeed(store, dag_id, "b")
    await store.promote_unblocked()
    await kill(store, dag_id, "c")
    await store.apply_failure_policy()
    await kill(store, dag_id, "comp:b", "undo b failed")
    # comp:a waits behind the dead comp:b: nothing can run, so the run suspends
    assert await store.complete_dags() == 1
    view = await store.get_dag(dag_id)
    assert view.state == DAGState.SUSPENDED
    assert "dead compensation tasks: comp:b" in view.failure_reason
    assert (await states(store, dag_id))["comp:a"] == JobState.BLOCKED
    # a manual compensate keeps the chain intact (comp:a is not cancelled)
    await store.compensate_dag(dag_id)
    assert (await states(store, dag_id))["comp:a"] == JobState.BLOCKED
    assert await store.complete_dags() == 1
    assert (await store.get_dag(dag_id)).state == DAGState.SUSPENDED
    await store.retry_dag(dag_id)
    await succeed(store, dag_id, "comp:b")
    assert await store.promote_unblocked() == 1
    assert await store.complete_dags() == 0  # comp:a still to run
    await succeed(store, dag_id, "comp:a")
    assert await store.complete_dags() == 1
    assert (await store.get_dag(dag_id)).state == DAGState.FAILED


# --- the scheduler's wake-up ---------------------------------------------


async def test_notify_tick_wakes_the_dag_scheduler(store: PostgresStore) -> None:
    sub = await store.wake()
    assert sub is not None
    async with sub:
        await store.dag_notify_tick()
        async with asyncio.timeout(5):
            assert await anext(sub) == Wake(source=Source.DAG, kind="$tick")
