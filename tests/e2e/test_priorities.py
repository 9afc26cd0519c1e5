"""Priorities end to end (real worker, real PostgreSQL): executions run highest
first; activities and children take their workflow's priority unless their
options give one."""

from __future__ import annotations

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

RAN: list[int] = []


@activity(name="pr_work")
def pr_work(n: int) -> int:
    RAN.append(n)
    return n


@workflow(name="pr_kid")
async def pr_kid(ctx: WorkflowContext, n: int) -> int:
    return ctx.info.priority


@workflow(name="pr_job")
async def pr_job(ctx: WorkflowContext, n: int) -> int:
    return await pr_work(n)


@workflow(name="pr_parent")
async def pr_parent(ctx: WorkflowContext, n: int) -> list[int]:
    await pr_work(n)
    await pr_work.with_options(priority=-2)(n)
    inherited = await ctx.execute_child(pr_kid, n)
    given = await ctx.execute_child(pr_kid, n, priority=1)
    return [ctx.info.priority, inherited, given]


async def test_executions_of_a_backlog_run_highest_priority_first(store: PostgresStore) -> None:
    RAN.clear()
    client = Client(store)
    handles = [await client.start(pr_job, p, priority=p) for p in (0, 3, 1, 4, 2)]
    await LocalRuntime(store, Registry([pr_job], [pr_work]), batch=1).run_until_idle()
    assert [await h.result(timeout=5) for h in handles] == [0, 3, 1, 4, 2]
    assert RAN == [4, 3, 2, 1, 0]


async def test_activities_and_children_take_the_workflows_priority_unless_given(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(pr_parent, 5, priority=7)
    await LocalRuntime(store, Registry([pr_parent, pr_kid], [pr_work])).run_until_idle()
    assert await handle.result(timeout=5) == [7, 7, 1]
    assert (await handle.describe()).priority == 7
    ops = await store.pool.fetch(
        "SELECT priority FROM azync_jobs WHERE run_id = $1 AND kind = '$op:pr_work@1'"
        " ORDER BY enqueued_at",
        handle.id,
    )
    assert [r["priority"] for r in ops] == [7, -2]
