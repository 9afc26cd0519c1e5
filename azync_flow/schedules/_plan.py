"""What one scheduler tick does for a due schedule (:func:`plan`), and the
record of the nominal times that do not run (:func:`record_missed`)."""

from __future__ import annotations

import contextlib
import logging
import uuid
from datetime import datetime, timedelta
from typing import NamedTuple

from azync_flow import _metrics
from azync_flow._publish import publish_event
from azync_flow.errors import ConflictError

from ._codec import Decoded
from ._spec import Fire
from ._store import ScheduleRuntimeStore

__all__ = [
    "MISSED_EVENT",
    "SKIPPED_EVENT",
    "Missed",
    "Plan",
    "plan",
    "publish_fate",
    "record_missed",
]

#: Ledger event for nominal times that did not run (catch-up, pause, edit).
MISSED_EVENT = "azync.schedule.missed"
#: Ledger event for a nominal time skipped by the overlap policy.
SKIPPED_EVENT = "azync.schedule.skipped"

log = logging.getLogger("azync_flow.schedules")

#: Most fires one tick runs for one schedule (a longer window is worked off
#: over the next ticks).
MAX_FIRES_PER_TICK = 10_000
_TICK = timedelta(microseconds=1)
_EVENT_NAMESPACE = uuid.UUID("0c7d2f4e-5a61-4b8e-9d0f-3e2a1b6c8d90")


class Missed(NamedTuple):
    """Nominal times in ``[first, last]`` (``times`` of them) that do not run."""

    first: datetime
    last: datetime
    times: int
    exact: bool


class Plan(NamedTuple):
    """What one tick does for a due schedule.

    Attributes:
        fires: the fires to run (the overlap policy still decides), in
            nominal order.
        missed: the due fires older than the catch-up window, as one range
            (None: none).
        cursor: the schedule's cursor afterwards (the last due nominal instant).
        next_fire_at: its next fire afterwards (None: no more).
    """

    fires: list[Fire]
    missed: Missed | None
    cursor: datetime
    next_fire_at: datetime | None


def plan(item: Decoded, now: datetime, limit: int = MAX_FIRES_PER_TICK) -> Plan:
    """What the schedule does at ``now``, decided without walking the missed
    range: only fires due within the catch-up window are listed (older ones
    cannot run), the range before them is counted (by arithmetic for an
    interval), and the latest older fire is found by searching back from
    ``now``. The work depends on the window, not on how long the scheduler
    was away."""
    spec, cursor = item.spec, item.record.cursor_at
    floor = now - item.policy.window()  # a fire due before this is missed
    # a nominal instant at or before floor - jitter is due before floor
    start = max(cursor, floor - spec.jitter - _TICK)
    within: list[Fire] = []
    late: list[Fire] = []  # listed but due before floor
    following: Fire | None = None
    for fire in spec.fires_after(start, seed=item.id):
        if fire.fire_at > now or len(within) >= limit:
            following = fire
            break
        (within if fire.fire_at >= floor else late).append(fire)
    if within:
        run = within
    else:
        latest = late[-1] if late else spec.last_fire_in(cursor, start, seed=item.id)
        run = [latest] if latest is not None and item.policy.catchup_window is None else []
    last_due = (
        run[-1] if run else (late[-1] if late else spec.last_fire_in(cursor, start, seed=item.id))
    )
    new_cursor = last_due.nominal_at if last_due is not None else max(cursor, start)
    if following is None or (run and following.nominal_at <= new_cursor):
        following = next(spec.fires_after(new_cursor, seed=item.id), None)
    # missed: every due nominal time after the cursor and before the first run
    missed_until = run[0].nominal_at - _TICK if run else new_cursor
    missed: Missed | None = None
    first = next(spec.fires_after(cursor, seed=item.id), None)
    if first is not None and first.nominal_at <= missed_until:
        last = spec.last_fire_in(cursor, missed_until, seed=item.id)
        assert last is not None
        count, exact = spec.count_fires(cursor, missed_until)
        missed = Missed(first.nominal_at, last.nominal_at, count, exact)
    return Plan(run, missed, new_cursor, None if following is None else following.fire_at)


async def record_missed(
    store: ScheduleRuntimeStore, item: Decoded, missed: Missed, reason: str
) -> None:
    """Record, count, log and publish a range of missed nominal times (once)."""
    await store.record_schedule_missed(
        item.id, missed.first, missed.last, missed.times, missed.exact, reason
    )
    _metrics.schedule_fired(item.id, "missed", missed.times)
    log.info(
        "schedule %r: %s%d nominal times from %s to %s missed (%s)",
        item.id,
        "" if missed.exact else "at least ",
        missed.times,
        missed.first.isoformat(),
        missed.last.isoformat(),
        reason,
    )
    await publish_fate(store, item.id, MISSED_EVENT, missed, reason)


async def publish_fate(
    store: ScheduleRuntimeStore, sid: str, event_type: str, missed: Missed, reason: str
) -> None:
    """Publish a missed or skipped range to the ledger under an id derived
    from it, so a tick repeated after a crash publishes nothing new."""
    event_id = uuid.uuid5(_EVENT_NAMESPACE, f"{event_type}|{sid}|{missed.first.isoformat()}")
    payload = {
        "schedule_id": sid,
        "first_nominal_at": missed.first.isoformat(),
        "last_nominal_at": missed.last.isoformat(),
        "count": missed.times,
        "count_exact": missed.exact,
        "reason": reason,
    }
    with contextlib.suppress(ConflictError):
        await publish_event(store, event_type, payload, key=sid, id=event_id)
