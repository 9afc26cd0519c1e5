"""`workflows start NAME` warns on stderr (still exit 0) when no live worker
registers NAME: each workflow worker keeps one registry row of its own with the
workflow names it runs, refreshed by itself and removed when it stops."""

from __future__ import annotations

import uuid
from datetime import timedelta

from azync_flow import WorkflowContext, workflow
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry
from tests.e2e.test_cli_commands import Cmd, cmd
from tests.local_runtime import LocalRuntime

__all__ = ["cmd"]

WARNING = "no live worker serves workflow"


@workflow(name="reg_greet")
async def reg_greet(ctx: WorkflowContext, who: str) -> str:
    return f"hello {who}"


async def test_starting_a_workflow_no_live_worker_registers_warns_on_stderr(
    cmd: Cmd, store: PostgresStore
) -> None:
    nosuch = await cmd("workflows", "start", "nosuch")
    assert nosuch.code == 0
    assert nosuch.out.startswith("started ")
    assert f"{WARNING} 'nosuch'" in nosuch.err

    runtime = LocalRuntime(store, Registry([reg_greet], []))
    async with runtime.worker:
        assert await store.live_workers_for_workflow("reg_greet") == 1
        served = await cmd("workflows", "start", "reg_greet", "--input", '"ann"')
        assert (served.code, served.err) == (0, "")
        other = await cmd("workflows", "start", "nosuch")
        assert f"{WARNING} 'nosuch'" in other.err
    # stopped: its row is gone, so the name is unserved again
    assert await store.live_workers_for_workflow("reg_greet") == 0
    assert WARNING in (await cmd("workflows", "start", "reg_greet", "--input", '"bo"')).err


async def test_a_killed_workers_row_stops_counting_once_its_expiry_passes(
    store: PostgresStore,
) -> None:
    worker_id = uuid.uuid4()
    await store.register_worker(worker_id, ["reg_greet"], timedelta(seconds=30))
    assert await store.live_workers_for_workflow("reg_greet") == 1
    await store.register_worker(worker_id, ["reg_greet"], timedelta(seconds=-1))  # lapsed
    assert await store.live_workers_for_workflow("reg_greet") == 0
