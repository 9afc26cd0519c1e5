"""The schedules' contract: schedules and their run ledger (an extension of
the driver contract).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import msgspec

from .admin import StoreClock

__all__ = [
    "ScheduleChangeRecord",
    "ScheduleMissedRecord",
    "ScheduleRecord",
    "ScheduleRunRecord",
    "ScheduleStore",
]


class ScheduleRecord(msgspec.Struct, kw_only=True):
    """A stored schedule (``spec``, ``action`` and ``policy`` are the client's JSON).

    Attributes:
        id: the schedule id.
        spec: encoded ``ScheduleSpec``.
        action: encoded action (start a workflow, a DAG, enqueue a job).
        policy: encoded ``SchedulePolicy``.
        note: why it was paused (operators' text).
        paused: no fire while True.
        cursor_at: the last nominal instant handled; only later ones fire.
        next_fire_at: when the next fire is due (None: no more fires).
        created_at: when it was created (store clock).
        updated_at: last change (store clock).
        started_count: nominal times that started a run.
        skipped_count: nominal times skipped by the overlap policy.
        missed_count: nominal times missed (catch-up window, pause, edit).
    """

    id: str
    spec: bytes
    action: bytes
    policy: bytes
    note: str
    paused: bool
    cursor_at: datetime
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    started_count: int = 0
    skipped_count: int = 0
    missed_count: int = 0


class ScheduleRunRecord(msgspec.Struct, kw_only=True):
    """What a schedule did for one nominal instant.

    Attributes:
        schedule_id: the schedule.
        nominal_at: the nominal instant (UTC), the identity of the fire.
        fire_at: when it was due (nominal plus jitter).
        run_id: the workflow execution, DAG run or job started for it (derived
            from the schedule id and ``nominal_at``).
        outcome: ``started``, ``skipped`` (overlap), ``missed`` (a buffered
            start later than the catch-up window), ``buffered`` (waiting for
            the run before it) or ``requested`` (trigger, backfill).
        created_at: when it was recorded (store clock).
        updated_at: last change (a buffered run started).
    """

    schedule_id: str
    nominal_at: datetime
    fire_at: datetime
    run_id: uuid.UUID
    outcome: str
    created_at: datetime
    updated_at: datetime
    overlap: str | None = None


class ScheduleMissedRecord(msgspec.Struct, kw_only=True):
    """A range of nominal times of a schedule that did not run.

    Attributes:
        schedule_id: the schedule.
        first_nominal_at: the first missed nominal instant (UTC).
        last_nominal_at: the last one (inclusive).
        count: how many nominal times the range holds.
        count_exact: False when ``count`` is a lower bound (a cron range
            longer than the scheduler counts).
        reason: ``catchup`` (older than the catch-up window), ``paused``
            (passed while paused) or ``update`` (before an edit took effect).
        recorded_at: when it was recorded (store clock).
    """

    schedule_id: str
    first_nominal_at: datetime
    last_nominal_at: datetime
    count: int
    count_exact: bool
    reason: str
    recorded_at: datetime


class ScheduleChangeRecord(msgspec.Struct, kw_only=True):
    """One edit of a schedule (``update``, ``pause``, ``unpause``).

    Attributes:
        schedule_id: the schedule.
        at: when (store clock).
        verb: ``update``, ``pause`` or ``unpause``.
        old_spec, new_spec, old_policy, new_policy, old_action, new_action:
            the encoded values before and after (None for pause/unpause).
        note: the operator's note.
    """

    schedule_id: str
    at: datetime
    verb: str
    old_spec: bytes | None = None
    new_spec: bytes | None = None
    old_policy: bytes | None = None
    new_policy: bytes | None = None
    old_action: bytes | None = None
    new_action: bytes | None = None
    note: str = ""


@runtime_checkable
class ScheduleStore(StoreClock, Protocol):
    """Schedules and their run ledger (an extension of the contract).

    Times are the store's clock (``coalesce($now, now())``); ids are the
    user's schedule ids; ``spec``/``action``/``policy`` are stored byte for byte.
    """

    async def create_schedule(self, record: ScheduleRecord) -> bool:
        """Insert a schedule (its ``created_at``/``updated_at`` are the store clock).

        Returns:
            False when a schedule with this id exists (nothing written).
        """
        ...

    async def get_schedule(self, id: str) -> ScheduleRecord:
        """Raises NotFoundError: no schedule ``id``."""
        ...

    async def list_schedules(self, limit: int = 1000) -> list[ScheduleRecord]:
        """Schedules ordered by id."""
        ...

    async def due_schedules(self, limit: int = 100) -> list[ScheduleRecord]:
        """Unpaused schedules whose ``next_fire_at`` has come, most overdue first."""
        ...

    async def schedules_with_pending_runs(self) -> list[ScheduleRecord]:
        """Schedules holding a run still to start: requested (trigger,
        backfill) or buffered behind a running one."""
        ...

    async def pending_schedule_runs(self, schedule_id: str) -> list[ScheduleRunRecord]:
        """Requested and buffered runs of a schedule, oldest nominal time first."""
        ...

    async def request_schedule_runs(
        self,
        schedule_id: str,
        runs: Sequence[tuple[datetime, datetime, uuid.UUID]],
        overlap: str | None = None,
    ) -> int:
        """Record ``(nominal_at, fire_at, run_id)`` rows as ``requested`` for the
        scheduler to start; a nominal time already recorded is left alone.
        ``overlap`` overrides the schedule's overlap policy for these rows
        (None: the schedule's policy applies).

        Returns:
            How many rows were new.
        """
        ...

    async def update_schedule(
        self,
        id: str,
        spec: bytes,
        action: bytes,
        policy: bytes,
        cursor_at: datetime,
        next_fire_at: datetime | None,
        note: str = "",
    ) -> None:
        """Replace spec, action and policy, move the cursor to at least
        ``cursor_at`` and record the edit (time, values before and after).

        Raises NotFoundError: no schedule ``id``.
        """
        ...

    async def advance_schedule(
        self, id: str, cursor_at: datetime, next_fire_at: datetime | None
    ) -> bool:
        """Move the cursor to ``cursor_at`` (never back) and set the next fire.

        Returns:
            False when the schedule is gone or its cursor is already later
            (re-created meanwhile): nothing written.
        """
        ...

    async def set_schedule_paused(
        self, id: str, paused: bool, note: str, cursor_at: datetime, next_fire_at: datetime | None
    ) -> None:
        """Pause or unpause (the edit is recorded); the cursor moves to at
        least ``cursor_at``.

        Raises NotFoundError: no schedule ``id``.
        """
        ...

    async def delete_schedule(self, id: str) -> None:
        """Delete the schedule and its ledger (runs already started go on).

        Raises NotFoundError: no schedule ``id``.
        """
        ...

    async def record_schedule_run(
        self,
        schedule_id: str,
        nominal_at: datetime,
        fire_at: datetime,
        run_id: uuid.UUID,
        outcome: str,
    ) -> str | None:
        """Record the outcome of one nominal time (a ``buffered`` or
        ``requested`` row may be overwritten; any other is final).

        Returns:
            The outcome written, or None when the nominal time was already
            recorded with a final outcome (nothing written).
        """
        ...

    async def schedule_run(
        self, schedule_id: str, nominal_at: datetime
    ) -> ScheduleRunRecord | None:
        """The ledger row of one nominal time, if any."""
        ...

    async def recent_schedule_runs(
        self, schedule_id: str, limit: int, outcomes: Sequence[str] | None = None
    ) -> list[ScheduleRunRecord]:
        """Ledger rows, newest nominal time first, optionally of some outcomes."""
        ...

    async def last_started_schedule_run(self, schedule_id: str) -> ScheduleRunRecord | None:
        """The run started last (in start order, which a backfill of old
        nominal times makes differ from nominal order), if any."""
        ...

    async def record_schedule_missed(
        self,
        schedule_id: str,
        first_nominal_at: datetime,
        last_nominal_at: datetime,
        count: int,
        count_exact: bool,
        reason: str,
    ) -> bool:
        """Record the nominal times in ``[first, last]`` (``count`` of them) as
        missed, once per ``first_nominal_at``, and add ``count`` to the
        schedule's missed count.

        Returns:
            False when that range was recorded already (nothing written).
        """
        ...

    async def recent_schedule_missed(
        self, schedule_id: str, limit: int
    ) -> list[ScheduleMissedRecord]:
        """Missed ranges, newest first."""
        ...

    async def recent_schedule_changes(
        self, schedule_id: str, limit: int
    ) -> list[ScheduleChangeRecord]:
        """Edits (update, pause, unpause), newest first."""
        ...
