"""The runs of an execution that continues as new: each earlier run archived with
its history, the current run's history sized and listed on its own (real
PostgreSQL)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from tests.store.workflow_helpers import commit, finish, started

T0 = datetime(2032, 3, 1, tzinfo=UTC)


async def test_continue_as_new_archives_the_run_and_its_history(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    wid = await started(store, input=b'{"period":1}')
    second = uuid.uuid4()
    clock.set(T0 + timedelta(hours=1))
    await commit(
        store,
        wid,
        events=[("E1", b"ab"), ("E2", b"cde")],
        outcome=("continue", b'{"period":2}', second, False),
    )
    assert await store.workflow_history_size(wid) == (0, 0)  # the new run starts empty
    clock.set(T0 + timedelta(hours=2))
    await commit(store, wid, events=[("F1", b"12345")])
    assert await store.workflow_history_size(wid) == (1, 5)
    assert [(e.seq, e.type) for e in await store.list_history(wid)] == [(1, "F1")]
    earlier = await store.list_run_history(wid, 1)
    assert [(e.seq, e.type, e.payload) for e in earlier] == [(1, "E1", b"ab"), (2, "E2", b"cde")]
    runs = await store.list_workflow_runs(wid)
    assert [(r.run_no, r.run_id, r.input, r.events, r.current, r.state) for r in runs] == [
        (1, wid, b'{"period":1}', 2, False, "continued_as_new"),
        (2, second, b'{"period":2}', 1, True, WorkflowState.RUNNING),
    ]
    assert (runs[0].started_at, runs[0].ended_at) == (T0, T0 + timedelta(hours=1))
    assert (runs[1].started_at, runs[1].ended_at) == (T0 + timedelta(hours=1), None)


async def test_the_final_run_ends_with_the_execution(
    store: PostgresStore, clock: MovableClock
) -> None:
    clock.set(T0)
    wid = await started(store)
    await commit(store, wid, outcome=("continue", b"2", uuid.uuid4(), False))
    clock.set(T0 + timedelta(minutes=5))
    await finish(store, wid, ("complete", b'"done"'))
    final = (await store.list_workflow_runs(wid))[-1]
    assert (final.run_no, final.current, final.state) == (2, True, WorkflowState.SUCCEEDED)
    assert final.ended_at == T0 + timedelta(minutes=5)


async def test_a_single_run_is_listed_as_current_and_has_no_earlier_history(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    await commit(store, wid, events=[("E", b"x")])
    (run,) = await store.list_workflow_runs(wid)
    assert (run.run_no, run.run_id, run.events, run.current) == (1, wid, 1, True)
    assert await store.workflow_history_size(wid) == (1, 1)
    with pytest.raises(NotFoundError, match="no earlier run 1"):
        await store.list_run_history(wid, 1)  # the current run's history is list_history's
    with pytest.raises(NotFoundError):
        await store.list_workflow_runs(uuid.uuid4())
    assert await store.workflow_history_size(uuid.uuid4()) == (0, 0)
