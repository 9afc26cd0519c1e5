"""Reconcile hooks: each verdict, a hook that raises, both places a hook
runs (inline in the worker that parked the operation; the leader's maintenance after
a real lease expiry) and racing reconcilers — real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from azync_flow import ActivityError, Reconciled, Uncertain, WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.otlp import configure_otlp
from azync_flow.runtime.uncertain import Reconciler
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.workflows import WorkflowState
from azync_flow.telemetry import run_span_id
from azync_flow.testing import MovableClock
from azync_flow.testing_otel import OtlpHttpReceiver
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

from ._uncertain_helpers import (
    event_types,
    local_runtime,
    op_audit,
    op_row,
    silent_worker_until_idle,
)


class Card(msgspec.Struct):
    number: str
    amount: int


CHARGES: list[str] = []
HOOK_CALLS: list[tuple[Any, str]] = []
VERDICT: dict[str, Any] = {}


def check_charge(card: Card, execution_key: str) -> Reconciled:
    HOOK_CALLS.append((card, execution_key))
    verdict = VERDICT["next"]
    if isinstance(verdict, Exception):
        raise verdict
    return verdict


@activity(name="charge_card", idempotent=False, reconcile=check_charge)
def charge_card(card: Card) -> str:
    CHARGES.append(card.number)
    if len(CHARGES) == 1:
        raise Uncertain("provider timed out")
    return f"ch-{card.number}-{len(CHARGES)}"


@workflow(name="checkout")
async def checkout(ctx: WorkflowContext, card: Card) -> str:
    try:
        return await charge_card(card)
    except ActivityError as err:
        return f"declined: {err.message}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    CHARGES.clear()
    HOOK_CALLS.clear()
    VERDICT.clear()


async def _run(store: PostgresStore, verdict: Any) -> Any:
    VERDICT["next"] = verdict
    runtime = local_runtime(store, [checkout], [charge_card])
    handle = await Client(store).start(checkout, Card("4242", 10))
    await runtime.run_until_idle()
    return runtime, handle


async def test_hook_completed_hands_its_result_to_the_workflow(store: PostgresStore) -> None:
    _, handle = await _run(store, Reconciled.completed("ch-found", note="found by key"))
    assert await handle.result(timeout=5) == "ch-found"
    assert CHARGES == ["4242"]  # no second charge
    assert [(Card("4242", 10), f"{handle.id}/1")] == HOOK_CALLS
    (op_id,) = await store.pool.fetchval(
        "SELECT array_agg(id) FROM azync_jobs WHERE run_id = $1 AND task_key <> '$wft'", handle.id
    )
    row = await op_row(store, op_id)
    assert (row["decision"], row["decision_by"], row["decision_note"]) == (
        "complete",
        "reconcile hook charge_card",
        "found by key",
    )


async def test_hook_failed_raises_activity_error_in_the_workflow(store: PostgresStore) -> None:
    _, handle = await _run(store, Reconciled.failed("no charge and card now blocked"))
    assert await handle.result(timeout=5) == "declined: no charge and card now blocked"
    assert CHARGES == ["4242"]


async def test_hook_retry_runs_the_operation_again(store: PostgresStore) -> None:
    _, handle = await _run(store, Reconciled.retry("provider has no record"))
    assert await handle.result(timeout=5) == "ch-4242-2"
    assert CHARGES == ["4242", "4242"]
    types = event_types(await handle.history())
    assert types == [
        "ActivityScheduled",
        "OperationUncertain",
        "OperationResolved",
        "ActivityCompleted",
        "WorkflowCompleted",
    ]


@pytest.mark.parametrize(
    ("verdict", "label"),
    [
        (Reconciled.unknown("provider is down"), "reconcile: unknown: provider is down"),
        (RuntimeError("hook bug"), "reconcile: error: hook raised RuntimeError: hook bug"),
        ("not a verdict", "reconcile: error: hook raised TypeError"),
    ],
    ids=["unknown", "raises", "bad-return"],
)
async def test_unknown_or_a_hook_error_leaves_it_for_a_person_and_is_asked_once(
    store: PostgresStore, verdict: Any, label: str
) -> None:
    runtime, handle = await _run(store, verdict)
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    client = Client(store)
    (op,) = await client.list_uncertain()
    audit = await op_audit(store, op.operation_id)
    assert audit[-1][1].startswith(label)
    for _ in range(3):  # the leader's maintenance does not ask the hook again
        await runtime.run_until_idle()
    assert len(HOOK_CALLS) == 1
    await client.resolve_uncertain(op, "complete", result="by hand", decided_by="ops")
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "by hand"
    assert CHARGES == ["4242"]


async def test_leader_maintenance_reconciles_after_a_real_lease_expiry(
    store: PostgresStore, clock: MovableClock
) -> None:
    gate = asyncio.Event()
    started = asyncio.Event()
    provider: dict[str, int] = {}

    def lookup(amount: int, key: str) -> Reconciled:
        if key in provider:
            return Reconciled.completed(f"charged {provider[key]}")
        return Reconciled.retry()

    @activity(name="stuck_charge", idempotent=False, reconcile=lookup)
    async def stuck_charge(amount: int) -> str:
        from azync_flow.activity import current_activity

        info = current_activity()
        assert info is not None
        provider[f"{info.workflow_id}/{info.seq}"] = amount
        started.set()
        await gate.wait()  # the worker is cut off: no report, no lease renewal
        return "never reported in time"

    @workflow(name="stuck")
    async def stuck(ctx: WorkflowContext, amount: int) -> str:
        return await stuck_charge(amount)

    lease = timedelta(milliseconds=300)
    worker = local_runtime(store, [stuck], [stuck_charge], lease=lease)
    leader = local_runtime(store, [stuck], [stuck_charge], lease=lease)
    handle = await Client(store).start(stuck, 12)
    cut_off = asyncio.create_task(silent_worker_until_idle(worker, lease))
    await asyncio.wait_for(started.wait(), 5)
    clock.advance(lease * 10)  # no heartbeat arrived: the lease expires on the backend clock
    await leader.run_until_idle()  # its maintenance parks it, the hook completes it
    assert await handle.result(timeout=5) == "charged 12"
    gate.set()  # the late report is refused and kept in the ledger
    await cut_off
    assert (await handle.describe()).state == WorkflowState.SUCCEEDED
    assert event_types(await handle.history()).count("ActivityCompleted") == 1
    late = await store.pool.fetch(
        "SELECT payload FROM azync_events WHERE type = 'azync.operation.late_outcome_ignored'"
    )
    assert len(late) == 1
    assert b"never reported in time" in bytes(late[0]["payload"])


async def test_racing_reconcilers_apply_exactly_one_decision(
    store: PostgresStore, pg_dsn: str
) -> None:
    VERDICT["next"] = Reconciled.unknown()
    runtime = local_runtime(store, [checkout], [charge_card])
    runtime.activities.reconciler = None  # type: ignore[assignment]  # park only
    handle = await Client(store).start(checkout, Card("5555", 3))
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    VERDICT["next"] = Reconciled.completed("ch-raced")
    stores = [
        await open_store(pg_dsn, Config(schema=store.schema), migrate=False) for _ in range(4)
    ]
    try:
        registry = Registry([checkout], [charge_card])
        reconcilers = [Reconciler(s, registry) for s in stores]
        await asyncio.gather(*(r.run_once() for r in reconcilers))
    finally:
        for s in stores:
            await s.close()
    outcomes = [o for r in reconcilers for o in r.outcomes]
    assert outcomes.count("complete") == 1, outcomes
    assert set(outcomes) <= {"complete", "lost"}
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "ch-raced"
    assert event_types(await handle.history()).count("OperationResolved") == 1


async def test_a_hook_decision_is_an_uncertain_resolved_span_under_the_run_span(
    store: PostgresStore,
) -> None:
    """A verdict the reconcile hook applies is recorded on the run's trace like
    an operator's decision: an ``uncertain.resolved <activity>`` span, child of
    the run span, with the resolution; exported through real OTLP/HTTP."""
    VERDICT["next"] = Reconciled.completed("ch-found", note="found by key")
    with OtlpHttpReceiver() as rx:
        provider = configure_otlp(service_name="reconciler", endpoint=rx.endpoint, set_global=False)
        try:
            runtime = LocalRuntime(
                store, Registry([checkout], [charge_card]), cache_size=0, tracer_provider=provider
            )
            client = Client(store, tracer_provider=provider)
            handle = await client.start(checkout, Card("4242", 10))
            await runtime.run_until_idle()
            assert await handle.result(timeout=5) == "ch-found"
            provider.force_flush(10_000)
            spans = await asyncio.to_thread(
                rx.wait_for, lambda got: any(s.name == "activity charge_card" for s in got), 30
            )
        finally:
            provider.shutdown()
    [event] = [s for s in spans if s.name == "uncertain.resolved charge_card"]
    [attempt] = [s for s in spans if s.name == "activity charge_card"]
    assert event.attributes["azync.resolution"] == "complete"
    assert event.attributes["azync.run_id"] == str(handle.id)
    assert event.parent_span_id == run_span_id(handle.id) == attempt.parent_span_id
    assert event.trace_id == attempt.trace_id
