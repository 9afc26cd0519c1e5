"""Schedules on a real store and real workers across DST transition nights:
each runs exactly once per local day at the documented instant, with the
scheduler restarted and the schedule re-created in the middle of the night."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from azync_flow import WorkflowContext, workflow
from azync_flow.schedules import ScheduleSpec, StartWorkflow
from azync_flow.schedules._codec import fire_of
from azync_flow.schedules._model import run_key
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import MovableClock, WorkflowEnvironment


@workflow(name="nightly")
async def nightly(ctx: WorkflowContext) -> str:
    return "done"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


# (zone, cron, [(transition night: the three instants of the local days around it)])
NIGHTS = {
    ("Europe/London", "30 1 * * *", 2024): [
        # 01:30 missing -> 02:00 BST (01:00Z)
        [utc(2024, 3, 30, 1, 30), utc(2024, 3, 31, 1, 0), utc(2024, 4, 1, 0, 30)],
        # 01:30 repeated -> the first, BST (00:30Z)
        [utc(2024, 10, 26, 0, 30), utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)],
    ],
    ("Europe/London", "30 1 * * *", 2025): [
        [utc(2025, 3, 29, 1, 30), utc(2025, 3, 30, 1, 0), utc(2025, 3, 31, 0, 30)],
        [utc(2025, 10, 25, 0, 30), utc(2025, 10, 26, 0, 30), utc(2025, 10, 27, 1, 30)],
    ],
    ("America/New_York", "30 2 * * *", 2024): [
        # 02:30 missing -> 03:00 EDT (07:00Z)
        [utc(2024, 3, 9, 7, 30), utc(2024, 3, 10, 7, 0), utc(2024, 3, 11, 6, 30)],
        # 02:30 is after the repeated hour: once, EST (07:30Z)
        [utc(2024, 11, 2, 6, 30), utc(2024, 11, 3, 7, 30), utc(2024, 11, 4, 7, 30)],
    ],
    ("America/New_York", "30 2 * * *", 2025): [
        [utc(2025, 3, 8, 7, 30), utc(2025, 3, 9, 7, 0), utc(2025, 3, 10, 6, 30)],
        [utc(2025, 11, 1, 6, 30), utc(2025, 11, 2, 7, 30), utc(2025, 11, 3, 7, 30)],
    ],
}


async def _started(env: WorkflowEnvironment) -> dict[object, datetime]:
    page = await env.client.list(nightly, limit=500)
    assert all(e.state is WorkflowState.SUCCEEDED for e in page.executions)
    return {e.id: e.created_at for e in page.executions}


async def _restart(
    env: WorkflowEnvironment, store: object, clock: MovableClock
) -> WorkflowEnvironment:
    await env.close()
    return await WorkflowEnvironment(store, clock).start(workflows=[nightly])


@pytest.mark.parametrize("key", list(NIGHTS), ids=lambda k: f"{k[0]}-{k[2]}")
async def test_daily_schedule_runs_once_per_local_day_across_transition_nights(
    azync_store: object, azync_clock: MovableClock, key: tuple[str, str, int]
) -> None:
    zone, cron, _year = key
    spec = ScheduleSpec(cron=(cron,), tz=zone)
    action = StartWorkflow.of(nightly)
    expected: list[datetime] = []
    for days in NIGHTS[key]:
        night = days[1]
        azync_clock.set(night - timedelta(hours=36))
        env = await WorkflowEnvironment(azync_store, azync_clock).start(workflows=[nightly])
        await env.client.schedules.create("nightly", spec, action)
        # the scheduler restarts 20 minutes before the night's fire ...
        await env.sleep(night - timedelta(minutes=20) - env.now)
        env = await _restart(env, azync_store, azync_clock)
        # ... and the schedule is re-created 20 minutes after it (for London in
        # autumn: between the two 01:30s)
        await env.sleep(night + timedelta(minutes=20) - env.now)
        await env.client.schedules.delete("nightly")
        await env.client.schedules.create("nightly", spec, action)
        await env.sleep(night + timedelta(hours=36) - env.now)
        await env.client.schedules.delete("nightly")
        await env.close()
        expected += days

    started = await _started(WorkflowEnvironment(azync_store, azync_clock))
    ids = {run_key(action, "nightly", fire_of(spec.validated(), d, d))[1]: d for d in expected}
    assert set(started) == set(ids)
    for run_id, instant in ids.items():
        # started when the clock reached the documented instant (the clock runs
        # at real speed from each skip: seconds, not hours)
        assert instant <= started[run_id] < instant + timedelta(minutes=5)
