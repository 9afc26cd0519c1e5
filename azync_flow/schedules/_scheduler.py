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

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from azync_flow._logging import log_failure
from azync_flow.store.errors import StoreError
from azync_flow.store.types import ScheduleRunRecord

from ._actions import ActionRunner
from ._codec import Decoded, decode, fire_of
from ._model import Overlap, run_key
from ._spec import Fire

__all__ = ["SCHEDULE_LEADERSHIP", "Plan", "Scheduler", "plan"]

log = logging.getLogger("azync_flow.schedules")

#: Election of the scheduler step among workers.
SCHEDULE_LEADERSHIP = "azync_flow.schedule"
#: Most nominal times listed for one schedule in one tick (a longer backlog is
#: worked off over the next ticks).
MAX_FIRES_PER_TICK = 10_000


def due_fires(
    item: Decoded, now: datetime, limit: int = MAX_FIRES_PER_TICK
) -> tuple[datetime, list[Fire], Fire | None]:
    """The fires after the cursor that are due at ``now`` and the next one.

    Returns:
        ``(after, due, next)``: the instant listed from (the cursor, or later
        when the catch-up window drops everything before it), the due fires
        in nominal order (at most ``limit``) and the first fire not listed
        (None when the spec has no more).
    """
    after = item.record.cursor_at
    window = item.policy.catchup_window
    if window is not None:  # older fires are dropped anyway: do not list them
        after = max(after, now - window - item.spec.jitter)
    due: list[Fire] = []
    for fire in item.spec.fires_after(after, seed=item.id):
        if fire.fire_at > now or len(due) >= limit:
            return after, due, fire
        due.append(fire)
    return after, due, None


def catch_up(item: Decoded, due: list[Fire], now: datetime) -> list[Fire]:
    """The due fires that run under the schedule's catch-up window."""
    window = item.policy.catchup_window
    if window is None:
        return due[-1:]
    return [f for f in due if f.fire_at >= now - window]


class Plan(NamedTuple):
    """What one tick does for a due schedule.

    Attributes:
        fires: the fires to run, in nominal order.
        dropped: due fires left out by the catch-up window.
        cursor: the schedule's cursor afterwards (the last due nominal instant).
        next_fire_at: its next fire afterwards (None: no more).
    """

    fires: list[Fire]
    dropped: int
    cursor: datetime
    next_fire_at: datetime | None


def plan(item: Decoded, now: datetime, limit: int = MAX_FIRES_PER_TICK) -> Plan:
    """The fires due at ``now`` after the cursor, picked by the catch-up window."""
    after, due, following = due_fires(item, now, limit)
    kept = catch_up(item, due, now)
    if item.policy.catchup_window is None and following is not None and following.fire_at <= now:
        kept = []  # a backlog longer than one listing: only its very last fire runs
    cursor = due[-1].nominal_at if due else after
    return Plan(
        kept, len(due) - len(kept), cursor, None if following is None else following.fire_at
    )


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
        if todo.dropped:
            log.info("schedule %r: %d missed fires dropped (catch-up)", item.id, todo.dropped)
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
                if overlap is Overlap.BUFFER_ONE:
                    waiting = [
                        r
                        for r in await self.store.pending_schedule_runs(item.id)
                        if r.outcome == "buffered"
                    ]
                    return await self._record(item, fire, "skipped" if waiting else "buffered")
                await self.actions.cancel(item.action, previous)
        return await self._start(item, fire)

    async def _live_previous(self, item: Decoded) -> uuid.UUID | None:
        """The run of the latest started nominal time, while it is still going."""
        runs: list[ScheduleRunRecord] = await self.store.recent_schedule_runs(
            item.id, 1, ["started"]
        )
        if runs and await self.actions.running(item.action, runs[0].run_id):
            return runs[0].run_id
        return None

    async def _record(self, item: Decoded, fire: Fire, outcome: str) -> int:
        _key, run_id = run_key(item.action, item.id, fire)
        await self.store.record_schedule_run(
            item.id, fire.nominal_at, fire.fire_at, run_id, outcome
        )
        return 0

    async def _start(self, item: Decoded, fire: Fire) -> int:
        key, run_id = run_key(item.action, item.id, fire)
        meta = {
            "schedule_id": item.id,
            "schedule_nominal_at": fire.nominal_at.isoformat(),
        }
        inserted = await self.actions.start(item.action, run_id, key, meta)
        await self.store.record_schedule_run(
            item.id, fire.nominal_at, fire.fire_at, run_id, "started"
        )
        if inserted:
            log.info("schedule %r fired for %s: run %s", item.id, fire.local.isoformat(), run_id)
        return 1 if inserted else 0

    async def _start_pending(self, item: Decoded) -> int:
        started = 0
        for run in await self.store.pending_schedule_runs(item.id):
            fire = fire_of(item.spec, run.nominal_at, run.fire_at)
            if run.outcome == "buffered" and await self._live_previous(item) is not None:
                continue
            started += await self._start(item, fire)
        return started
