"""Worker.add_stop_hook: hooks run once on a graceful stop, after the jobs in
flight ended, in the order added; a name is added once; a failing hook does not
keep the next from running."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker


async def test_stop_hooks_run_after_the_in_flight_job_ended(store: PostgresStore) -> None:
    worker = Worker(store, handle_signals=False, poll_interval=timedelta(milliseconds=50))
    running = asyncio.Event()
    events: list[str] = []

    @worker.register("slow")
    async def slow(payload: None) -> None:
        running.set()
        await asyncio.sleep(0.3)
        events.append("job ended")

    async def hook() -> None:
        events.append("hook")

    assert worker.add_stop_hook("record", hook) is True
    await Client(store).enqueue("slow")
    runner = asyncio.create_task(worker.run())
    await asyncio.wait_for(running.wait(), 10)
    assert events == []
    worker.shutdown()
    await asyncio.wait_for(runner, 10)
    assert events == ["job ended", "hook"]


async def test_stop_hooks_run_in_order_once_per_name_past_a_failing_one(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Worker(store, handle_signals=False, poll_interval=timedelta(milliseconds=50))
    calls: list[str] = []

    def recording(label: str):  # type: ignore[no-untyped-def]
        async def hook() -> None:
            calls.append(label)

        return hook

    async def failing() -> None:
        calls.append("failing")
        raise RuntimeError("exporter gone")

    assert worker.add_stop_hook("first", recording("first"))
    assert worker.add_stop_hook("broken", failing)
    assert worker.add_stop_hook("first", recording("first again")) is False
    assert worker.add_stop_hook("last", recording("last"))
    with caplog.at_level(logging.WARNING, logger="azync_flow.worker"):
        await worker.run_until_idle()
    assert calls == ["first", "failing", "last"]
    assert "stop hook broken failed: exporter gone" in caplog.text
    await worker.run_until_idle()  # a second run stops again: hooks run again
    assert calls == ["first", "failing", "last"] * 2
