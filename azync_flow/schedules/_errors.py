"""Errors of the schedules API (part of the ``AzyncError`` tree)."""

from __future__ import annotations

from azync_flow.store.errors import AzyncError, ConflictError

__all__ = ["ScheduleError", "ScheduleExistsError", "ScheduleSpecError"]


class ScheduleError(AzyncError):
    """Base of errors about a schedule (unknown id, unusable action)."""

    code = "schedule"


class ScheduleSpecError(ScheduleError, ValueError):
    """A schedule spec or time argument is invalid: a bad cron expression, an
    unknown IANA time zone, a naive datetime, a non-positive interval, an end
    before the start. Nothing is stored. Also a ``ValueError``."""

    code = "schedule_spec"


class ScheduleExistsError(ScheduleError, ConflictError):
    """A schedule with this id exists (delete it first). Also a ``ConflictError``."""

    code = "schedule_exists"
