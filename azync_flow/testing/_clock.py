"""The movable clock: what the store reads as "now" in tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["MovableClock"]


class MovableClock:
    """A clock for :func:`azync_flow.store.postgres.open_store` that tests can move.

    Every statement of the store reads the time as ``coalesce($1, now())`` with
    ``$1`` from this clock, so moving it makes timers, retry backoffs and
    snoozes due (and leases expire) without waiting.

    Until :meth:`set` or :meth:`advance` is called it returns None, so the
    backend clock rules. ``advance`` starts from the real UTC time.
    """

    def __init__(self) -> None:
        self._now: datetime | None = None

    def __call__(self) -> datetime | None:
        return self._now

    def set(self, when: datetime | None) -> None:
        """Pin the clock to ``when`` (UTC-aware), or None to return to the backend clock.

        Raises:
            ValueError: ``when`` is naive.
        """
        if when is not None and when.tzinfo is None:
            raise ValueError("MovableClock needs a timezone-aware datetime (UTC)")
        self._now = when

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta`` and return the new time."""
        self._now = (self._now or datetime.now(UTC)) + delta
        return self._now
