"""Activities in isolation: arguments and results round-trip as in production,
current_activity() names the attempt, heartbeats are recorded, cancellation is injected."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest

from azync_flow import activity
from azync_flow.activity import current_activity
from azync_flow.testing import ActivityEnvironment


@dataclass
class Upload:
    name: str
    chunks: int


@activity(name="upload")
async def upload(job: Upload) -> dict[str, int]:
    info = current_activity()
    assert info is not None
    for _ in range(job.chunks):
        await info.heartbeat()
    return {"chunks": job.chunks, "attempt": info.attempt}


async def test_the_activity_sees_its_attempt_and_its_heartbeats_are_recorded() -> None:
    env = ActivityEnvironment(attempt=3)
    result = await env.run(upload, Upload("a.bin", 4))
    assert result == {"chunks": 4, "attempt": 3}
    assert [h.attempt for h in env.heartbeats] == [3, 3, 3, 3]
    assert current_activity() is None  # only inside the attempt


@activity(name="whoami")
def whoami() -> str:
    info = current_activity()
    assert info is not None
    return f"{info.activity} {info.workflow_id} {info.seq}"


async def test_current_activity_works_in_a_sync_activity_run_in_a_thread() -> None:
    run_id = uuid.uuid4()
    env = ActivityEnvironment(workflow_id=run_id, seq=7)
    assert await env.run(whoami) == f"whoami {run_id} 7"


CLEANED: list[str] = []


@activity(name="long_copy")
async def long_copy(n: int) -> int:
    info = current_activity()
    assert info is not None
    beats = 0
    try:
        for _ in range(n):
            await info.heartbeat()
            beats += 1
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        CLEANED.append(f"cancelled after {beats} heartbeats returned")
        raise
    return n


async def test_cancellation_injected_at_a_heartbeat_reaches_the_activity() -> None:
    env = ActivityEnvironment()
    env.on_heartbeat = lambda e: e.cancel() if len(e.heartbeats) == 3 else None
    CLEANED.clear()
    with pytest.raises(asyncio.CancelledError):
        await env.run(long_copy, 100)
    # the third heartbeat delivered the cancellation, as a lost lease would
    assert CLEANED == ["cancelled after 2 heartbeats returned"]
    assert len(env.heartbeats) == 3


async def test_cancel_from_outside_while_the_activity_awaits() -> None:
    env = ActivityEnvironment()
    CLEANED.clear()
    two_beats = asyncio.Event()
    env.on_heartbeat = lambda e: two_beats.set() if len(e.heartbeats) == 2 else None
    running = asyncio.create_task(env.run(long_copy, 1000))
    await two_beats.wait()
    env.cancel()  # from outside the activity, wherever it awaits now
    with pytest.raises(asyncio.CancelledError):
        await running
    assert len(CLEANED) == 1
    assert CLEANED[0].startswith("cancelled after")


@activity(name="typed_sum")
async def typed_sum(values: list[int]) -> int:
    return sum(values)


async def test_arguments_make_the_production_json_round_trip() -> None:
    env = ActivityEnvironment()
    assert await env.run(typed_sum, (1, 2, 3)) == 6  # a tuple arrives as the annotated list
    with pytest.raises(TypeError):
        await env.run(lambda: None)
    with pytest.raises(RuntimeError):
        env.cancel()  # nothing running
    with pytest.raises(ValueError):
        ActivityEnvironment(attempt=0)


@activity(name="announce")
async def announce(order_id: str) -> str:
    info = current_activity()
    assert info is not None
    event_id = await info.publish("order.announced", {"order": order_id}, key=order_id)
    return str(event_id)


async def test_events_an_activity_publishes_are_recorded() -> None:
    env = ActivityEnvironment()
    event_id = await env.run(announce, "o-7")
    [event] = env.published
    assert (event.event_type, event.payload, event.key) == (
        "order.announced",
        {"order": "o-7"},
        "o-7",
    )
    assert str(event.id) == event_id
