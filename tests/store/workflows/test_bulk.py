"""Contract clauses of WorkflowStore.StartWorkflows / TxStore.StartWorkflowsTx on PostgreSQL."""

from __future__ import annotations

import pytest

from azync_flow.errors import IdempotencyConflictError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.store.workflows import WorkflowState
from tests.store.helpers import stat_sums
from tests.store.workflow_helpers import finish, jobs_of, start_params


async def _executions(store: PostgresStore) -> int:
    return int(await store.pool.fetchval("SELECT count(*) FROM azync_workflow_executions"))


async def _tasks(store: PostgresStore) -> int:
    return int(await store.pool.fetchval("SELECT count(*) FROM azync_jobs"))


async def test_start_workflows_inserts_each_execution_with_one_pending_task(
    store: PostgresStore,
) -> None:
    items = [start_params(key=f"k{i}", input=f'{{"n":{i}}}'.encode()) for i in range(3)]
    carriers = [{"traceparent": f"00-{i:032x}-{i + 1:016x}-01"} for i in range(3)]
    got = await store.start_workflows(items, trace_contexts=carriers)
    assert got == [(True, p.id) for p in items]
    for p, carrier in zip(items, carriers, strict=True):
        view = await store.get_workflow_execution(p.id)
        assert view.state == WorkflowState.RUNNING
        assert (view.name, view.version, view.input) == ("order", "1", p.input)
        (task,) = await jobs_of(store, p.id)
        assert (task["kind"], task["task_key"], task["state"]) == ("$wft", "$wft", "pending")
        first_pass = "SELECT first_pass FROM azync_jobs WHERE run_id = $1"
        assert await store.pool.fetchval(first_pass, p.id)  # ranked as a new execution's
        assert (await store.load_workflow_task(p.id)).trace_context == carrier
    assert (await stat_sums(store, "$wft", source=Source.WORKFLOW))["enqueued"] == 3


async def test_start_workflows_of_nothing_writes_nothing(store: PostgresStore) -> None:
    assert await store.start_workflows([]) == []
    assert await _executions(store) == 0


async def test_start_workflows_returns_the_live_holder_of_a_key_or_id_and_writes_nothing_for_it(
    store: PostgresStore,
) -> None:
    held = start_params(key="K")
    assert await store.start_workflow(held) == (True, held.id)
    same_key, same_id, fresh = start_params(key="K"), start_params(), start_params()
    same_id.id = held.id
    got = await store.start_workflows([same_key, same_id, fresh])
    assert got == [(False, held.id), (False, held.id), (True, fresh.id)]
    assert await _executions(store) == 2
    assert await jobs_of(store, same_key.id) == []


async def test_start_workflows_resolves_duplicates_within_the_batch_in_order(
    store: PostgresStore,
) -> None:
    first, second, other, plain = (
        start_params(key="A"),
        start_params(key="A"),
        start_params(key="B"),
        start_params(),
    )
    twin = start_params()
    twin.id = plain.id
    other_name = start_params(name="refund", key="A")
    got = await store.start_workflows([first, second, other, plain, twin, other_name])
    assert got == [
        (True, first.id),
        (False, first.id),
        (True, other.id),
        (True, plain.id),
        (False, plain.id),
        (True, other_name.id),
    ]
    assert await _executions(store) == 4
    assert await _tasks(store) == 4


async def test_start_workflows_frees_the_key_of_a_finished_execution(
    store: PostgresStore,
) -> None:
    done = start_params(key="K")
    assert await store.start_workflow(done) == (True, done.id)
    await finish(store, done.id, ("complete", b'"ok"'))
    again = start_params(key="K")
    assert await store.start_workflows([again]) == [(True, again.id)]


async def test_start_workflows_refuses_a_held_key_with_other_input_and_writes_nothing(
    store: PostgresStore,
) -> None:
    held = start_params(key="K")
    assert await store.start_workflow(held) == (True, held.id)
    fresh, clash = start_params(), start_params(key="K", input=b'{"n":2}')
    with pytest.raises(IdempotencyConflictError, match=str(held.id)):
        await store.start_workflows([fresh, clash])
    assert await _executions(store) == 1
    assert await _tasks(store) == 1


async def test_start_workflows_with_a_bad_item_writes_nothing(store: PostgresStore) -> None:
    bad_items = [
        start_params(name="nul\x00"),
        start_params(name="x" * 256),
        start_params(key="nul\x00"),
    ]
    for bad in bad_items:
        with pytest.raises(ValueError, match="workflow"):
            await store.start_workflows([start_params(), bad])
    with pytest.raises(ValueError, match="trace_contexts"):
        await store.start_workflows([start_params()], trace_contexts=[{}, {}])
    assert await _executions(store) == 0


async def test_start_workflows_tx_rolls_back_with_the_callers_transaction(
    store: PostgresStore,
) -> None:
    items = [start_params(key="R"), start_params()]
    async with store.pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        got = await store.start_workflows_tx(conn, items)
        assert got == [(True, p.id) for p in items]
        await tx.rollback()
    assert await _executions(store) == 0
    assert await _tasks(store) == 0
    assert await store.start_workflows(items) == [(True, p.id) for p in items]
