"""The scheduler: a leader-only maintenance step that fires due schedules.

Each tick (on the leader of ``azync_flow.schedule``, on the backend clock):

1. runs still to start: requested ones (``trigger``, ``backfill``) start;
   a buffered one starts once the run before it has ended;
2. every unpaused schedule whose ``next_fire_at`` has come: the nominal times
   after its cursor that are due are listed, the catch-up window picks which
   of them run, the overlap policy decides for each, then the cursor moves
   past all of them and ``next_fire_at`` to the next one.

A run's id is derived from the schedule id and the nominal instant, and a
start of an existing id starts nothing, so a crash between a start and the
cursor move, a restarted or a second scheduler, or a re-created schedule
never start a nominal time twice.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from azync_flow._logging import log_failure
from azync_flow.errors import ConflictError, StoreError
from azync_flow.events._publish import publish_event
from azync_flow.replay.outcome import SCHEDULE_NOMINAL_AT
from azync_flow.store.schedules import ScheduleRunRecord

from ._actions import ActionRunner
from ._codec import Decoded, decode, fire_of
from ._model import Overlap, run_key
from ._spec import Fire

__all__ = ["MISSED_EVENT", "SCHEDULE_LEADERSHIP", "SKIPPED_EVENT", "Plan", "Scheduler", "plan"]

#: Ledger event for nominal times that did not run (catch-up, pause, edit).
MISSED_EVENT = "azync.schedule.missed"
#: Ledger event for a nominal time skipped by the overlap policy.
SKIPPED_EVENT = "azync.schedule.skipped"

log = logging.getLogger("azync_flow.schedules")

#: Election of the scheduler step among workers.
SCHEDULE_LEADERSHIP = "azync_flow.schedule"
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


class Scheduler:
    """Fires due schedules; :meth:`run_once` is the maintenance step.

    Args:
        store: the store (``ScheduleStore`` plus the verbs the actions use).
        actions: starts the runs (knows the DAGs ``StartDAG`` may start).

    Attributes:
        declared: schedules declared in code (``@workflow(schedule=...)``) by
            id, created or updated on the first tick (see :meth:`declare`).
    """

    def __init__(self, store: Any, actions: ActionRunner) -> None:
        self.store = store
        self.actions = actions
        self.declared: dict[str, Any] = {}
        self._declared_synced = False

    def declare(self, declarations: Iterable[tuple[str, Any]]) -> None:
        """Add ``(schedule id, create kwargs)`` to sync on the next tick."""
        for sid, kwargs in declarations:
            self.declared[sid] = kwargs
            self._declared_synced = False

    async def run_once(self) -> int:
        """One scheduler pass. Returns how many runs it started."""
        if not self._declared_synced:
            await self._sync_declared()
        started = 0
        for record in await self.store.schedules_with_pending_runs():
            started += await self._guarded(self._start_pending, decode(record))
        for record in await self.store.due_schedules():
            started += await self._guarded(self._fire_due, decode(record))
        return started

    async def _guarded(self, step: Callable[[Decoded], Awaitable[int]], item: Decoded) -> int:
        try:
            return await step(item)
        except StoreError:
            raise  # lost leadership, database away: the whole step stops
        except Exception as exc:
            # one broken schedule (an unknown DAG, an input the workflow refuses)
            # must not stop the others; it is retried next tick
            log_failure(log, exc, "schedule %r: fire failed", item.id)
            return 0

    async def _sync_declared(self) -> None:
        from ._client import ScheduleClient

        client = ScheduleClient(self.store)
        for sid, kwargs in self.declared.items():
            await client.ensure(sid, **kwargs)
        self._declared_synced = True

    async def _fire_due(self, item: Decoded) -> int:
        todo = plan(item, await self.store.schedule_clock())
        if todo.missed is not None:
            await record_missed(self.store, item, todo.missed, "catchup")
        started = 0
        for fire in todo.fires:
            started += await self._fire(item, fire)
        await self.store.advance_schedule(item.id, todo.cursor, todo.next_fire_at)
        return started

    async def _fire(self, item: Decoded, fire: Fire) -> int:
        """Apply the overlap policy to one due fire; returns 1 when it started a run."""
        recorded = await self.store.schedule_run(item.id, fire.nominal_at)
        if recorded is not None:
            return 0  # handled before a crash, or by trigger/backfill
        overlap = item.policy.overlap
        if overlap is not Overlap.ALLOW_ALL:
            previous = await self._live_previous(item)
            if previous is not None:
                if overlap is Overlap.SKIP:
                    return await self._record(item, fire, "skipped")
                if overlap in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL):
                    waiting = [
                        r
                        for r in await self.store.pending_schedule_runs(item.id)
                        if r.outcome == "buffered"
                    ]
                    room = 1 if overlap is Overlap.BUFFER_ONE else item.policy.buffer_limit
                    full = len(waiting) >= room
                    return await self._record(item, fire, "skipped" if full else "buffered")
                await self.actions.cancel(item.action, previous)
        return await self._start(item, fire)

    async def _live_previous(self, item: Decoded) -> uuid.UUID | None:
        """The run started last, while it is still going."""
        last: ScheduleRunRecord | None = await self.store.last_started_schedule_run(item.id)
        if last is not None and await self.actions.running(item.action, last.run_id):
            return last.run_id
        return None

    async def _record(self, item: Decoded, fire: Fire, outcome: str) -> int:
        _key, run_id = run_key(item.action, item.id, fire)
        written = await self.store.record_schedule_run(
            item.id, fire.nominal_at, fire.fire_at, run_id, outcome
        )
        if written in ("skipped", "missed"):
            log.info(
                "schedule %r: %s %s (%s)",
                item.id,
                outcome,
                fire.local.isoformat(),
                item.policy.overlap,
            )
            reason = "overlap" if outcome == "skipped" else "buffer"
            await publish_fate(
                self.store,
                item.id,
                SKIPPED_EVENT if outcome == "skipped" else MISSED_EVENT,
                Missed(fire.nominal_at, fire.nominal_at, 1, True),
                reason,
            )
        return 0

    async def _start(self, item: Decoded, fire: Fire) -> int:
        key, run_id = run_key(item.action, item.id, fire)
        meta = {
            "schedule_id": item.id,
            SCHEDULE_NOMINAL_AT: fire.nominal_at.isoformat(),
        }
        inserted = await self.actions.start(item.action, run_id, key, meta)
        await self.store.record_schedule_run(
            item.id, fire.nominal_at, fire.fire_at, run_id, "started"
        )
        if inserted:
            log.info("schedule %r fired for %s: run %s", item.id, fire.local.isoformat(), run_id)
        return 1 if inserted else 0

    async def _start_pending(self, item: Decoded) -> int:
        """Start requested and buffered runs: a buffered one once the run
        before it has ended (missed when that is later than the catch-up
        window after its fire time); a requested one at once under
        ``allow_all`` (its override or the schedule's policy), else one at a
        time, each once the run before it has ended."""
        started = 0
        now: datetime | None = None
        for run in await self.store.pending_schedule_runs(item.id):
            fire = fire_of(item.spec, run.nominal_at, run.fire_at)
            if run.outcome == "buffered":
                now = now or await self.store.schedule_clock()
                if now - run.fire_at > item.policy.window():
                    await self._record(item, fire, "missed")
                    continue
                if await self._live_previous(item) is not None:
                    continue
            else:
                overlap = Overlap(run.overlap) if run.overlap else item.policy.overlap
                if overlap is not Overlap.ALLOW_ALL and await self._live_previous(item) is not None:
                    continue
            started += await self._start(item, fire)
        return started


async def record_missed(store: Any, item: Decoded, missed: Missed, reason: str) -> None:
    """Record, count, log and publish a range of missed nominal times (once)."""
    await store.record_schedule_missed(
        item.id, missed.first, missed.last, missed.times, missed.exact, reason
    )
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


async def publish_fate(store: Any, sid: str, event_type: str, missed: Missed, reason: str) -> None:
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
