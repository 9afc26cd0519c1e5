"""``client.schedules``: create, describe, list, pause, unpause, trigger,
delete and backfill schedules."""

from __future__ import annotations

import builtins
import contextlib
import itertools
import re
import uuid
from datetime import datetime, timedelta

from azync_flow.errors import NotFoundError, ScheduleExistsError, ScheduleSpecError
from azync_flow.store.schedules import ScheduleRecord
from azync_flow.store.validate import check_name, check_text

from ._actions import run_state
from ._codec import Decoded, decode, decode_policy, decode_spec, encode, fire_of
from ._model import (
    Action,
    EnqueueJob,
    MissedRange,
    Overlap,
    ScheduleChange,
    ScheduleCounts,
    ScheduleDescription,
    SchedulePolicy,
    ScheduleRun,
    ScheduleSummary,
    StartDAG,
    StartWorkflow,
    describe_action,
    run_key,
)
from ._plan import Missed, plan, record_missed
from ._spec import Fire, ScheduleSpec, aware_utc
from ._store import ScheduleRuntimeStore

__all__ = ["ScheduleClient", "resume_point"]


#: Most nominal times one ``backfill`` call may request.
MAX_BACKFILL = 10_000


#: What a new schedule id may contain (it is rendered into run id templates).
_SCHEDULE_ID = re.compile(r"[A-Za-z0-9._:@-]+")


def _name(value: str, field: str, *, new_schedule: bool = False) -> str:
    """:func:`check_name` of a schedule id or an action's target name, its
    ValueError as a ``ScheduleSpecError``; a new schedule's id must also
    match :data:`_SCHEDULE_ID`.

    Raises:
        TypeError: ``value`` is not a str.
        ScheduleSpecError: ``value`` is empty, too long, not storable text or
            (a new schedule id) has a character outside letters, digits and ``._:@-``.
    """
    try:
        check_name(value, field)
    except ValueError as exc:
        raise ScheduleSpecError(str(exc)) from None
    if new_schedule and not _SCHEDULE_ID.fullmatch(value):
        raise ScheduleSpecError(f"{field} {value!r} may contain only letters, digits and . _ : @ -")
    return value


def _check(spec: ScheduleSpec, action: Action, policy: SchedulePolicy) -> ScheduleSpec:
    if not isinstance(spec, ScheduleSpec):
        raise TypeError(
            f'spec must be a ScheduleSpec (e.g. ScheduleSpec(cron="*/5 * * * *") or '
            f"ScheduleSpec(intervals=[Interval(every=timedelta(seconds=5))])), "
            f"got {type(spec).__name__} {spec!r}"
        )
    if not isinstance(policy, SchedulePolicy):
        raise TypeError(
            f"policy must be a SchedulePolicy (e.g. SchedulePolicy(overlap=Overlap.SKIP)), "
            f"got {type(policy).__name__} {policy!r}"
        )
    if not isinstance(action, StartWorkflow | StartDAG | EnqueueJob):
        raise TypeError(
            "action must be StartWorkflow.of(...), StartDAG.of(...) or EnqueueJob.of(...), "
            f"got {type(action).__name__} {action!r}"
        )
    if isinstance(action, StartWorkflow):
        _name(action.workflow, "scheduled workflow name")
    elif isinstance(action, StartDAG):
        _name(action.dag, "scheduled DAG name")
    else:
        _name(action.kind, "scheduled job kind")
    if isinstance(action, EnqueueJob) and policy.overlap is Overlap.CANCEL_OTHER:
        raise ScheduleSpecError("overlap cancel_other applies to workflows and DAGs, not jobs")
    if policy.catchup_window is not None and policy.catchup_window < timedelta(0):
        raise ScheduleSpecError("catchup_window must not be negative")
    if policy.buffer_limit < 1:
        raise ScheduleSpecError("buffer_limit must be positive")
    return spec.validated()


def _next_fire(spec: ScheduleSpec, sid: str, after: datetime) -> datetime | None:
    fire = next(spec.fires_after(after, seed=sid), None)
    return None if fire is None else fire.fire_at


def resume_point(
    spec: ScheduleSpec, sid: str, cursor: datetime, now: datetime
) -> tuple[datetime, datetime | None]:
    """Where a schedule resumes at ``now`` (unpause, update): no nominal time
    before ``now`` fires, except one whose jittered start is still ahead.

    Returns:
        ``(cursor, next_fire_at)``: the new cursor (never before ``cursor``)
        and the next fire (None: no more).
    """
    for fire in spec.fires_after(max(cursor, now - spec.jitter), seed=sid):
        if fire.fire_at > now:
            return max(cursor, min(now, fire.nominal_at - timedelta(microseconds=1))), fire.fire_at
    return max(cursor, now), None


async def _record_skipped_over(
    store: ScheduleRuntimeStore, item: Decoded, spec: ScheduleSpec, cursor: datetime, reason: str
) -> None:
    """Record the nominal times of ``spec`` in ``(record cursor, cursor]`` as missed."""
    old = item.record.cursor_at
    first = next(spec.fires_after(old, seed=item.id), None)
    if first is None or first.nominal_at > cursor:
        return
    last = spec.last_fire_in(old, cursor, seed=item.id)
    assert last is not None
    count, exact = spec.count_fires(old, cursor)
    await record_missed(
        store, item, Missed(first.nominal_at, last.nominal_at, count, exact), reason
    )


class ScheduleClient:
    """Schedules in a store (``client.schedules``).

    Every call may raise ``StoreUnavailableError`` when the database cannot be
    reached. Fires happen on a worker that runs the scheduler step (every
    worker with workflows, or with ``attach_schedules(worker)``).

    Args:
        store: the store.
    """

    def __init__(self, store: ScheduleRuntimeStore) -> None:
        self.store = store

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
            id: the schedule id (part of every run's id): letters, digits
                and ``._:@-`` only.
            spec: when it fires.
            action: what it starts (:class:`StartWorkflow`, :class:`StartDAG`,
                :class:`EnqueueJob`).
            policy: overlap and catch-up (default :class:`SchedulePolicy`).
            paused: create it paused.
            note: why (shown by describe and list).

        Raises:
            TypeError: ``id`` is not a str; ``spec``, ``action`` or ``policy``
                is not a ScheduleSpec, action or SchedulePolicy (e.g. a cron str).
            ScheduleSpecError: an invalid spec or action (an empty or bad
                target name), or an id that is empty or has other characters.
            ScheduleExistsError: a schedule ``id`` exists (delete it first).
        """
        _name(id, "schedule id", new_schedule=True)
        await self._insert(id, spec, action, policy, paused, note)

    async def _insert(
        self,
        id: str,
        spec: ScheduleSpec,
        action: Action,
        policy: SchedulePolicy | None,
        paused: bool,
        note: str,
    ) -> None:
        """:meth:`create` once the id is checked (declared ids,
        ``workflow:<workflow name>``, keep any storable workflow name)."""
        check_text(note, "note")
        policy = SchedulePolicy() if policy is None else policy
        spec = _check(spec, action, policy)
        now = await self.store.current_time()
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
        """Create ``id``, or :meth:`update` an existing one to this spec,
        action and policy when they differ (schedules declared in code).

        Raises:
            TypeError, ScheduleSpecError: as :meth:`create`.
        """
        _name(id, "schedule id")
        policy = SchedulePolicy() if policy is None else policy
        spec = _check(spec, action, policy)
        try:
            current = await self.store.get_schedule(id)
        except NotFoundError:
            with contextlib.suppress(ScheduleExistsError):  # declared by another worker meanwhile
                await self._insert(id, spec, action, policy, False, "")
            return
        if (current.spec, current.action, current.policy) != (
            encode(spec),
            encode(action),
            encode(policy),
        ):
            await self.update(id, spec=spec, action=action, policy=policy, note="declared in code")

    async def update(
        self,
        id: str,
        *,
        spec: ScheduleSpec | None = None,
        action: Action | None = None,
        policy: SchedulePolicy | None = None,
        note: str = "",
    ) -> None:
        """Change a schedule's spec, action and/or policy (None: keep).

        The new spec takes over from now: no nominal time before the update
        fires, except one the new spec names whose jittered start is still
        ahead (it runs once, at that start). Old-spec times that were due and
        not yet handled are recorded as missed (reason ``update``). The edit
        is recorded (time, values before and after; see ``describe``).

        Raises:
            TypeError: ``id`` is not a str; ``spec``, ``action`` or ``policy``
                is not a ScheduleSpec, action or SchedulePolicy.
            ScheduleSpecError: an invalid id, spec, action or policy, or none
                of ``spec``, ``action`` and ``policy`` given (nothing to change).
            NotFoundError: no schedule ``id``.
        """
        _name(id, "schedule id")
        check_text(note, "note")
        if spec is None and action is None and policy is None:
            raise ScheduleSpecError(
                f"nothing to change in schedule {id!r}: give spec, action and/or policy"
            )
        item = decode(await self.store.get_schedule(id))
        spec = item.spec if spec is None else spec
        action = item.action if action is None else action
        policy = item.policy if policy is None else policy
        spec = _check(spec, action, policy)
        now = await self.store.current_time()
        cursor, nxt = resume_point(spec, id, item.record.cursor_at, now)
        if not item.record.paused:
            await _record_skipped_over(self.store, item, item.spec, cursor, "update")
        await self.store.update_schedule(
            id, encode(spec), encode(action), encode(policy), cursor, nxt, note
        )

    async def _load(self, id: str) -> tuple[Decoded, datetime]:
        """Schedule ``id`` decoded, and the scheduler's clock now."""
        _name(id, "schedule id")
        return decode(await self.store.get_schedule(id)), await self.store.current_time()

    async def describe(
        self, id: str, *, fires: int = 5, runs: int = 10, missed: int = 5, changes: int = 5
    ) -> ScheduleDescription:
        """The schedule, its next ``fires`` fires (local and UTC, what the
        scheduler will really do: due fires not yet handled and a due fire
        whose jittered start is ahead come first), its last ``runs`` runs
        with their outcome and the run's current state, its counts, its last
        ``missed`` missed ranges and its last ``changes`` edits.

        Raises:
            NotFoundError: no schedule ``id``.
            TypeError: ``id`` is not a str.
            ScheduleSpecError: ``id`` is empty, too long or not storable text.
        """
        item, now = await self._load(id)
        upcoming: builtins.list[Fire] = []
        after = item.record.cursor_at
        if not item.record.paused:
            todo = plan(item, now, limit=fires)
            upcoming = todo.fires[:fires]
            after = todo.cursor
        else:
            after = resume_point(item.spec, id, after, now)[0]
        upcoming += itertools.islice(item.spec.fires_after(after, seed=id), fires - len(upcoming))
        recent = []
        for row in await self.store.recent_schedule_runs(id, runs):
            local = row.nominal_at.astimezone(item.spec.zone())
            state = ""
            if row.outcome == "started":
                state = await run_state(self.store, item.action, row.run_id)
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
        missed_ranges = [
            MissedRange(
                first_nominal_at=m.first_nominal_at,
                last_nominal_at=m.last_nominal_at,
                count=m.count,
                count_exact=m.count_exact,
                reason=m.reason,
                recorded_at=m.recorded_at,
            )
            for m in await self.store.recent_schedule_missed(id, missed)
        ]
        edits = [
            ScheduleChange(
                at=c.at,
                verb=c.verb,
                old_spec=decode_spec(c.old_spec),
                new_spec=decode_spec(c.new_spec),
                old_policy=decode_policy(c.old_policy),
                new_policy=decode_policy(c.new_policy),
                note=c.note,
            )
            for c in await self.store.recent_schedule_changes(id, changes)
        ]
        record = item.record
        return ScheduleDescription(
            id=id,
            spec=item.spec,
            action=item.action,
            policy=item.policy,
            paused=record.paused,
            note=record.note,
            next_fires=upcoming,
            recent_runs=recent,
            created_at=record.created_at,
            counts=ScheduleCounts(
                started=record.started_count,
                skipped=record.skipped_count,
                missed=record.missed_count,
            ),
            recent_missed=missed_ranges,
            recent_changes=edits,
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
            TypeError: ``id`` is not a str.
            ScheduleSpecError: ``id`` is empty, too long or not storable text.
        """
        _name(id, "schedule id")
        check_text(note, "note")
        record = await self.store.get_schedule(id)
        await self.store.set_schedule_paused(id, True, note, record.cursor_at, record.next_fire_at)

    async def unpause(self, id: str, note: str = "") -> None:
        """Fire again from now on: nominal times passed while paused do not
        fire (recorded as missed, reason ``paused``; :meth:`backfill` runs
        them), except one whose jittered start is still ahead (it runs once).

        Raises:
            NotFoundError: no schedule ``id``.
            TypeError: ``id`` is not a str.
            ScheduleSpecError: ``id`` is empty, too long or not storable text.
        """
        _name(id, "schedule id")
        check_text(note, "note")
        item = decode(await self.store.get_schedule(id))
        if not item.record.paused:
            return
        now = await self.store.current_time()
        cursor, nxt = resume_point(item.spec, id, item.record.cursor_at, now)
        await _record_skipped_over(self.store, item, item.spec, cursor, "paused")
        await self.store.set_schedule_paused(id, False, note, cursor, nxt)

    async def trigger(self, id: str) -> uuid.UUID:
        """Run the action now (nominal time: now), whatever the overlap policy
        and pause state; the scheduler starts it within a tick.

        Returns:
            The id of the run it starts.

        Raises:
            NotFoundError: no schedule ``id``.
            TypeError: ``id`` is not a str.
            ScheduleSpecError: ``id`` is empty, too long or not storable text.
        """
        item, now = await self._load(id)
        fire = fire_of(item.spec, now, now)
        _key, run_id = run_key(item.action, id, fire)
        await self.store.request_schedule_runs(
            id, [(now, now, run_id)], overlap=Overlap.ALLOW_ALL.value
        )
        return run_id

    async def backfill(
        self, id: str, start: datetime, end: datetime, *, overlap: Overlap | None = None
    ) -> int:
        """Run every nominal time of the spec in ``[start, end]`` (DST policies
        applied), oldest first; a nominal time already run or requested is
        not run again. They are not subject to the catch-up window.

        Args:
            id: the schedule.
            start: aware datetime (inclusive).
            end: aware datetime (inclusive).
            overlap: None (default): the schedule's overlap policy decides:
                under ``allow_all`` every run starts on the next tick; under
                any other policy they wait and start one at a time, each once
                the run started before it has ended. ``Overlap.ALLOW_ALL``
                starts them all at once whatever the schedule's policy.

        Returns:
            How many runs were requested (the scheduler starts them).

        Raises:
            ScheduleSpecError: naive datetimes, ``end`` before ``start``, or
                more than ``MAX_BACKFILL`` nominal times in the range.
            NotFoundError: no schedule ``id``.
            TypeError: ``id`` is not a str.
            ScheduleSpecError: ``id`` is empty, too long or not storable text.
        """
        _name(id, "schedule id")
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
        if not rows:
            return 0
        chosen = None if overlap is None else Overlap(overlap).value
        return int(await self.store.request_schedule_runs(id, rows, overlap=chosen))

    async def delete(self, id: str) -> None:
        """Delete the schedule and its run ledger; runs already started go on.

        Raises:
            NotFoundError: no schedule ``id``.
            TypeError: ``id`` is not a str.
            ScheduleSpecError: ``id`` is empty, too long or not storable text.
        """
        _name(id, "schedule id")
        await self.store.delete_schedule(id)
