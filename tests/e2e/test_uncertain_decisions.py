"""Uncertain operations end to end: every decision path through the client,
audit, listing, errors that change nothing, concurrent resolvers — real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from azync_flow import ActivityError, Uncertain, WorkflowContext, activity, workflow
from azync_flow.client import Client, UncertainOperationView, WorkflowHandle
from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.retry import RetryPolicy
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing_otel import SpanCapture

from ._uncertain_helpers import event_types, local_runtime, op_audit, op_row, snapshot

CALLS: list[str] = []


@activity(name="wire", idempotent=False)
def wire(account: str, amount: int) -> str:
    CALLS.append(f"wire:{account}:{amount}")
    if len([c for c in CALLS if c.startswith("wire:")]) == 1:
        raise Uncertain("bank timed out after the request was sent")
    return f"wired {amount} to {account}"


@workflow(name="payout")
async def payout(ctx: WorkflowContext, amount: int) -> str:
    try:
        return await wire("acct-9", amount)
    except ActivityError as err:
        return f"payout failed: {err.error_type}: {err.message}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


async def _suspended(
    store: PostgresStore,
) -> tuple[Client, WorkflowHandle[str], UncertainOperationView]:
    runtime = local_runtime(store, [payout], [wire])
    client = Client(store)
    handle = await client.start(payout, 70)
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    assert CALLS == ["wire:acct-9:70"]  # parked, never retried blindly
    (op,) = await client.list_uncertain()
    return client, handle, op


async def test_list_uncertain_shows_workflow_activity_input_since_and_reason(
    store: PostgresStore,
) -> None:
    client, handle, op = await _suspended(store)
    assert (op.workflow_id, op.workflow_name, op.activity) == (handle.id, "payout", "wire")
    assert op.input == b'["acct-9",70]'
    assert op.execution_key == f"{handle.id}/1"
    assert "bank timed out" in op.reason
    assert op.since is not None
    assert op.attempt == 1
    assert "is uncertain" in (await snapshot(store, handle.id))[2][1]
    assert await client.list_uncertain(workflow_id=uuid.uuid4()) == []


async def test_complete_hands_the_result_to_the_workflow_and_audits_the_decision(
    store: PostgresStore,
) -> None:
    client, handle, op = await _suspended(store)
    await client.resolve_uncertain(
        str(op.operation_id),
        "complete",
        result="wired 70 (bank statement)",
        note="seen on the statement",
        decided_by="ann",
    )
    runtime = local_runtime(store, [payout], [wire])
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "wired 70 (bank statement)"
    assert CALLS == ["wire:acct-9:70"]
    row = await op_row(store, op.operation_id)
    assert (row["state"], row["decision"], row["decision_by"], row["decision_note"]) == (
        "succeeded",
        "complete",
        "ann",
        "seen on the statement",
    )
    assert row["decided_at"] is not None
    history = await handle.history()
    resolved = [e.event for e in history if type(e.event).__name__ == "OperationResolved"]
    assert [(r.decision, r.decided_by, r.note) for r in resolved] == [
        ("complete", "ann", "seen on the statement")
    ]
    assert event_types(history) == [
        "ActivityScheduled",
        "OperationUncertain",
        "OperationResolved",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]


async def test_a_note_or_decider_that_is_not_valid_utf8_is_recorded_escaped(
    store: PostgresStore,
) -> None:
    # an operator's note or name from an undecodable command-line argument
    client, handle, op = await _suspended(store)
    await client.resolve_uncertain(
        op, "complete", result="wired 70", note="seen \udcff", decided_by="ann \ud800"
    )
    row = await op_row(store, op.operation_id)
    assert (row["decision_by"], row["decision_note"]) == ("ann \\ud800", "seen \\udcff")
    resolved = [
        e.event for e in await handle.history() if type(e.event).__name__ == "OperationResolved"
    ]
    assert [(r.decided_by, r.note) for r in resolved] == [("ann \\ud800", "seen \\udcff")]
    await local_runtime(store, [payout], [wire]).run_until_idle()
    assert await handle.result(timeout=5) == "wired 70"


async def test_fail_raises_activity_error_in_the_workflow(store: PostgresStore) -> None:
    client, handle, op = await _suspended(store)
    await client.resolve_uncertain(op, "fail", error="bank has no such transfer", decided_by="bo")
    await local_runtime(store, [payout], [wire]).run_until_idle()
    assert await handle.result(timeout=5) == ("payout failed: Uncertain: bank has no such transfer")
    assert CALLS == ["wire:acct-9:70"]
    row = await op_row(store, op.operation_id)
    assert (row["state"], row["decision"], row["last_error"]) == (
        "dead",
        "fail",
        "bank has no such transfer",
    )


async def test_retry_runs_the_operation_again_with_its_attempt_recorded(
    store: PostgresStore,
) -> None:
    client, handle, op = await _suspended(store)
    await client.resolve_uncertain(
        op, "retry", note="bank confirms nothing arrived", decided_by="cy"
    )
    await local_runtime(store, [payout], [wire]).run_until_idle()
    assert await handle.result(timeout=5) == "wired 70 to acct-9"
    assert CALLS == ["wire:acct-9:70", "wire:acct-9:70"]
    row = await op_row(store, op.operation_id)
    assert (row["state"], row["attempt"], row["decision"]) == ("succeeded", 2, "retry")
    audit = await op_audit(store, op.operation_id)
    assert audit[0][0] == 1
    assert audit[0][1].startswith("uncertain: ")
    assert audit[1] == (1, "resolved retry by cy")
    types = event_types(await handle.history())
    assert types == [
        "ActivityScheduled",
        "OperationUncertain",
        "OperationResolved",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]


async def test_resolving_twice_unknown_ids_and_live_ops_are_errors_that_change_nothing(
    store: PostgresStore,
) -> None:
    client, handle, op = await _suspended(store)
    with pytest.raises(ValueError, match="unknown decision"):
        await client.resolve_uncertain(op, "maybe")
    await client.resolve_uncertain(op, "complete", result="ok", decided_by="ann")
    before = await snapshot(store, handle.id)
    with pytest.raises(ConflictError, match="already resolved 'complete' by ann"):
        await client.resolve_uncertain(op, "fail", error="x")
    with pytest.raises(ConflictError):
        await client.resolve_uncertain(op, "complete", result="again")
    with pytest.raises(NotFoundError, match="does not exist"):
        await client.resolve_uncertain(uuid.uuid4(), "retry")
    assert await snapshot(store, handle.id) == before


async def test_a_running_operation_cannot_be_resolved(store: PostgresStore) -> None:
    gate = asyncio.Event()

    @activity(name="slow_wire", idempotent=False)
    async def slow_wire(n: int) -> int:
        await gate.wait()
        return n

    @workflow(name="slow_payout")
    async def slow_payout(ctx: WorkflowContext, n: int) -> int:
        return await slow_wire(n)

    runtime = local_runtime(store, [slow_payout], [slow_wire])
    handle = await Client(store).start(slow_payout, 5)
    task = asyncio.create_task(runtime.run_until_idle())
    for _ in range(200):
        row = await store.pool.fetchrow(
            "SELECT id FROM azync_jobs WHERE run_id = $1 AND state = 'active'"
            " AND task_key <> '$wft'",
            handle.id,
        )
        if row is not None:
            break
        await asyncio.sleep(0.01)
    assert row is not None
    before = await snapshot(store, handle.id)
    with pytest.raises(NotFoundError, match="is active, not uncertain"):
        await Client(store).resolve_uncertain(row["id"], "complete", result=5)
    assert await snapshot(store, handle.id) == before
    gate.set()
    await task
    assert await handle.result(timeout=5) == 5


async def test_concurrent_resolvers_through_the_client_exactly_one_wins(
    store: PostgresStore, pg_dsn: str
) -> None:
    _, handle, op = await _suspended(store)
    stores = [
        await open_store(pg_dsn, Config(schema=store.schema), migrate=False) for _ in range(4)
    ]
    try:
        attempts = [
            Client(stores[0]).resolve_uncertain(op, "complete", result="A", decided_by="a"),
            Client(stores[1]).resolve_uncertain(op, "fail", error="B", decided_by="b"),
            Client(stores[2]).resolve_uncertain(op, "retry", decided_by="c"),
            Client(stores[3]).resolve_uncertain(op, "complete", result="D", decided_by="d"),
        ]
        results = await asyncio.gather(*attempts, return_exceptions=True)
    finally:
        for s in stores:
            await s.close()
    winners = [i for i, r in enumerate(results) if r is None]
    assert len(winners) == 1, results
    assert all(isinstance(r, ConflictError) for r in results if r is not None), results
    await local_runtime(store, [payout], [wire]).run_until_idle()
    history = event_types(await handle.history())
    assert history.count("OperationResolved") == 1
    assert history[-1] == "WorkflowCompleted"
    winner = "abcd"[winners[0]]
    assert (await op_row(store, op.operation_id))["decision_by"] == winner


async def test_non_idempotent_start_to_close_overrun_is_uncertain_but_idempotent_retries(
    store: PostgresStore,
) -> None:
    runs: list[str] = []

    @activity(name="charge_once", idempotent=False, start_to_close=timedelta(seconds=0.2))
    async def charge_once(n: int) -> int:
        runs.append("charge")
        await asyncio.sleep(0.5 if runs.count("charge") == 1 else 0)
        return n

    @activity(
        name="lookup",
        start_to_close=timedelta(seconds=0.2),
        retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=1)),
    )
    async def lookup(n: int) -> int:
        runs.append("lookup")
        await asyncio.sleep(0.5 if runs.count("lookup") == 1 else 0)
        return n

    @workflow(name="overrun")
    async def overrun(ctx: WorkflowContext, n: int) -> int:
        return await lookup(n) + await charge_once(n)

    runtime = local_runtime(store, [overrun], [charge_once, lookup])
    client = Client(store)
    handle = await client.start(overrun, 4)
    for _ in range(20):
        await runtime.run_until_idle()
        if runs.count("charge"):
            break
        await asyncio.sleep(0.01)
    assert runs == ["lookup", "lookup", "charge"]  # the idempotent one was retried
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    (op,) = await client.list_uncertain()
    assert "start_to_close" in op.reason
    await client.resolve_uncertain(op, "complete", result=4)
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == 8
    assert runs == ["lookup", "lookup", "charge"]


async def test_a_decision_by_operation_id_names_the_activity_in_its_run_event(
    store: PostgresStore,
) -> None:
    """The CLI and the console decide by id string: the ``uncertain.resolved``
    event (and the resolved-operations metric it feeds) still names the activity."""
    _, _, op = await _suspended(store)
    capture = SpanCapture()
    client = Client(store, tracer_provider=capture.provider)
    await client.resolve_uncertain(str(op.operation_id), "complete", result="wired by hand")
    [event] = capture.named("uncertain.resolved wire")
    assert event.attributes["azync.resolution"] == "complete"


@pytest.mark.parametrize("error", ["", "  "], ids=["empty", "blank"])
async def test_a_fail_decision_with_an_empty_error_is_refused_and_changes_nothing(
    store: PostgresStore, error: str
) -> None:
    client, handle, op = await _suspended(store)
    before = await snapshot(store, handle.id)
    with pytest.raises(ValueError, match="error must not be empty"):
        await client.resolve_uncertain(op.operation_id, "fail", error=error, note="n")
    assert await snapshot(store, handle.id) == before
    (still,) = await client.list_uncertain()
    assert still.operation_id == op.operation_id
