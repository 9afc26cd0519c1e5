"""LeaseLoop.wake_in: one timer handle for the earliest recorded due time,
re-armed for the next when it fires, dropped at stop."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from azync_flow.store.queue import Source
from azync_flow.worker._loop import LeaseLoop


async def _noop(job: Any, lease: Any) -> None:
    return None


def _loop() -> LeaseLoop:
    return LeaseLoop(
        None,  # type: ignore[arg-type]  # wake_in never touches the store
        Source.WORKFLOW,
        "$wft",
        _noop,
        concurrency=1,
        batch_size=1,
        lease=timedelta(seconds=30),
        poll_interval=timedelta(seconds=60),
    )


async def test_due_wakes_share_one_handle_armed_for_the_earliest() -> None:
    loop = _loop()
    loop.wake_in(0.3)
    first = loop._due_timer
    loop.wake_in(0.5)  # later: the same handle stays
    assert loop._due_timer is first
    loop.wake_in(0.05)  # earlier: the handle is replaced, never a second one
    assert loop._due_timer is not first
    assert first is not None
    assert first.cancelled()
    assert loop.due_wakes_pending == 3
    await asyncio.wait_for(loop.wake.wait(), 1)
    assert loop.stats.due_wakes == 1
    assert loop.due_wakes_pending == 2
    loop.wake.clear()
    await asyncio.wait_for(loop.wake.wait(), 1)  # re-armed for the next due time
    assert loop.stats.due_wakes == 2


async def test_stop_cancels_the_due_timer_and_later_wakes_are_ignored() -> None:
    loop = _loop()
    loop.wake_in(0.05)
    handle = loop._due_timer
    loop.stop()
    assert handle is not None
    assert handle.cancelled()
    assert loop._due_timer is None
    assert loop.due_wakes_pending == 0
    loop.wake_in(0.01)
    assert loop._due_timer is None
    await asyncio.sleep(0.05)
    assert loop.stats.due_wakes == 0
