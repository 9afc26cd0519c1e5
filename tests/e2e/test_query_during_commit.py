"""A query never waits on a pass that is inside its commit: it answers from the
last committed state (the history as committed, replayed) while the pass's
commit is held, in both cache modes; once the commit lands, queries see it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@workflow(name="qc_door")
async def door(ctx: WorkflowContext) -> str:
    status = "closed"

    @ctx.query()
    def state() -> str:
        return status

    await ctx.wait_signal("open")
    status = "open"
    await ctx.wait_signal("close")
    return "done"


@pytest.mark.parametrize("cache_size", [1000, 0], ids=["sticky", "full"])
async def test_a_query_answers_the_last_committed_state_while_a_pass_commit_is_held(
    store: PostgresStore, cache_size: int
) -> None:
    runtime = LocalRuntime(store, Registry([door], []), cache_size=cache_size)
    held = asyncio.Event()
    release = asyncio.Event()
    armed: set[uuid.UUID] = set()

    async def before_commit(run_id: uuid.UUID, path: str) -> None:
        if run_id in armed:
            armed.discard(run_id)
            held.set()
            await release.wait()

    runtime.workflows.before_commit = before_commit
    client = Client(store)
    async with runtime.worker:
        handle = await client.start(door)
        assert await handle.query("state", timeout=10) == "closed"
        armed.add(handle.id)
        await handle.signal("open")
        await asyncio.wait_for(held.wait(), 10)  # the pass consuming "open" is committing
        try:
            assert await handle.query("state", timeout=10) == "closed"
        finally:
            release.set()
        await handle.signal("close")
        assert await handle.result(timeout=10) == "done"
        assert await handle.query("state", timeout=10) == "open"
