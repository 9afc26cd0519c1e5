"""Helpers of the schedule store tests: a fixed start instant and a schedule record."""

from __future__ import annotations

from datetime import UTC, datetime

from azync_flow.store.schedules import ScheduleRecord

T0 = datetime(2024, 6, 1, tzinfo=UTC)


def record(sid: str, next_fire: datetime | None) -> ScheduleRecord:
    return ScheduleRecord(
        id=sid,
        spec=b'{"cron":["0 * * * *"]}',
        action=b'{"type":"job","kind":"k"}',
        policy=b"{}",
        note="",
        paused=False,
        cursor_at=T0,
        next_fire_at=next_fire,
        created_at=T0,
        updated_at=T0,
    )
