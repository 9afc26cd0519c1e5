"""Every lifecycle column admits only its machine's states (migration 0022).

Jobs, workflow executions and DAG runs: no verb writes a state taken from
its caller (each state is a literal of a statement, or an enum the driver
maps), so only a faulty statement could write another; the schema refuses
it (a driver error: a bug, not bad input). Query answers, update outcomes and
schedule run outcomes are strings a caller hands to a verb: the verb refuses a
wrong one with a ``ValueError`` before writing anything.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import asyncpg
import pytest

from azync_flow.store.dags import DAGState
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState
from azync_flow.store.workflows import (
    PassWrite,
    QueryAnswer,
    QueryRequest,
    UpdateOutcome,
    WorkflowState,
)
from tests.store.dag_helpers import params, task
from tests.store.helpers import job
from tests.store.schedule_helpers import T0, record
from tests.store.workflow_helpers import lease_task, started

#: (table, CHECK constraint) -> the states the product writes there.
PRODUCT_STATES = {
    ("azync_jobs", "azync_jobs_state_check"): {s.value for s in JobState},
    ("azync_workflow_executions", "azync_workflow_executions_state_check"): {
        s.value for s in WorkflowState
    },
    ("azync_dags", "azync_dags_state_check"): {s.value for s in DAGState},
    ("azync_workflow_queries", "azync_workflow_queries_state_check"): {
        "pending",
        "claimed",
        "answered",
        "failed",
    },
    ("azync_workflow_updates", "azync_workflow_updates_state_check"): {
        "rejected",
        "completed",
        "failed",
    },
    # limit definitions: their types (check_limits refuses another before writing);
    # the capacity range names no state
    ("azync_limits", "azync_limits_type_check"): {"concurrency", "rate"},
    ("azync_limits", "azync_limits_period_check"): {"concurrency", "rate"},
    ("azync_limits", "azync_limits_capacity_check"): set(),
    ("azync_schedule_runs", "azync_schedule_runs_outcome_check"): {
        "requested",
        "buffered",
        "started",
        "skipped",
        "missed",
    },
}


async def test_each_state_check_admits_exactly_the_states_the_product_writes(
    store: PostgresStore,
) -> None:
    rows = await store.pool.fetch(
        "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) AS def FROM pg_constraint k"
        " JOIN pg_class c ON c.oid = k.conrelid"
        " WHERE c.relnamespace = $1::regnamespace AND k.contype = 'c'",
        store.schema,
    )
    admitted = {
        (r["relname"], r["conname"]): set(re.findall(r"'(\w+)'::text", r["def"])) for r in rows
    }
    # the refinement by source, tested below, names states of the job machine only
    assert admitted.pop(("azync_jobs", "azync_jobs_state_source_check")) <= {
        "blocked",
        "waiting",
        "uncertain",
        "dag",
        "workflow",
    }
    assert admitted == PRODUCT_STATES


async def test_a_job_in_a_state_outside_its_machine_is_refused(store: PostgresStore) -> None:
    p = job()
    assert await store.enqueue(p)
    with pytest.raises(asyncpg.CheckViolationError) as refused:
        await store.pool.execute("UPDATE azync_jobs SET state = 'done' WHERE id = $1", p.id)
    assert refused.value.constraint_name == "azync_jobs_state_check"
    assert await store.pool.fetchval("SELECT state FROM azync_jobs WHERE id = $1", p.id) == (
        "pending"
    )


async def test_only_dag_tasks_block_or_wait_and_only_workflow_operations_turn_uncertain(
    store: PostgresStore,
) -> None:
    p = job()
    assert await store.enqueue(p)
    for state in ("blocked", "waiting", "uncertain"):
        with pytest.raises(asyncpg.CheckViolationError) as refused:
            await store.pool.execute("UPDATE azync_jobs SET state = $2 WHERE id = $1", p.id, state)
        assert refused.value.constraint_name == "azync_jobs_state_source_check"


async def test_a_dag_task_may_block_and_wait(store: PostgresStore) -> None:
    p = params([task("a"), task("b")], [("b", "a")])
    assert await store.create_dag(p) == (True, None)
    dag_id = p.id
    states = await store.pool.fetch(
        "SELECT task_key, state FROM azync_jobs WHERE dag_id = $1 ORDER BY task_key", dag_id
    )
    assert [(r["task_key"], r["state"]) for r in states] == [("a", "pending"), ("b", "blocked")]
    await store.pool.execute(
        "UPDATE azync_jobs SET state = 'waiting' WHERE dag_id = $1 AND task_key = 'b'", dag_id
    )


async def test_a_workflow_execution_in_a_state_outside_its_machine_is_refused(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    with pytest.raises(asyncpg.CheckViolationError) as refused:
        await store.pool.execute(
            "UPDATE azync_workflow_executions SET state = 'completed' WHERE id = $1", wid
        )
    assert refused.value.constraint_name == "azync_workflow_executions_state_check"


async def test_a_dag_run_in_a_state_outside_its_machine_is_refused(store: PostgresStore) -> None:
    p = params([task("a")])
    assert await store.create_dag(p) == (True, None)
    dag_id = p.id
    with pytest.raises(asyncpg.CheckViolationError) as refused:
        await store.pool.execute("UPDATE azync_dags SET state = 'dead' WHERE id = $1", dag_id)
    assert refused.value.constraint_name == "azync_dags_state_check"


async def test_a_query_answer_in_another_state_than_answered_or_failed_is_refused(
    store: PostgresStore,
) -> None:
    wid = await started(store, name="order")
    q = QueryRequest(
        id=uuid.uuid4(), workflow_id=wid, name="status", args=b"[]", timeout=timedelta(seconds=10)
    )
    await store.request_workflow_query(q)
    assert len(await store.claim_workflow_queries(["order"], 10)) == 1
    for state in ("ok", "pending", "claimed"):
        with pytest.raises(ValueError, match=r"answer state must be one of 'answered', 'failed'"):
            await store.answer_workflow_query(q.id, QueryAnswer(state=state, answer=b"1"))
    taken = await store.take_workflow_query(q.id, withdraw=True)
    assert taken is not None
    assert taken.state == "claimed"  # nothing written


async def test_an_update_outcome_in_an_unknown_state_is_refused_and_the_pass_writes_nothing(
    store: PostgresStore,
) -> None:
    wid = await started(store)
    task_job = await lease_task(store, wid)
    assert task_job.lease_token is not None
    bad = UpdateOutcome(update_id="u1", name="add", state="accepted")
    with pytest.raises(ValueError, match=r"state of update 'u1' must be one of"):
        await store.commit_pass(
            task_job.id,
            task_job.lease_token,
            wid,
            PassWrite(expected_next_seq=1, events=[("Marker", b"{}")], updates=[bad]),
        )
    assert await store.get_workflow_update(wid, "u1") is None
    assert await store.list_history(wid) == []
    # the task still holds its lease: the pass can commit once corrected
    good = UpdateOutcome(update_id="u1", name="add", state="completed", result=b"3")
    await store.commit_pass(
        task_job.id, task_job.lease_token, wid, PassWrite(expected_next_seq=1, updates=[good])
    )
    assert await store.get_workflow_update(wid, "u1") == good


async def test_a_schedule_run_outcome_outside_the_ledger_is_refused(store: PostgresStore) -> None:
    assert await store.create_schedule(record("s", T0))
    for outcome in ("fired", "requested"):
        with pytest.raises(ValueError, match=r"schedule run outcome must be one of"):
            await store.record_schedule_run("s", T0, T0, uuid.uuid4(), outcome)
    assert await store.schedule_run("s", T0) is None
    assert await store.record_schedule_run("s", T0, T0, uuid.uuid4(), "missed") == "missed"
