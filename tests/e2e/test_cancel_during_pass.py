"""A cancel accepted while a pass is running the workflow's code is not
dropped: that pass is refused at its commit and runs again with the request,
so the code sees ``CancelledError`` at its next await, in both cache modes (a
pass of a workflow task, and a pass carried by an activity's completion). A
request made after the result the code was waiting for was recorded is too
late: the run ends as its code decides."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@activity(name="cdp_first")
def first(n: int) -> int:
    return n


@activity(name="cdp_second")
def second(n: int) -> int:
    return n


#: how far each run's code got in its latest pass
REACHED: dict[uuid.UUID, str] = {}


@workflow(name="cdp_steps")
async def steps(ctx: WorkflowContext) -> str:
    try:
        await first(1)
        REACHED[ctx.info.execution_id] = "first result"
        await second(2)
        REACHED[ctx.info.execution_id] = "second result"
    except asyncio.CancelledError:
        return "cancelled-clean"
    return "ok"


class _Hold:
    """Holds, before its commit, the first pass of one run whose code got to ``point``."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.run: uuid.UUID | None = None
        self.held, self.release = asyncio.Event(), asyncio.Event()

    async def before_commit(self, run_id: uuid.UUID, path: str) -> None:
        if run_id == self.run and REACHED.get(run_id) == self.point and not self.held.is_set():
            self.held.set()
            await self.release.wait()


async def _types(client: Client, run_id: uuid.UUID) -> list[str]:
    return [type(e.event).__name__ for e in await client.get_handle(run_id).history()]


async def _cancel_during_pass(store: PostgresStore, cache_size: int, point: str) -> str:
    """Run ``steps``; cancel while the pass that got to ``point`` is held."""
    runtime = LocalRuntime(store, Registry([steps], [first, second]), cache_size=cache_size)
    hold = _Hold(point)
    runtime.workflows.before_commit = hold.before_commit
    client = Client(store)
    async with runtime.worker:
        handle = await client.start(steps)
        hold.run = handle.id
        await asyncio.wait_for(hold.held.wait(), 10)
        try:
            await handle.cancel()
        finally:
            hold.release.set()
        result = await handle.result(timeout=20)
    types = await _types(client, handle.id)
    assert types[-1] == "WorkflowCompleted"
    return result


@pytest.mark.parametrize("cache_size", [1000, 0], ids=["sticky", "full"])
async def test_a_cancel_sent_while_a_pass_runs_reaches_the_codes_next_await(
    store: PostgresStore, cache_size: int
) -> None:
    # the pass took the first activity's result and will await the second
    assert await _cancel_during_pass(store, cache_size, "first result") == "cancelled-clean"


async def test_a_cancel_sent_after_the_last_result_was_recorded_is_too_late(
    store: PostgresStore,
) -> None:
    # Full replay: the second activity's result is recorded on its own before
    # the pass that takes it, and so before the request. (With a sticky cache
    # the result is recorded with that pass; refused, it may be recorded after
    # the request, and then the code sees it: either outcome is right there.)
    assert await _cancel_during_pass(store, 0, "second result") == "ok"
