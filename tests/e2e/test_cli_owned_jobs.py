"""The job verbs (`jobs retry|archive|delete`, run for real in a subprocess) refuse
jobs owned by a workflow execution or a DAG run, and an activity's spent retry
budget is not a dead letter: the workflow saw the failure and decided (and
`workflows history` shows why it failed)."""

from __future__ import annotations

from datetime import timedelta

from azync_flow import RetryPolicy, WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.dag import DAG, DAGClient, TaskContext
from azync_flow.store.admin import JobFilter
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import JobState, Source
from azync_flow.workflow import Registry
from tests.e2e.test_cli_commands import Cmd, cmd
from tests.local_runtime import LocalRuntime

__all__ = ["cmd"]


@activity(
    name="owned_charge",
    retry=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=1)),
)
def owned_charge(amount: int) -> str:
    raise ValueError("card declined")


@workflow(name="owned_payment")
async def owned_payment(ctx: WorkflowContext, amount: int) -> str:
    return str(await owned_charge(amount))


async def test_a_failed_workflows_spent_activity_is_neither_a_dead_letter_nor_retryable(
    cmd: Cmd, store: PostgresStore
) -> None:
    handle = await Client(store).start(owned_payment, 70)
    await LocalRuntime(store, Registry([owned_payment], [owned_charge])).run_until_idle()
    assert (await handle.describe()).state == "failed"
    ops, _ = await store.list_jobs(Source.WORKFLOW, JobFilter(kind="$op:owned_charge@1"), 0, 10)
    (op,) = ops
    assert op.state == JobState.DEAD

    stats = (await cmd("stats", "--json")).json
    assert "workflow" not in stats["dead_letters"]
    assert (await cmd("jobs", "dead", "--source", "workflow", "--json")).json["items"] == []

    refused = await cmd("jobs", "retry", str(op.id), "--source", "workflow")
    assert refused.code == 4
    assert refused.err.startswith("azync-flow: error:")
    assert f"workflow execution {handle.id}" in refused.err
    every = await cmd("jobs", "retry", "--all", "--source", "workflow", "--json")
    assert (every.code, every.json) == (0, {"retried": 0})
    deleted = await cmd("jobs", "delete", str(op.id), "--source", "workflow")
    assert (deleted.code, "workflow execution" in deleted.err) == (4, True)
    after = await store.get_job(Source.WORKFLOW, op.id)
    assert (after.state, after.attempt) == (JobState.DEAD, op.attempt)


owned_saga = DAG("owned_saga")


@owned_saga.task
async def owned_reserve(ctx: TaskContext) -> dict[str, bool]:
    return {"ok": True}


async def test_a_dag_task_is_not_archived_or_deleted_by_the_job_verbs(
    cmd: Cmd, store: PostgresStore
) -> None:
    run = await DAGClient(store).run(owned_saga, {"order": 1})
    tasks, _ = await store.list_jobs(Source.DAG, JobFilter(state=JobState.PENDING), 0, 10)
    (task,) = tasks
    for verb in ("archive", "delete"):
        refused = await cmd("jobs", verb, str(task.id), "--source", "dag")
        assert refused.code == 4, refused.err
        assert f"dags retry|cancel {run.id}" in refused.err
    assert (await store.get_job(Source.DAG, task.id)).state == JobState.PENDING


async def test_the_history_table_shows_why_the_workflow_failed(
    cmd: Cmd, store: PostgresStore
) -> None:
    handle = await Client(store).start(owned_payment, 70)
    await LocalRuntime(store, Registry([owned_payment], [owned_charge])).run_until_idle()
    table = await cmd("workflows", "history", str(handle.id))
    (failed,) = [line for line in table.out.splitlines() if "WorkflowFailed" in line]
    assert "ActivityError" in failed
    assert "card declined" in failed
