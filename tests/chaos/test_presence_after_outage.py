"""A real PostgreSQL outage long enough for a live worker's registry row to
lapse: once the server is back, the leader does not warn that no live worker
serves the worker's workflow, and the worker's row is live again at once."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

import msgspec
import pytest

from azync_flow import WorkflowContext, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.runtime import worker_runtime
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from tests.chaos.test_database_restart import PrivatePostgres, _retrying, private_pg, stores

__all__ = ["private_pg", "stores"]

UNSERVED = "no live worker serves"


class Parcel(msgspec.Struct):
    weight: int


@workflow(name="gap_ship")
async def gap_ship(ctx: WorkflowContext, parcel: Parcel) -> int:
    return parcel.weight


async def test_a_live_worker_whose_row_lapsed_in_an_outage_is_not_reported_unserved(
    private_pg: PrivatePostgres,
    stores: tuple[PostgresStore, PostgresStore],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The production timings scaled down (beat 1.5 s, row live 2 s, check every
    # 0.2 s), so a 3 s outage lapses the row through missed beats, as a longer
    # outage does with the real ones.
    monkeypatch.setattr(worker_runtime, "PRESENCE_INTERVAL", timedelta(seconds=1.5))
    monkeypatch.setattr(worker_runtime, "PRESENCE_TTL", timedelta(seconds=2))
    monkeypatch.setattr(worker_runtime, "UNSERVED_INTERVAL", timedelta(milliseconds=200))
    worker_store, client_store = stores
    worker = Worker(
        worker_store,
        poll_interval=timedelta(milliseconds=50),
        maintenance_interval=timedelta(milliseconds=100),
        handle_signals=False,
    )
    attach_workflows(worker, [gap_ship], [])
    # A run this worker registers but leaves pending (it cannot decode the
    # input): the leader's check looks at it every round and must find it served.
    handle = await Client(client_store).start("gap_ship", 1)
    caplog.set_level(logging.INFO, logger="azync_flow")
    async with worker:
        for _ in range(100):
            if (await handle.describe()).blocked_reason:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # a few rounds of the check, the store up
        assert UNSERVED not in caplog.text

        await asyncio.to_thread(private_pg.stop)
        await asyncio.sleep(3.0)
        await asyncio.to_thread(private_pg.start)
        await _retrying(lambda: client_store.live_workers_for_workflow("gap_ship"))
        back = time.monotonic()
        for _ in range(500):
            if await client_store.live_workers_for_workflow("gap_ship"):
                break
            await asyncio.sleep(0.02)
        rejoined = time.monotonic() - back
        await asyncio.sleep(2.0)  # rounds of the check with the store back

    assert "database reconnected after" in caplog.text
    assert UNSERVED not in caplog.text
    assert rejoined < 1.0  # within a few maintenance ticks, not a full beat interval
