"""Child executions in the workflow store: started by the parent's pass commit,
closed by the parent-close policy when the parent's run ends, and listed for the
process that ended it (real PostgreSQL)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec

from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import ChildStartParams, WorkflowState
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import commit, finish, started


def _child(seq: int, name: str, policy: str = "terminate") -> ChildStartParams:
    id = uuid.uuid4()
    return ChildStartParams(
        seq=seq,
        id=id,
        name=name,
        version="1",
        input=b"{}",
        parent_close_policy=policy,
        trace_context={"traceparent": f"00-{id.hex}-{id.hex[:16]}-01"},
    )


async def test_the_end_of_a_run_lists_the_executions_its_close_policy_terminated(
    store: PostgresStore,
) -> None:
    parent = await started(store, name="parent")
    child, kept = _child(1, "child"), _child(2, "child", policy="abandon")
    await commit(
        store,
        parent,
        events=[("ChildStarted", b"{}"), ("ChildStarted", b"{}")],
        children=[child, kept],
    )
    grandchild = _child(1, "leaf")
    await commit(store, child.id, events=[("ChildStarted", b"{}")], children=[grandchild])
    assert await store.list_closed_children(parent, parent) == []  # the run has not ended
    await finish(store, parent, ("complete", b"null"))
    closed = await store.list_closed_children(parent, parent)  # the first run's id is the parent's
    assert sorted((v.id, v.state, v.parent_id, trace) for v, trace in closed) == sorted(
        [
            (child.id, WorkflowState.TERMINATED, parent, child.trace_context),
            (grandchild.id, WorkflowState.TERMINATED, child.id, grandchild.trace_context),
        ]
    )
    assert (await store.get_workflow_execution(kept.id)).state == WorkflowState.RUNNING
    assert await store.list_closed_children(parent, uuid.uuid4()) == []  # another run
    assert await store.list_closed_children(kept.id, kept.id) == []


async def test_children_ended_on_their_own_are_not_listed_as_closed_by_the_parent(
    store: PostgresStore,
) -> None:
    parent = await started(store, name="parent")
    done = _child(1, "child")
    await commit(store, parent, events=[("ChildStarted", b"{}")], children=[done])
    await finish(store, done.id, ("complete", b'"ok"'))
    await finish(store, parent, ("fail", "boom"))
    assert await store.list_closed_children(parent, parent) == []
    assert (await store.get_workflow_execution(done.id)).state == WorkflowState.SUCCEEDED


async def test_the_children_of_an_execution_are_listed_oldest_first_over_its_runs(
    store: PostgresStore, clock: MovableClock
) -> None:
    t0 = datetime(2031, 1, 1, tzinfo=UTC)
    clock.set(t0)
    parent = await started(store, name="parent")
    low, high = sorted(uuid.uuid4() for _ in range(2))
    older = msgspec.structs.replace(_child(1, "child"), id=high)
    await commit(store, parent, events=[("ChildStarted", b"{}")], children=[older])
    await commit(store, parent, outcome=("continue", b"{}", uuid.uuid4(), False))
    clock.set(t0 + timedelta(minutes=1))
    newer = msgspec.structs.replace(_child(1, "child"), id=low)  # of the second run
    await commit(store, parent, events=[("ChildStarted", b"{}")], children=[newer])
    children = await store.list_child_workflows(parent)
    assert [(v.id, v.parent_id, v.created_at) for v in children] == [
        (high, parent, t0),
        (low, parent, t0 + timedelta(minutes=1)),
    ]
    assert await store.list_child_workflows(high) == []
