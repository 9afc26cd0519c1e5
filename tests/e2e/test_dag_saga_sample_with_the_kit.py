"""The DAG saga sample tested with the testing kit: the warehouse signal, the
carrier outage with its retry backoff skipped, compensations newest first."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from azync_flow.store.dags import DAGState
from azync_flow.testing import WorkflowEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "samples"))

import dag_saga


@pytest.fixture
def carrier() -> Iterator[None]:
    dag_saga.compensations.clear()
    yield
    dag_saga.carrier_up = True


async def test_the_saga_ships_once_the_warehouse_signals(
    workflow_env: WorkflowEnvironment, carrier: None
) -> None:
    saga = dag_saga.build()
    env = await workflow_env.start(dags=[saga])
    run = await env.dags.run(saga, {"order": 7, "amount": 99})
    await env.run_until_settled()  # reserve and charge ran; the signal task waits
    assert (await env.dags.get(run.id)).state == DAGState.RUNNING
    await env.dags.signal(run.id, "warehouse", "bin-42", message_id="wh-7")
    await env.run_until_settled()
    assert (await env.dags.get(run.id)).state == DAGState.SUCCEEDED
    assert (await env.dags.results(run.id, ["ship"]))["ship"].value == {"tracking": "TRK-7"}
    assert dag_saga.compensations == []


async def test_a_carrier_outage_compensates_newest_first(
    workflow_env: WorkflowEnvironment, carrier: None
) -> None:
    dag_saga.carrier_up = False
    saga = dag_saga.build()
    env = await workflow_env.start(dags=[saga])
    run = await env.dags.run(saga, {"order": 8, "amount": 99})
    await env.dags.signal(run.id, "warehouse", "bin-9", message_id="wh-8")
    await env.run_until_settled()  # ship's second attempt waits out its backoff here
    view = await env.dags.get(run.id)
    assert view.state == DAGState.FAILED, view
    assert dag_saga.compensations == [
        "cancel warehouse pick bin-9",
        "refund ch-8",
        "release stock (hold-8)",
    ]
