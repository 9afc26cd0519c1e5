"""A run declared crashed that later completes, as tests: a charge whose
worker is cut off loses its lease for real, turns uncertain, and its late report

* after an operator's "fail" — is refused by the fence, kept as a ledger event
  with its payload, and changes neither the operation nor the run;
* before any decision — resolves the charge as complete in one atomic step, and
  the operator's later "fail" is rejected.

Each run has exactly one final event for Charge and one for the workflow."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from azync_flow import ActivityError, WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.errors import ConflictError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock
from tests.local_runtime import LocalRuntime

from ._uncertain_helpers import (
    event_types,
    ledger,
    local_runtime,
    op_row,
    silent_worker_until_idle,
    snapshot,
)

LATE = "azync.operation.late_outcome_ignored"
STEPS: list[str] = []
GATE: dict[str, asyncio.Event] = {}


@activity(name="reserve")
def reserve(order: str) -> str:
    STEPS.append("reserve")
    return f"res-{order}"


@activity(name="release")
def release(order: str) -> str:
    STEPS.append("release")
    return "released"


@activity(name="charge", idempotent=False)
async def charge(order: str) -> str:
    STEPS.append("charge")
    GATE["started"].set()
    await GATE["heal"].wait()  # cut off from Postgres: no report, lease not renewed
    return f"charged-{order}"


@activity(name="ship")
def ship(order: str) -> str:
    STEPS.append("ship")
    return "shipped"


@workflow(name="c20_order")
async def c20_order(ctx: WorkflowContext, order: str) -> str:
    await reserve(order)
    try:
        receipt = await charge(order)
    except ActivityError:
        await release(order)  # saga: compensate what completed
        return "charge failed; reservation released"
    await ship(order)
    return receipt


LEASE = timedelta(milliseconds=300)


@pytest.fixture(autouse=True)
def _clear() -> None:
    STEPS.clear()
    GATE["started"] = asyncio.Event()
    GATE["heal"] = asyncio.Event()


def _runtime(store: PostgresStore) -> LocalRuntime:
    return local_runtime(store, [c20_order], [reserve, release, charge, ship], lease=LEASE)


async def _cut_off_charge(
    store: PostgresStore, clock: MovableClock
) -> tuple[object, asyncio.Task[int], object]:
    """Start W, let Charge start on a worker that then goes silent; the lease expires
    (on the backend clock) and the leader's maintenance parks Charge as uncertain."""
    handle = await Client(store).start(c20_order, "o-20")
    old_worker = asyncio.create_task(silent_worker_until_idle(_runtime(store), LEASE))
    await asyncio.wait_for(GATE["started"].wait(), 5)
    clock.advance(LEASE * 10)  # no heartbeat arrived: the lease is over
    await _runtime(store).run_until_idle()  # a worker elected leader reaps it
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    (op,) = await Client(store).list_uncertain()
    assert "lease expired" in op.reason
    return handle, old_worker, op


async def test_late_success_after_an_operator_fail_is_fenced_out_and_kept_in_the_ledger(
    store: PostgresStore, clock: MovableClock
) -> None:
    handle, old_worker, op = await _cut_off_charge(store, clock)
    client = Client(store)
    await client.resolve_uncertain(op, "fail", error="no charge at the provider", decided_by="op")
    await _runtime(store).run_until_idle()
    assert await handle.result(timeout=5) == "charge failed; reservation released"
    assert STEPS == ["reserve", "charge", "release"]
    before = await snapshot(store, handle.id)

    GATE["heal"].set()  # the network heals: the old worker reports success
    await old_worker
    assert await snapshot(store, handle.id) == before  # outcome and final state unchanged
    (late,) = await ledger(store, LATE)
    assert b"charged-o-20" in bytes(late["payload"])
    assert late["aggregate_id"] == str(handle.id)
    row = await op_row(store, op.operation_id)
    assert (row["state"], row["decision"]) == ("dead", "fail")
    history = await handle.history()
    charge_seq = int(op.execution_key.rsplit("/", 1)[1])
    charge_finals = [
        type(e.event).__name__
        for e in history
        if type(e.event).__name__ in ("ActivityCompleted", "ActivityFailed")
        and e.event.scheduled_seq == charge_seq
    ]
    assert charge_finals == ["ActivityFailed"]
    types = event_types(history)
    assert sum(t.startswith("Workflow") for t in types) == 1
    await _runtime(store).run_until_idle()  # no other automatic action follows
    assert STEPS == ["reserve", "charge", "release"]


async def test_late_success_before_any_decision_resolves_it_and_a_later_fail_is_rejected(
    store: PostgresStore, clock: MovableClock
) -> None:
    handle, old_worker, op = await _cut_off_charge(store, clock)
    GATE["heal"].set()
    await old_worker  # the late success resolves Charge as complete, atomically
    row = await op_row(store, op.operation_id)
    assert (row["state"], row["decision"], row["decision_by"]) == (
        "succeeded",
        "complete",
        "late report of attempt 1",
    )
    # W resumed and the (same, healed) worker drove it to the end
    assert await handle.result(timeout=5) == "charged-o-20"
    before = await snapshot(store, handle.id)
    with pytest.raises(ConflictError, match="already resolved 'complete'"):
        await Client(store).resolve_uncertain(op, "fail", error="operator thought it failed")
    assert await snapshot(store, handle.id) == before
    await _runtime(store).run_until_idle()
    assert STEPS == ["reserve", "charge", "ship"]
    types = event_types(await handle.history())
    assert types.count("OperationResolved") == 1
    assert types.count("ActivityCompleted") == 3  # reserve, charge, ship — once each
    assert sum(t.startswith("Workflow") for t in types) == 1
    assert await ledger(store, LATE) == []
