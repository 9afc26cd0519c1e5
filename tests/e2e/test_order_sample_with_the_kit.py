"""The quickstart's order workflow tested with the testing kit: every path in
well under a second of real time, the hour-long approval wait skipped."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest

from azync_flow import WorkflowCancelledError
from azync_flow.errors import WorkflowTerminatedError
from azync_flow.replay.events import ActivityScheduled, HistoryEntry
from azync_flow.testing import WorkflowEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "samples"))

from order import ACTIVITIES, WORKFLOWS, Order, order_workflow


def order(card: str = "4242424242424242", timeout_s: float = 3600.0) -> Order:
    return Order("o-1", "sku-42", 2, 4999, card, timeout_s)


@pytest.fixture
async def env(workflow_env: WorkflowEnvironment) -> WorkflowEnvironment:
    return await workflow_env.start(WORKFLOWS, ACTIVITIES)


def activities_run(history: list[HistoryEntry]) -> list[str]:
    return [e.event.name for e in history if isinstance(e.event, ActivityScheduled)]


async def test_an_approved_order_ships(env: WorkflowEnvironment) -> None:
    handle = await env.client.start(order_workflow, order())
    await env.sleep(timedelta(minutes=10))  # the approver takes ten minutes
    await handle.signal("approve", {"by": "ann"})
    receipt = await handle.result(timeout=10)
    assert (receipt.status, receipt.approved_by) == ("shipped", "ann")
    assert receipt.tracking == "TRACK-O-1"


async def test_a_declined_card_releases_the_stock_after_three_attempts(
    env: WorkflowEnvironment,
) -> None:
    handle = await env.client.start(order_workflow, order(card="0000000000000002"))
    receipt = await handle.result(timeout=10)
    assert receipt.status == "payment failed: card declined"
    assert activities_run(await handle.history()) == [
        "reserve_stock",
        "charge_card",
        "release_stock",
    ]


async def test_no_approval_within_the_hour_refunds_then_releases(
    env: WorkflowEnvironment,
) -> None:
    began_at = env.now
    handle = await env.client.start(order_workflow, order())
    receipt = await handle.result(timeout=10)
    assert receipt.status == "approval timed out"
    assert activities_run(await handle.history())[-2:] == ["refund", "release_stock"]
    assert env.now - began_at >= timedelta(hours=1)


async def test_an_approval_one_minute_too_late_is_not_taken(env: WorkflowEnvironment) -> None:
    handle = await env.client.start(order_workflow, order())
    await env.sleep(timedelta(minutes=61))
    assert (await handle.describe()).state == "succeeded"
    assert (await handle.result(timeout=1)).status == "approval timed out"


async def test_cancel_and_terminate_work_as_in_production(env: WorkflowEnvironment) -> None:
    cancelled = await env.client.start(order_workflow, order())
    terminated = await env.client.start(order_workflow, order(timeout_s=7200))
    await env.settle()  # both now wait for approval
    await cancelled.cancel()
    await terminated.terminate("test over")
    with pytest.raises(WorkflowCancelledError):
        await cancelled.result(timeout=10)
    with pytest.raises(WorkflowTerminatedError):
        await terminated.result(timeout=10)
