"""Schedules and their run ledger on PostgreSQL (contract :mod:`azync_flow.store.schedules`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from ...errors import NotFoundError
from ..schedules import (
    ScheduleChangeRecord,
    ScheduleMissedRecord,
    ScheduleRecord,
    ScheduleRunRecord,
)
from ..validate import check_choice
from ._base import PgBase, struct_from_row

__all__ = ["ScheduleMixin"]

#: Outcomes ``record_schedule_run`` writes; ``requested`` rows are written by
#: ``request_schedule_runs`` only (the schema admits these five, no other).
_RECORDED_OUTCOMES = frozenset({"buffered", "started", "skipped", "missed"})


def _schedule(row: asyncpg.Record) -> ScheduleRecord:
    return ScheduleRecord(
        id=row["id"],
        spec=bytes(row["spec"]),
        action=bytes(row["action"]),
        policy=bytes(row["policy"]),
        note=row["note"],
        paused=row["paused"],
        cursor_at=row["cursor_at"],
        next_fire_at=row["next_fire_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        started_count=row["started_count"],
        skipped_count=row["skipped_count"],
        missed_count=row["missed_count"],
    )


def _change(row: asyncpg.Record) -> ScheduleChangeRecord:
    def raw(name: str) -> bytes | None:
        value = row[name]
        return None if value is None else bytes(value)

    return ScheduleChangeRecord(
        schedule_id=row["schedule_id"],
        at=row["at"],
        verb=row["verb"],
        old_spec=raw("old_spec"),
        new_spec=raw("new_spec"),
        old_policy=raw("old_policy"),
        new_policy=raw("new_policy"),
        old_action=raw("old_action"),
        new_action=raw("new_action"),
        note=row["note"],
    )


class ScheduleMixin(PgBase):
    """``ScheduleStore`` verbs (see :mod:`azync_flow.store.schedules` for their contract)."""

    async def create_schedule(self, record: ScheduleRecord) -> bool:
        """Insert a schedule; False when the id exists (nothing written)."""
        row = await self._fetchrow(
            "schedule_insert",
            record.id,
            record.spec,
            record.action,
            record.policy,
            record.note,
            record.paused,
            record.cursor_at,
            record.next_fire_at,
        )
        return row is not None

    async def get_schedule(self, id: str) -> ScheduleRecord:
        """Implements ``ScheduleStore.get_schedule`` (documented there)."""
        row = await self._fetchrow("schedule_get", id)
        if row is None:
            raise NotFoundError(f"schedule {id!r}")
        return _schedule(row)

    async def list_schedules(self, limit: int = 1000) -> list[ScheduleRecord]:
        """Implements ``ScheduleStore.list_schedules`` (documented there)."""
        return [_schedule(r) for r in await self._fetch("schedule_list", limit)]

    async def due_schedules(self, limit: int = 100) -> list[ScheduleRecord]:
        """Unpaused schedules whose next fire has come, most overdue first."""
        return [_schedule(r) for r in await self._fetch("schedule_due", limit)]

    async def schedules_with_pending_runs(self) -> list[ScheduleRecord]:
        """Schedules holding a requested or buffered run."""
        return [_schedule(r) for r in await self._fetch("schedule_with_pending_runs")]

    async def pending_schedule_runs(self, schedule_id: str) -> list[ScheduleRunRecord]:
        """Implements ``ScheduleStore.pending_schedule_runs`` (documented there)."""
        return [
            struct_from_row(ScheduleRunRecord, r)
            for r in await self._fetch("schedule_runs_pending", schedule_id)
        ]

    async def request_schedule_runs(
        self,
        schedule_id: str,
        runs: Sequence[tuple[datetime, datetime, uuid.UUID]],
        overlap: str | None = None,
    ) -> int:
        """Implements ``ScheduleStore.request_schedule_runs`` (documented there)."""
        rows = await self._fetch(
            "schedule_runs_request",
            schedule_id,
            [n for n, _, _ in runs],
            [f for _, f, _ in runs],
            [r for _, _, r in runs],
            overlap,
        )
        return len(rows)

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
        """``ScheduleStore.update_schedule``: replace spec, action and policy,
        move the cursor forward and record the edit."""
        await self._must(
            "schedule_update",
            id,
            spec,
            action,
            policy,
            cursor_at,
            next_fire_at,
            note,
            what=f"schedule {id!r}",
        )

    async def advance_schedule(
        self, id: str, cursor_at: datetime, next_fire_at: datetime | None
    ) -> bool:
        """Move the cursor forward; False when gone or already later."""
        return await self._fetchrow("schedule_advance", id, cursor_at, next_fire_at) is not None

    async def set_schedule_paused(
        self, id: str, paused: bool, note: str, cursor_at: datetime, next_fire_at: datetime | None
    ) -> None:
        """Pause or unpause. Raises NotFoundError: no schedule ``id``."""
        await self._must(
            "schedule_set_paused",
            id,
            paused,
            note,
            cursor_at,
            next_fire_at,
            what=f"schedule {id!r}",
        )

    async def delete_schedule(self, id: str) -> None:
        """Delete it and its ledger. Raises NotFoundError: no schedule ``id``."""
        await self._must("schedule_delete", id, what=f"schedule {id!r}")

    async def record_schedule_run(
        self,
        schedule_id: str,
        nominal_at: datetime,
        fire_at: datetime,
        run_id: uuid.UUID,
        outcome: str,
    ) -> str | None:
        """Record one nominal time's outcome; None when already final.

        Raises:
            ValueError: ``outcome`` is not ``buffered``, ``started``,
                ``skipped`` or ``missed``; nothing written.
        """
        check_choice(outcome, "schedule run outcome", _RECORDED_OUTCOMES)
        value: str | None = await self._fetchval(
            "schedule_run_record", schedule_id, nominal_at, fire_at, run_id, outcome
        )
        return value

    async def schedule_run(
        self, schedule_id: str, nominal_at: datetime
    ) -> ScheduleRunRecord | None:
        """Implements ``ScheduleStore.schedule_run`` (documented there)."""
        row = await self._fetchrow("schedule_run_get", schedule_id, nominal_at)
        return None if row is None else struct_from_row(ScheduleRunRecord, row)

    async def recent_schedule_runs(
        self, schedule_id: str, limit: int, outcomes: Sequence[str] | None = None
    ) -> list[ScheduleRunRecord]:
        """Ledger rows, newest nominal time first."""
        rows = await self._fetch(
            "schedule_runs_recent",
            schedule_id,
            limit,
            None if outcomes is None else list(outcomes),
        )
        return [struct_from_row(ScheduleRunRecord, r) for r in rows]

    async def last_started_schedule_run(self, schedule_id: str) -> ScheduleRunRecord | None:
        """The run started last (start order, not nominal order), if any."""
        row = await self._fetchrow("schedule_run_last_started", schedule_id)
        return None if row is None else struct_from_row(ScheduleRunRecord, row)

    async def record_schedule_missed(
        self,
        schedule_id: str,
        first_nominal_at: datetime,
        last_nominal_at: datetime,
        count: int,
        count_exact: bool,
        reason: str,
    ) -> bool:
        """Record a missed range once; False when it was recorded already."""
        row = await self._fetchrow(
            "schedule_missed_record",
            schedule_id,
            first_nominal_at,
            last_nominal_at,
            count,
            count_exact,
            reason,
        )
        return row is not None

    async def recent_schedule_missed(
        self, schedule_id: str, limit: int
    ) -> list[ScheduleMissedRecord]:
        """Implements ``ScheduleStore.recent_schedule_missed`` (documented there)."""
        return [
            struct_from_row(ScheduleMissedRecord, r)
            for r in await self._fetch("schedule_missed_recent", schedule_id, limit)
        ]

    async def recent_schedule_changes(
        self, schedule_id: str, limit: int
    ) -> list[ScheduleChangeRecord]:
        """Edits of the schedule, newest first."""
        return [
            _change(r) for r in await self._fetch("schedule_changes_recent", schedule_id, limit)
        ]
