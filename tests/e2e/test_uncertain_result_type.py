"""Decisions on uncertain operations are checked against the result type the
operation recorded from its activity's return annotation: through the CLI, the
client, the console's action and the reconcile hook, with a real worker (LocalRuntime) and real
PostgreSQL. A result that does not fit writes nothing and the operation stays
uncertain for a new decision."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from azync_flow import Reconciled, Uncertain, WorkflowContext, activity, workflow
from azync_flow._operations import decode_operation
from azync_flow.client import Client, UncertainOperationView, WorkflowHandle
from azync_flow.console._actions import perform
from azync_flow.errors import DecisionError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Source
from azync_flow.store.workflows import WorkflowState

from ._uncertain_helpers import cli, event_types, local_runtime, op_row, resolve_argv, snapshot

VERDICT: dict[str, Reconciled] = {}


class Charge(msgspec.Struct):
    id: str
    amount: int


@activity(name="rt_charge_id", idempotent=False)
def charge_id(amount: int) -> str:
    raise Uncertain("provider timed out")


@activity(name="rt_charge_struct", idempotent=False)
def charge_struct(amount: int) -> Charge:
    raise Uncertain("provider timed out")


@activity(name="rt_charge_untyped", idempotent=False)
def charge_untyped(amount: int):  # type: ignore[no-untyped-def]
    raise Uncertain("provider timed out")


def lookup(amount: int, execution_key: str) -> Reconciled:
    return VERDICT["next"]


@activity(name="rt_charge_hooked", idempotent=False, reconcile=lookup)
def charge_hooked(amount: int) -> str:
    raise Uncertain("provider timed out")


@workflow(name="rt_checkout")
async def checkout(ctx: WorkflowContext, amount: int) -> str:
    return await charge_id(amount)


@workflow(name="rt_checkout_struct")
async def checkout_struct(ctx: WorkflowContext, amount: int) -> str:
    charge = await charge_struct(amount)
    return f"{type(charge).__name__} {charge.id} {charge.amount}"


@workflow(name="rt_checkout_untyped")
async def checkout_untyped(ctx: WorkflowContext, amount: int) -> Any:
    return await charge_untyped(amount)


@workflow(name="rt_checkout_hooked")
async def checkout_hooked(ctx: WorkflowContext, amount: int) -> str:
    return await charge_hooked(amount)


WORKFLOWS = [checkout, checkout_struct, checkout_untyped, checkout_hooked]
ACTIVITIES = [charge_id, charge_struct, charge_untyped, charge_hooked]


@pytest.fixture(autouse=True)
def _clear() -> None:
    VERDICT.clear()


async def _park(
    store: PostgresStore, wf: Any
) -> tuple[Client, WorkflowHandle[Any], UncertainOperationView]:
    runtime = local_runtime(store, WORKFLOWS, ACTIVITIES)
    client = Client(store)
    handle = await client.start(wf, 12)
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    (op,) = await client.list_uncertain(workflow_id=handle.id)
    return client, handle, op


async def test_the_operation_records_its_activity_result_type(store: PostgresStore) -> None:
    _, _, op = await _park(store, checkout_struct)
    payload = (await store.get_operation(op.operation_id)).input
    recorded = decode_operation(payload).result_type
    assert recorded is not None
    assert recorded.name == "Charge"
    assert recorded.schema == msgspec.json.schema(Charge)


async def test_cli_resolve_with_a_result_that_does_not_fit_exits_2_and_writes_nothing(
    pg_dsn: str, store: PostgresStore, capsys: pytest.CaptureFixture[str]
) -> None:
    _, handle, op = await _park(store, checkout)
    before = await snapshot(store, handle.id)
    code, out, err = await cli(pg_dsn, store, capsys, *resolve_argv(op.operation_id, "12345"))
    assert code == 2
    assert out == ""
    assert err.startswith("azync-flow: error: [decision_invalid] the decided result 12345")
    assert "does not fit the result type str" in err
    assert await snapshot(store, handle.id) == before
    assert (await op_row(store, op.operation_id))["state"] == "uncertain"
    assert (await handle.describe()).state == WorkflowState.SUSPENDED


async def test_cli_resolve_with_a_fitting_result_completes_the_run(
    pg_dsn: str, store: PostgresStore, capsys: pytest.CaptureFixture[str]
) -> None:
    _, handle, op = await _park(store, checkout)
    assert (await cli(pg_dsn, store, capsys, *resolve_argv(op.operation_id, "12345")))[0] == 2
    code, out, _ = await cli(pg_dsn, store, capsys, *resolve_argv(op.operation_id, '"ch_12345"'))
    assert code == 0
    assert "is succeeded" in out
    await local_runtime(store, WORKFLOWS, ACTIVITIES).run_until_idle()
    assert await handle.result(timeout=5) == "ch_12345"


async def test_client_refuses_a_struct_result_with_a_wrong_field_then_takes_a_fitting_one(
    store: PostgresStore,
) -> None:
    client, handle, op = await _park(store, checkout_struct)
    before = await snapshot(store, handle.id)
    with pytest.raises(DecisionError) as info:
        await client.resolve_uncertain(op, "complete", result={"id": 7, "amount": 12})
    assert (info.value.expected, info.value.given) == ("Charge", '{"id":7,"amount":12}')
    assert '$.id: 7 is not of type "string"' in str(info.value)
    assert await snapshot(store, handle.id) == before
    await client.resolve_uncertain(op, "complete", result=Charge(id="ch_1", amount=12))
    await local_runtime(store, WORKFLOWS, ACTIVITIES).run_until_idle()
    assert await handle.result(timeout=5) == "Charge ch_1 12"


async def test_an_unannotated_activity_takes_any_decided_result(store: PostgresStore) -> None:
    client, handle, op = await _park(store, checkout_untyped)
    assert decode_operation((await store.get_operation(op.operation_id)).input).result_type is None
    await client.resolve_uncertain(op, "complete", result={"anything": [1, "two"]})
    await local_runtime(store, WORKFLOWS, ACTIVITIES).run_until_idle()
    assert await handle.result(timeout=5) == {"anything": [1, "two"]}


async def test_an_operation_scheduled_without_a_recorded_type_is_not_checked(
    store: PostgresStore,
) -> None:
    # an operation written before its result type was recorded
    client, handle, op = await _park(store, checkout)
    payload = json.loads((await store.get_operation(op.operation_id)).input)
    del payload["result_type"]
    await store.pool.execute(
        "UPDATE azync_jobs SET payload = $2 WHERE id = $1",
        op.operation_id,
        json.dumps(payload).encode(),
    )
    await client.resolve_uncertain(op, "complete", result="ch_old")
    await local_runtime(store, WORKFLOWS, ACTIVITIES).run_until_idle()
    assert await handle.result(timeout=5) == "ch_old"


async def test_a_hook_result_that_does_not_fit_leaves_the_operation_uncertain_with_why(
    pg_dsn: str, store: PostgresStore, capsys: pytest.CaptureFixture[str]
) -> None:
    VERDICT["next"] = Reconciled.completed(12345, note="found by key")
    client, handle, op = await _park(store, checkout_hooked)
    row = await op_row(store, op.operation_id)
    assert (row["state"], row["decision"]) == ("uncertain", "")
    assert "OperationResolved" not in event_types(await handle.history())
    attempts = await store.job_attempts(Source.WORKFLOW, op.operation_id)
    (verdict,) = [a.error for a in attempts if a.error.startswith("reconcile:")]
    assert verdict == (
        "reconcile: error: the hook's result 12345 did not fit the result type str "
        '($: 12345 is not of type "string"); decide again'
    )
    code, out, _ = await cli(pg_dsn, store, capsys, "uncertain", "list", "--json")
    assert code == 0
    (listed,) = json.loads(out)
    assert "did not fit the result type str" in listed["reconcile_verdict"]
    # a person's fitting decision then completes the run
    await client.resolve_uncertain(op, "complete", result="ch_12", decided_by="ann")
    await local_runtime(store, WORKFLOWS, ACTIVITIES).run_until_idle()
    assert await handle.result(timeout=5) == "ch_12"


async def test_the_console_action_refuses_a_result_that_does_not_fit(store: PostgresStore) -> None:
    _, handle, op = await _park(store, checkout)
    before = await snapshot(store, handle.id)
    form = {"decision": "complete", "result": "12345", "reason": "provider dashboard"}
    with pytest.raises(DecisionError, match="does not fit the result type str"):
        await perform(store, "uncertain.resolve", str(op.operation_id), form, "ann")
    assert await snapshot(store, handle.id) == before
    await perform(
        store, "uncertain.resolve", str(op.operation_id), {**form, "result": '"ch_9"'}, "ann"
    )
    await local_runtime(store, WORKFLOWS, ACTIVITIES).run_until_idle()
    assert await handle.result(timeout=5) == "ch_9"
