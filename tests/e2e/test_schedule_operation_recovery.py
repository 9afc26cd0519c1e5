"""``store.schedule_operation`` as a recovery script uses it: the job of an
activity call is lost; scheduling the call again by its execution key (with
what the pass wrote) lets a real worker run it and the workflow finish, and
scheduling it twice runs it once."""

from __future__ import annotations

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.store.admin import JobFilter
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.store.workflows import ScheduleOperationParams
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

RAN: list[int] = []


@activity(name="rec_charge")
async def charge(cents: int) -> str:
    RAN.append(cents)
    return f"charged {cents}"


@workflow(name="rec_order")
async def order(ctx: WorkflowContext, cents: int) -> str:
    return await charge(cents)


async def test_a_lost_operation_scheduled_again_by_its_key_completes_the_workflow(
    store: PostgresStore,
) -> None:
    RAN.clear()
    handle = await Client(store).start(order, 1999)
    # a worker without the activity: the pass schedules the call, nobody runs it
    await LocalRuntime(store, Registry([order], [])).run_until_idle()
    (op,) = [
        j
        for j in (await store.list_jobs(Source.WORKFLOW, JobFilter(), 0, 10))[0]
        if j.run_id == handle.id and j.task_key != "$wft"
    ]
    await store.pool.execute("DELETE FROM azync_jobs WHERE id = $1", op.id)  # the job is lost
    params = ScheduleOperationParams(
        workflow_id=handle.id,
        kind=op.kind,
        payload=op.payload,
        execution_key=op.task_key,
        meta=op.meta,
    )
    again = await store.schedule_operation(params)
    assert again != op.id
    assert await store.schedule_operation(params) == again  # once, however often asked
    await LocalRuntime(store, Registry([order], [charge])).run_until_idle()
    assert await handle.result(timeout=10) == "charged 1999"
    assert RAN == [1999]
