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
from typing import Any

from azync_flow import _metrics
from azync_flow._logging import log_failure
from azync_flow.errors import StoreError
from azync_flow.replay.outcome import SCHEDULE_NOMINAL_AT
from azync_flow.store.schedules import ScheduleRunRecord

from ._actions import ActionRunner, RunStarter
from ._client import ScheduleClient
from ._codec import Decoded, decode, fire_of
from ._model import Overlap, StartWorkflow, run_key
from ._plan import MISSED_EVENT, SKIPPED_EVENT, Missed, plan, publish_fate, record_missed
from ._spec import Fire
from ._store import ScheduleRuntimeStore

__all__ = ["SCHEDULE_LEADERSHIP", "Scheduler", "declared_schedule_id"]

log = logging.getLogger("azync_flow.schedules")

#: Election of the scheduler step among workers.
SCHEDULE_LEADERSHIP = "azync_flow.schedule"


def declared_schedule_id(workflow_name: str) -> str:
    """The id of the schedule ``@workflow(schedule=...)`` declares."""
    return f"workflow:{workflow_name}"


class Scheduler:
    """Fires due schedules; :meth:`run_once` is the maintenance step.

    Args:
        store: the store (``ScheduleStore`` plus the verbs the actions use).
        starter: starts the workflow executions and DAG runs of the actions
            (it knows the DAGs ``StartDAG`` may start).

    Attributes:
        declared: schedules declared in code (``@workflow(schedule=...)``) by
            id, created or updated on the first tick (see :meth:`declare`).
    """

    def __init__(self, store: ScheduleRuntimeStore, starter: RunStarter) -> None:
        self.store = store
        self.actions = ActionRunner(store, starter)
        self.declared: dict[str, Any] = {}
        self._declared_synced = False

    def declare(self, workflows: Iterable[Any]) -> None:
        """Create or update, on the next tick, the schedules that ``workflows``
        (``@workflow`` definitions) declare with ``schedule=`` (id
        :func:`declared_schedule_id`); the others are passed over."""
        for w in workflows:
            if getattr(w, "schedule", None) is not None:
                action = StartWorkflow.of(w)
                self.declared[declared_schedule_id(w.name)] = {**w.schedule, "action": action}
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
        client = ScheduleClient(self.store)
        for sid, kwargs in self.declared.items():
            await client.ensure(sid, **kwargs)
        self._declared_synced = True

    async def _fire_due(self, item: Decoded) -> int:
        now = await self.store.current_time()
        todo = plan(item, now)
        if todo.missed is not None:
            await record_missed(self.store, item, todo.missed, "catchup")
        started = 0
        for fire in todo.fires:
            if await self._fire(item, fire):
                started += 1
                # how late this tick found the fire due (database clock)
                _metrics.schedule_lag(item.id, (now - fire.fire_at).total_seconds())
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
        if written == outcome:
            _metrics.schedule_fired(item.id, outcome)
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
            _metrics.schedule_fired(item.id, "started")
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
                now = now or await self.store.current_time()
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
