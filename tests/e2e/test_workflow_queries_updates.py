"""Queries and updates end to end: real PostgreSQL, real workers, both cache modes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import (
    NotFoundError,
    QueryFailedError,
    QueryNotFoundError,
    QueryTimeoutError,
    UpdateFailedError,
    UpdateRejectedError,
)
from azync_flow.replay import Replayer
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

RESERVED: list[str] = []


@activity(name="qu_reserve")
async def reserve(item: str) -> str:
    RESERVED.append(item)
    return f"reserved:{item}"


def _positive(item: str, quantity: int) -> None:
    if quantity <= 0:
        raise ValueError(f"quantity of {item} must be positive")


@workflow(name="qu_cart")
async def cart(ctx: WorkflowContext, owner: str) -> dict[str, object]:
    items: list[str] = []
    status = "open"

    @ctx.query()
    def summary(prefix: str = "") -> dict[str, object]:
        return {"owner": prefix + owner, "items": list(items), "status": status}

    @ctx.query()
    def clock() -> str:
        return ctx.now().isoformat()  # a command: refused in a query

    @ctx.update("add", validator=_positive)
    async def add(item: str, quantity: int) -> int:
        for _ in range(quantity):
            items.append(await reserve(item))
        return len(items)

    @ctx.update()
    def drop(item: str) -> int:
        if item not in [i.removeprefix("reserved:") for i in items]:
            raise KeyError(item)
        items.remove(f"reserved:{item}")
        return len(items)

    await ctx.wait_signal("checkout")
    status = "closed"
    return {"owner": owner, "items": items}


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def runtime(request: pytest.FixtureRequest, store: PostgresStore) -> LocalRuntime:
    RESERVED.clear()
    return LocalRuntime(store, Registry([cart], [reserve]), cache_size=request.param)


@pytest.fixture
async def running(runtime: LocalRuntime) -> AsyncIterator[LocalRuntime]:
    async with runtime.worker:
        yield runtime


async def test_a_query_reads_the_state_and_writes_no_history(
    store: PostgresStore, running: LocalRuntime
) -> None:
    client = Client(store)
    handle = await client.start(cart, "ann")
    assert await handle.update("add", "book", 2) == 2
    before = await handle.history()
    got = await handle.query("summary", "Ms ", timeout=10)
    assert got == {"owner": "Ms ann", "items": ["reserved:book"] * 2, "status": "open"}
    assert await handle.history() == before
    queries = running.runtime.queries
    cached = running.workflows.cache.max_size > 0
    assert (queries.from_cache, queries.replayed) == ((1, 0) if cached else (0, 1))


async def test_a_query_of_a_finished_workflow_replays_its_whole_history(
    store: PostgresStore, running: LocalRuntime
) -> None:
    handle = await Client(store).start(cart, "bob")
    await handle.update("add", "pen", 1)
    await handle.signal("checkout")
    await handle.result(timeout=10)
    got = await handle.query("summary", timeout=10)
    assert got == {"owner": "bob", "items": ["reserved:pen"], "status": "closed"}


async def test_an_unknown_query_and_a_command_in_a_query_are_errors(
    store: PostgresStore, running: LocalRuntime
) -> None:
    handle = await Client(store).start(cart, "cy")
    with pytest.raises(QueryNotFoundError, match="registered: clock, summary"):
        await handle.query("nope", timeout=10)
    with pytest.raises(QueryFailedError, match="ReadOnlyContextError") as info:
        await handle.query("clock", timeout=10)
    assert info.value.error_type == "ReadOnlyContextError"
    types = [type(e.event).__name__ for e in await handle.history()]
    assert "SideEffectRecorded" not in types


async def test_a_query_nobody_answers_times_out(store: PostgresStore) -> None:
    handle = await Client(store).start(cart, "dee")  # no worker runs
    with pytest.raises(QueryTimeoutError, match=r"no worker answered within 0\.3s"):
        await handle.query("summary", timeout=timedelta(milliseconds=300))
    assert await store.pool.fetchval("SELECT count(*) FROM azync_workflow_queries") == 0


async def test_a_query_of_a_missing_execution_is_not_found(store: PostgresStore) -> None:
    import uuid

    handle = Client(store).get_handle(uuid.uuid4())
    with pytest.raises(NotFoundError):
        await handle.query("summary", timeout=1)


async def test_an_update_is_validated_recorded_and_answered(
    store: PostgresStore, running: LocalRuntime
) -> None:
    handle = await Client(store).start(cart, "eve")
    with pytest.raises(UpdateRejectedError, match="quantity of ink must be positive") as info:
        await handle.update("add", "ink", 0, update_id="bad")
    assert info.value.error_type == "ValueError"
    # the same id gets the same answer without a new request
    with pytest.raises(UpdateRejectedError, match="must be positive"):
        await handle.update("add", "ink", 0, update_id="bad")
    with pytest.raises(UpdateRejectedError, match="UnknownUpdate"):
        await handle.update("nope")
    assert await handle.update("add", "ink", 1, update_id="u1") == 1
    with pytest.raises(UpdateFailedError, match="KeyError") as failed:
        await handle.update("drop", "paper")
    assert failed.value.error_type == "KeyError"
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types.count("UpdateAccepted") == 2  # the rejected ones left no trace
    assert types.count("UpdateCompleted") == 2
    await handle.signal("checkout")
    assert await handle.result(timeout=10) == {"owner": "eve", "items": ["reserved:ink"]}
    # after the end: a known id still answers, a new update is refused
    assert await handle.update("add", "ink", 1, update_id="u1") == 1
    with pytest.raises(UpdateRejectedError, match="WorkflowNotRunning"):
        await handle.update("add", "ink", 1, update_id="late")
    verdict = Replayer([cart]).replay(await handle.recorded_history())
    assert verdict.ok, verdict.error


async def test_update_arguments_the_handler_cannot_take_are_rejected_and_leave_no_trace(
    store: PostgresStore, running: LocalRuntime
) -> None:
    handle = await Client(store).start(cart, "eve")
    with pytest.raises(UpdateRejectedError, match="argument 0") as wrong_type:
        await handle.update("drop", 5)  # drop takes a str
    assert wrong_type.value.error_type == "PayloadError"
    with pytest.raises(UpdateRejectedError, match=r"takes \(item\), got 2 argument") as extra:
        await handle.update("drop", "a", "b")
    assert extra.value.error_type == "TypeError"
    with pytest.raises(UpdateRejectedError, match="got 1 argument"):  # validated: no quantity
        await handle.update("add", "ink")
    types = [type(e.event).__name__ for e in await handle.history()]
    assert "UpdateAccepted" not in types
    assert await handle.update("add", "ink", 1) == 1  # the run goes on
    await handle.signal("checkout")
    assert await handle.result(timeout=10) == {"owner": "eve", "items": ["reserved:ink"]}


async def test_concurrent_duplicate_updates_run_the_handler_once(
    store: PostgresStore, running: LocalRuntime
) -> None:
    handle = await Client(store).start(cart, "fay")
    results = await asyncio.gather(
        *(handle.update("add", "cup", 1, update_id="same", timeout=20) for _ in range(5))
    )
    assert results == [1] * 5
    assert RESERVED == ["cup"]
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types.count("UpdateAccepted") == 1


async def test_an_update_pending_when_the_workflow_ends_fails(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(cart, "gus")
    await handle.signal("checkout")
    waiter = asyncio.create_task(handle.update("add", "hat", 1, update_id="x", timeout=20))
    async with asyncio.timeout(10):  # the request is buffered before the only pass runs
        while not await store.pool.fetchval(  # noqa: ASYNC110 - a row, not an event
            "SELECT count(*) FROM azync_workflow_signals WHERE name = '$update:add'"
        ):
            await asyncio.sleep(0.01)
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUCCEEDED
    with pytest.raises(UpdateFailedError, match="WorkflowFinished"):
        await waiter
