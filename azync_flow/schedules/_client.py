"""``client.schedules``: create, describe, list, pause, unpause, trigger,
delete and backfill schedules."""

from __future__ import annotations

import builtins
import contextlib
import itertools
import uuid
from datetime import datetime, timedelta
from typing import Any

from azync_flow.store.errors import NotFoundError
from azync_flow.store.types import ScheduleRecord

from ._actions import ActionRunner
from ._codec import decode, encode, fire_of
from ._errors import ScheduleExistsError, ScheduleSpecError
from ._model import (
    Action,
    EnqueueJob,
    Overlap,
    ScheduleDescription,
    SchedulePolicy,
    ScheduleRun,
    ScheduleSummary,
    StartDAG,
    StartWorkflow,
    describe_action,
    run_key,
)
from ._spec import Fire, ScheduleSpec, aware_utc

__all__ = ["ScheduleClient"]

#: Most nominal times one ``backfill`` call may request.
MAX_BACKFILL = 10_000


def _check(spec: ScheduleSpec, action: Action, policy: SchedulePolicy) -> ScheduleSpec:
    if not isinstance(action, StartWorkflow | StartDAG | EnqueueJob):
        raise ScheduleSpecError(
            f"action must be StartWorkflow, StartDAG or EnqueueJob, got {type(action).__name__}"
        )
    if isinstance(action, EnqueueJob) and policy.overlap is Overlap.CANCEL_OTHER:
        raise ScheduleSpecError("overlap cancel_other applies to workflows and DAGs, not jobs")
    if policy.catchup_window is not None and policy.catchup_window < timedelta(0):
        raise ScheduleSpecError("catchup_window must not be negative")
    return spec.validated()


def _next_fire(spec: ScheduleSpec, sid: str, after: datetime) -> datetime | None:
    fire = next(spec.fires_after(after, seed=sid), None)
    return None if fire is None else fire.fire_at


class ScheduleClient:
    """Schedules in a store (``client.schedules``).

    Every call may raise ``StoreUnavailableError`` when the database cannot be
    reached. Fires happen on a worker that runs the scheduler step (every
    worker with workflows, or ``attach_schedules(worker)``).

    Args:
        store: the store.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._actions = ActionRunner(store)

    async def create(
        self,
        id: str,
        spec: ScheduleSpec,
        action: Action,
        *,
        policy: SchedulePolicy | None = None,
        paused: bool = False,
        note: str = "",
    ) -> None:
        """Create schedule ``id``. Only nominal times after now fire (see
        :meth:`backfill` for earlier ones).

        Args:
            id: the schedule id (part of every run's id).
            spec: when it fires.
            action: what it starts (:class:`StartWorkflow`, :class:`StartDAG`,
                :class:`EnqueueJob`).
            policy: overlap and catch-up (default :class:`SchedulePolicy`).
            paused: create it paused.
            note: why (shown by describe and list).

        Raises:
            ScheduleSpecError: an invalid spec or action, or an empty id.
            ScheduleExistsError: a schedule ``id`` exists (delete it first).
        """
        policy = policy or SchedulePolicy()
        if not id or "\x00" in id:
            raise ScheduleSpecError(f"invalid schedule id {id!r}")
        spec = _check(spec, action, policy)
        now = await self.store.schedule_clock()
        record = ScheduleRecord(
            id=id,
            spec=encode(spec),
            action=encode(action),
            policy=encode(policy),
            note=note,
            paused=paused,
            cursor_at=now,
            next_fire_at=_next_fire(spec, id, now),
            created_at=now,
            updated_at=now,
        )
        if not await self.store.create_schedule(record):
            raise ScheduleExistsError(f"schedule {id!r} exists; delete it first or pick another id")

    async def ensure(
        self, id: str, spec: ScheduleSpec, action: Action, *, policy: SchedulePolicy | None = None
    ) -> None:
        """Create ``id``, or bring an existing one to this spec, action and
        policy keeping its cursor and pause state (schedules declared in code)."""
        policy = policy or SchedulePolicy()
        spec = _check(spec, action, policy)
        try:
            current = await self.store.get_schedule(id)
        except NotFoundError:
            with contextlib.suppress(ScheduleExistsError):  # declared by another worker meanwhile
                await self.create(id, spec, action, policy=policy)
            return
        wanted = (encode(spec), encode(action), encode(policy))
        if (current.spec, current.action, current.policy) != wanted:
            nxt = _next_fire(spec, id, current.cursor_at)
            await self.store.update_schedule(id, *wanted, nxt)

    async def describe(self, id: str, *, fires: int = 5, runs: int = 10) -> ScheduleDescription:
        """The schedule, its next ``fires`` fire times (local and UTC) and its
        last ``runs`` runs with their outcome and the run's current state.

        Raises:
            NotFoundError: no schedule ``id``.
        """
        item = decode(await self.store.get_schedule(id))
        after = max(item.record.cursor_at, await self.store.schedule_clock())
        upcoming = list(itertools.islice(item.spec.fires_after(after, seed=id), fires))
        recent = []
        for row in await self.store.recent_schedule_runs(id, runs):
            local = row.nominal_at.astimezone(item.spec.zone())
            state = ""
            if row.outcome == "started":
                state = await self._actions.state(item.action, row.run_id)
            recent.append(
                ScheduleRun(
                    nominal_at=row.nominal_at,
                    local=local,
                    fire_at=row.fire_at,
                    run_id=row.run_id,
                    outcome=row.outcome,
                    state=state,
                )
            )
        return ScheduleDescription(
            id=id,
            spec=item.spec,
            action=item.action,
            policy=item.policy,
            paused=item.record.paused,
            note=item.record.note,
            next_fires=upcoming,
            recent_runs=recent,
            created_at=item.record.created_at,
        )

    async def list(self, limit: int = 1000) -> builtins.list[ScheduleSummary]:
        """Schedules ordered by id."""
        out = []
        for record in await self.store.list_schedules(limit):
            item = decode(record)
            out.append(
                ScheduleSummary(
                    id=record.id,
                    action=describe_action(item.action),
                    paused=record.paused,
                    next_fire_at=record.next_fire_at,
                    note=record.note,
                )
            )
        return out

    async def pause(self, id: str, note: str = "") -> None:
        """Stop firing until :meth:`unpause`.

        Raises:
            NotFoundError: no schedule ``id``.
        """
        record = await self.store.get_schedule(id)
        await self.store.set_schedule_paused(id, True, note, record.cursor_at, record.next_fire_at)

    async def unpause(self, id: str, note: str = "") -> None:
        """Fire again from now on; nominal times passed while paused do not
        fire (:meth:`backfill` runs them).

        Raises:
            NotFoundError: no schedule ``id``.
        """
        item = decode(await self.store.get_schedule(id))
        now = await self.store.schedule_clock()
        cursor = max(item.record.cursor_at, now)
        await self.store.set_schedule_paused(
            id, False, note, cursor, _next_fire(item.spec, id, cursor)
        )

    async def trigger(self, id: str) -> uuid.UUID:
        """Run the action now (nominal time: now), whatever the overlap policy
        and pause state; the scheduler starts it within a tick.

        Returns:
            The id of the run it starts.

        Raises:
            NotFoundError: no schedule ``id``.
        """
        item = decode(await self.store.get_schedule(id))
        now = await self.store.schedule_clock()
        fire = fire_of(item.spec, now, now)
        _key, run_id = run_key(item.action, id, fire)
        await self.store.request_schedule_runs(id, [(now, now, run_id)])
        return run_id

    async def backfill(self, id: str, start: datetime, end: datetime) -> int:
        """Run every nominal time of the spec in ``[start, end]`` (DST policies
        applied), whatever the overlap policy; a nominal time already run or
        requested is not run again.

        Args:
            id: the schedule.
            start: aware datetime (inclusive).
            end: aware datetime (inclusive).

        Returns:
            How many runs were requested (the scheduler starts them).

        Raises:
            ScheduleSpecError: naive datetimes, ``end`` before ``start``, or
                more than ``MAX_BACKFILL`` nominal times in the range.
            NotFoundError: no schedule ``id``.
        """
        start = aware_utc(start, "start")
        end = aware_utc(end, "end")
        if end < start:
            raise ScheduleSpecError(
                f"backfill end {end.isoformat()} is before start {start.isoformat()}"
            )
        item = decode(await self.store.get_schedule(id))
        fires: builtins.list[Fire] = []
        for fire in item.spec.fires_after(start - timedelta(microseconds=1), seed=id):
            if fire.nominal_at > end:
                break
            if len(fires) >= MAX_BACKFILL:
                raise ScheduleSpecError(
                    f"backfill of more than {MAX_BACKFILL} nominal times; split the range"
                )
            fires.append(fire)
        rows = [(f.nominal_at, f.fire_at, run_key(item.action, id, f)[1]) for f in fires]
        return int(await self.store.request_schedule_runs(id, rows)) if rows else 0

    async def delete(self, id: str) -> None:
        """Delete the schedule and its run ledger; runs already started go on.

        Raises:
            NotFoundError: no schedule ``id``.
        """
        await self.store.delete_schedule(id)
