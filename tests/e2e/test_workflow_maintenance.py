"""Leader-only workflow maintenance on a real Worker: stalled-execution repair,
vacuum with retention, and its own election name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from azync_flow import attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.errors import NotFoundError
from azync_flow.runtime import WORKFLOW_LEADERSHIP
from azync_flow.schedules import SCHEDULE_LEADERSHIP
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from azync_flow.worker import DEFAULT_LEADERSHIP, STATS_LEADERSHIP, Worker
from azync_flow.workflow import WorkflowContext


@workflow(name="m_double")
async def m_double(ctx: WorkflowContext, n: int) -> int:
    return n * 2


def make_worker(store: PostgresStore) -> Worker:
    worker = Worker(store, maintain=(), handle_signals=False)
    attach_workflows(
        worker, [m_double], [], stalled_after=timedelta(minutes=5), retention=timedelta(days=1)
    )
    return worker


async def test_leader_repairs_a_stalled_execution(
    store: PostgresStore, clock: MovableClock
) -> None:
    handle = await Client(store).start(m_double, 21)
    # simulate a lost workflow task: running, nothing scheduled
    await store.pool.execute("DELETE FROM azync_jobs WHERE run_id = $1", handle.id)
    await make_worker(store).run_until_idle()
    assert (await handle.describe()).state == WorkflowState.RUNNING  # not stalled long enough
    clock.advance(timedelta(minutes=6))
    await make_worker(store).run_until_idle()
    assert await handle.result(timeout=5) == 42


async def test_leader_vacuums_finished_executions_past_retention(
    store: PostgresStore, clock: MovableClock
) -> None:
    client = Client(store)
    old = await client.start(m_double, 1)
    await make_worker(store).run_until_idle()
    assert await old.result(timeout=5) == 2
    clock.advance(timedelta(days=2))
    fresh = await client.start(m_double, 2)
    await make_worker(store).run_until_idle()
    assert await fresh.result(timeout=5) == 4  # finished now: kept
    with pytest.raises(NotFoundError):
        await old.describe()  # finished 2 days ago, retention 1 day: gone with its history
    assert (
        await store.pool.fetchval(
            "SELECT count(*) FROM azync_workflow_history WHERE workflow_id = $1", old.id
        )
        == 0
    )


def test_workflow_maintenance_has_its_own_election(store: PostgresStore) -> None:
    worker = make_worker(store)
    names = {
        step.name: step.leadership
        for group in worker.maintenance.groups.values()
        for step in group.steps
    }
    assert {v for k, v in names.items() if k.startswith("workflow.")} == {WORKFLOW_LEADERSHIP}
    assert WORKFLOW_LEADERSHIP == "azync_flow.workflow"
    # the scheduler a workflow worker runs has an election of its own
    assert names["schedule.tick"] == SCHEDULE_LEADERSHIP == "azync_flow.schedule"
    # every worker folds the counter deltas (an election of its own)
    assert names["stats.fold"] == STATS_LEADERSHIP == "azync_flow.stats"
    # and the backlog gauges are read by the same election's leader
    assert names["metrics.backlog"] == STATS_LEADERSHIP
    # idle limit keys' slots are vacuumed by the queue maintenance's leader
    assert names["limits.vacuum"] == DEFAULT_LEADERSHIP
    ruled = {"schedule.tick", "stats.fold", "metrics.backlog", "limits.vacuum"}
    assert set(names) - ruled == {k for k in names if k.startswith("workflow.")}


def test_generic_workflow_maintenance_is_refused(store: PostgresStore) -> None:
    worker = Worker(store, maintain=(Source.WORKFLOW,), handle_signals=False)
    with pytest.raises(ValueError, match="generic reaper"):
        attach_workflows(worker, [m_double], [])
