"""A decided result already in history that does not fit the activity's result
type (written before the check existed, by a hook of an operation that recorded
no type, or fitting an older deployment's type) suspends the run for a new
decision instead of failing it: real Worker, real PostgreSQL, the CLI."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from azync_flow import Reconciled, Uncertain, WorkflowContext, activity, attach_workflows, workflow
from azync_flow._decisions import resolution_events
from azync_flow._operations import decode_operation, seq_of_execution_key
from azync_flow.client import Client, UncertainOperationView, WorkflowHandle
from azync_flow.errors import ActivityError
from azync_flow.runtime.uncertain import Reconciler
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.worker import Worker
from azync_flow.workflow import Registry

from ._uncertain_helpers import cli, event_types, op_audit, op_row, resolve_argv

HOOK: list[str] = []
GATE: list[asyncio.Event] = []


@activity(name="uf_charge", idempotent=False)
def charge(amount: int) -> str:
    raise Uncertain("provider timed out")


async def lookup(amount: int, execution_key: str) -> Reconciled:
    HOOK.append(execution_key)
    await GATE[0].wait()
    return Reconciled.completed(12345, note="provider lookup")


@activity(name="uf_charge_hooked", idempotent=False, reconcile=lookup)
def charge_hooked(amount: int) -> str:
    raise Uncertain("provider timed out")


@workflow(name="uf_checkout")
async def checkout(ctx: WorkflowContext, amount: int) -> str:
    try:
        return "charged " + await charge(amount)
    except ActivityError as exc:
        return f"not charged: {exc.message}"


@workflow(name="uf_checkout_hooked")
async def checkout_hooked(ctx: WorkflowContext, amount: int) -> str:
    return "charged " + await charge_hooked(amount)


@pytest.fixture(autouse=True)
def _clear() -> None:
    HOOK.clear()
    GATE[:] = [asyncio.Event()]


@pytest.fixture
async def worker(store: PostgresStore) -> AsyncIterator[Worker]:
    w = Worker(
        store,
        lease=timedelta(seconds=10),
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=200),
        handle_signals=False,
    )
    attach_workflows(w, [checkout, checkout_hooked], [charge, charge_hooked])
    async with w:
        yield w


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(300):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def _parked(
    store: PostgresStore, wf: Any
) -> tuple[WorkflowHandle[Any], UncertainOperationView]:
    client = Client(store)
    handle = await client.start(wf, 12)

    async def waiting() -> bool:
        return bool(await client.list_uncertain(workflow_id=handle.id))

    await _until(waiting, "the operation to turn uncertain")
    (op,) = await client.list_uncertain(workflow_id=handle.id)
    return handle, op


async def _decide_unchecked(
    store: PostgresStore, op: UncertainOperationView, result: bytes
) -> None:
    """A complete decision written the way an older version wrote it: straight
    to the store, its result never checked against the result type."""
    resolved, outcome = resolution_events(
        seq_of_execution_key(op.execution_key), "complete", result=result, decided_by="old cli"
    )
    await store.resolve_uncertain(
        op.operation_id, "complete", result, None, "old", "old cli",
        resolved_event=resolved, outcome_event=outcome,
    )  # fmt: skip


async def _forget_result_type(store: PostgresStore, op_id: uuid.UUID) -> None:
    """Make the operation look scheduled before result types were recorded."""
    row = await op_row(store, op_id)
    payload = decode_operation(bytes(row["payload"]))
    payload.result_type = None
    await store.pool.execute(
        "UPDATE azync_jobs SET payload = $2 WHERE id = $1", op_id, msgspec.json.encode(payload)
    )


async def _suspended_again(handle: WorkflowHandle[Any], since_seq: int) -> Any:
    async def again() -> bool:
        d = await handle.describe()
        return d.state == WorkflowState.SUSPENDED and (d.suspend_seq or 0) > since_seq

    await _until(again, "the run to be suspended on the unfit decision")
    return await handle.describe()


async def test_an_unfit_decision_in_history_suspends_the_run_and_a_new_decision_completes_it(
    store: PostgresStore, worker: Worker, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    handle, op = await _parked(store, checkout)
    first = await handle.describe()
    await _decide_unchecked(store, op, b"12345")

    shown = await _suspended_again(handle, first.suspend_seq or 0)
    assert shown.suspend_operation_id == op.operation_id
    for part in ("$op:uf_charge@", op.execution_key, "12345", "result type str", "decide again"):
        assert part in shown.suspend_reason
    assert '$: 12345 is not of type "string"' in shown.suspend_reason
    row = await op_row(store, op.operation_id)
    assert row["state"] == "uncertain"
    assert "the decided result 12345 does not fit the result type str" in row["uncertain_reason"]
    assert (op.attempt, f"uncertain: {row['uncertain_reason']}") in await op_audit(
        store, op.operation_id
    )

    code, out, _ = await cli(pg_dsn, store, capsys, "uncertain", "list", "--json")
    assert code == 0
    (listed,) = [o for o in json.loads(out) if o["operation_id"] == str(op.operation_id)]
    assert "does not fit the result type str" in listed["reason"]
    code, out, _ = await cli(pg_dsn, store, capsys, "workflows", "show", str(handle.id), "--json")
    assert code == 0
    assert json.loads(out)["suspend_reason"] == shown.suspend_reason

    code, _, _ = await cli(pg_dsn, store, capsys, *resolve_argv(op.operation_id, '"ch_1"'))
    assert code == 0
    assert await asyncio.wait_for(handle.result(), 15) == "charged ch_1"
    types = event_types(await store_history(store, handle.id))
    assert types.count("ActivityCompleted") == 2
    assert types.count("OperationUncertain") == 2
    assert types.count("OperationResolved") == 2


async def test_after_an_unfit_decision_a_fail_decision_fails_the_call(
    store: PostgresStore, worker: Worker
) -> None:
    handle, op = await _parked(store, checkout)
    first = await handle.describe()
    await _decide_unchecked(store, op, b'{"id": 1}')
    await _suspended_again(handle, first.suspend_seq or 0)
    await Client(store).resolve_uncertain(
        op.operation_id, "fail", error="card declined", note="provider", decided_by="ann"
    )
    assert await asyncio.wait_for(handle.result(), 15) == "not charged: card declined"


async def test_a_reparked_operation_checks_the_next_decision_against_the_current_result_type(
    store: PostgresStore, worker: Worker, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    handle, op = await _parked(store, checkout)
    first = await handle.describe()
    await _forget_result_type(store, op.operation_id)  # scheduled by an older version
    # unchecked: the operation recorded no type, so the client takes any result
    await Client(store).resolve_uncertain(
        op.operation_id, "complete", result=7, note="old", decided_by="ann"
    )
    await _suspended_again(handle, first.suspend_seq or 0)
    recorded = decode_operation(bytes((await op_row(store, op.operation_id))["payload"]))
    assert recorded.result_type is not None
    assert recorded.result_type.name == "str"

    code, _, err = await cli(pg_dsn, store, capsys, *resolve_argv(op.operation_id, "8"))
    assert code == 2
    assert "[decision_invalid]" in err
    assert "result type str" in err
    assert (await op_row(store, op.operation_id))["state"] == "uncertain"
    code, _, _ = await cli(pg_dsn, store, capsys, *resolve_argv(op.operation_id, '"ch_2"'))
    assert code == 0
    assert await asyncio.wait_for(handle.result(), 15) == "charged ch_2"


async def test_a_hooks_unfit_decision_is_reparked_and_the_hook_cannot_decide_it_again(
    store: PostgresStore, worker: Worker
) -> None:
    handle, op = await _parked(store, checkout_hooked)  # the inline hook waits at the gate
    await _forget_result_type(store, op.operation_id)  # scheduled by an older version
    GATE[0].set()  # the hook decides 12345, unchecked: the operation recorded no type

    async def reparked() -> bool:
        row = await op_row(store, op.operation_id)
        return row["state"] == "uncertain" and "does not fit" in row["uncertain_reason"]

    await _until(reparked, "the hook's decision to be parked again")
    assert (await op_row(store, op.operation_id))[
        "decision_by"
    ] == "reconcile hook uf_charge_hooked"
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    # another process's reconciler asks the hook again: its result is now
    # checked against the recorded type, refused, and left for a person
    other = Reconciler(store, Registry([checkout_hooked], [charge_hooked]))
    assert await other.run_once() == 0
    assert other.outcomes == ["error"]
    verdicts = [e for _, e in await op_audit(store, op.operation_id) if "did not fit" in e]
    assert len(verdicts) == 1
    assert "the hook's result 12345" in verdicts[0]
    await asyncio.sleep(0.6)  # maintenance ticks: the worker's reconciler asked this episode
    assert len(HOOK) == 2
    assert (await op_row(store, op.operation_id))["state"] == "uncertain"

    await Client(store).resolve_uncertain(
        op.operation_id, "complete", result="ch_3", note="dashboard", decided_by="ann"
    )
    assert await asyncio.wait_for(handle.result(), 15) == "charged ch_3"


async def store_history(store: PostgresStore, wid: uuid.UUID) -> list[Any]:
    return list(await Client(store).get_handle(wid).history())
