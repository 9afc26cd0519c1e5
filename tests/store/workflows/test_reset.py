"""``reset_workflow`` in the workflow store (real PostgreSQL): one fenced
transaction that archives the current run, keeps its history up to a point,
cancels the run's jobs (a leased workflow task's holder loses its fence),
enqueues again the operations the kept part leaves open, re-opens its timers,
and makes the execution a running new run."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.replay.events import ActivityScheduled, TimerStarted, encode_event
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import ResetResult, WorkflowState
from tests.store.workflow_helpers import (
    commit,
    commit_workflow_task,
    finish,
    jobs_of,
    lease_task,
    op_params,
    snapshot,
    started,
)

SCHEDULED = encode_event(ActivityScheduled(seq=1, name="charge"))


async def _reset(
    store: PostgresStore, wid: uuid.UUID, expected: int, keep: int, **kw: Any
) -> ResetResult:
    return await store.reset_workflow(
        wid, expected_next_seq=expected, keep=keep, new_run_id=uuid.uuid4(), reason="fixed", **kw
    )


async def test_reset_archives_the_run_and_its_leased_task_holder_then_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await commit(store, wid, events=[SCHEDULED], operations=[op_params(wid, 1)])
    await store.schedule_task(wid)
    task = await lease_task(store, wid)
    done = await _reset(store, wid, 2, 1, rerun_seqs=[1])
    assert (done.run_no, done.kept, done.previous_state) == (2, 1, WorkflowState.RUNNING)
    assert done.rerun_activities == 1
    before = await snapshot(store, wid)
    with pytest.raises(NotFoundError):
        await commit_workflow_task(
            store, task.id, task.lease_token, wid, 2,  # type: ignore[arg-type]
            events=[encode_event(ActivityScheduled(seq=2, name="charge"))],
        )  # fmt: skip
    assert await snapshot(store, wid) == before
    ops = [j for j in await jobs_of(store, wid) if j["task_key"] == f"{wid}/1"]
    assert sorted(str(j["state"]) for j in ops) == ["cancelled", "pending"]
    again = await store.pool.fetchrow(
        "SELECT payload, meta ->> 'reset_run' AS reset_run, kind FROM azync_jobs"
        " WHERE task_key = $1 AND state = 'pending'",
        f"{wid}/1",
    )
    assert again is not None
    assert (bytes(again["payload"]), again["kind"]) == (b'{"amount":42}', "$op:charge@1")
    assert again["reset_run"] == str(done.run_id)  # never folded into an old run's instance
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.run_no, view.run_id) == (WorkflowState.RUNNING, 2, done.run_id)
    assert (view.reset_from_run, view.reset_seq, view.reset_reason) == (1, 1, "fixed")
    old, new = await store.list_workflow_runs(wid)
    assert (old.state, old.reset_seq, old.state_at_reset, old.events) == ("reset", 1, "running", 1)
    assert [e.seq for e in await store.list_run_history(wid, 1)] == [1]
    assert [e.seq for e in await store.list_history(wid)] == [1]
    assert new.current


async def test_reset_of_a_failed_run_keeps_the_prefix_and_runs_again(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await commit(store, wid, events=[SCHEDULED])
    await finish(store, wid, ("fail", "boom"))
    done = await _reset(store, wid, 2, 1)
    assert done.previous_state == WorkflowState.FAILED
    view = await store.get_workflow_execution(wid)
    assert (view.state, view.failure_reason, view.completed_at) == ("running", "", None)
    tasks = [j["state"] for j in await jobs_of(store, wid) if j["task_key"] == "$wft"]
    assert "pending" in tasks  # its next workflow task, due now


async def test_reset_reopens_the_kept_timers_and_drops_the_later_ones(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    first = encode_event(TimerStarted(seq=1, fire_after_s=3600))
    second = encode_event(TimerStarted(seq=2, fire_after_s=60))
    await commit(store, wid, events=[first], timers=[(1, timedelta(hours=1))])
    await commit(store, wid, events=[second], timers=[(2, timedelta(minutes=1))])
    await _reset(store, wid, 3, 1, open_timer_seqs=[1])
    rows = await store.pool.fetch(
        "SELECT seq, fired_at FROM azync_workflow_timers WHERE workflow_id = $1", wid
    )
    assert [(r["seq"], r["fired_at"]) for r in rows] == [(1, None)]


async def test_reset_planned_from_a_history_that_moved_on_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await commit(store, wid, events=[SCHEDULED])
    before = await snapshot(store, wid)
    with pytest.raises(ConflictError, match="moved on"):
        await _reset(store, wid, 1, 0)
    assert await snapshot(store, wid) == before
    with pytest.raises(ValueError, match="keep must be within"):
        await _reset(store, wid, 2, 2)
    with pytest.raises(NotFoundError):
        await _reset(store, uuid.uuid4(), 1, 0)
    assert len(await store.list_workflow_runs(wid)) == 1
