"""The movable clock: what the store reads as "now" in tests."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

__all__ = ["MovableClock"]


class MovableClock:
    """A clock for :func:`azync_flow.store.postgres.open_store` that tests can move.

    Every statement of the store reads the time as ``coalesce($1, now())`` with
    ``$1`` from this clock, so moving it makes timers, retry backoffs and
    snoozes due (and leases expire) without waiting.

    Until :meth:`set` or :meth:`advance` is called it returns None, so the
    backend clock rules. ``advance`` starts from the real UTC time. Once set,
    the clock stands still unless :attr:`flowing` is True: then it runs at
    real speed from the last time it was set (time ordering between
    statements is kept, as on a real clock).

    Args:
        flowing: run at real speed between moves (see above).
    """

    def __init__(self, *, flowing: bool = False) -> None:
        self._now: datetime | None = None
        self._set_at = 0.0
        self.flowing = flowing

    def __call__(self) -> datetime | None:
        if self._now is None or not self.flowing:
            return self._now
        return self._now + timedelta(seconds=time.monotonic() - self._set_at)

    def set(self, when: datetime | None) -> None:
        """Move the clock to ``when`` (UTC-aware), or None to return to the backend clock.

        Raises:
            ValueError: ``when`` is naive.
        """
        if when is not None and when.tzinfo is None:
            raise ValueError("MovableClock needs a timezone-aware datetime (UTC)")
        self._now = when
        self._set_at = time.monotonic()

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta`` and return the new time."""
        when = (self() or datetime.now(UTC)) + delta
        self.set(when)
        return when
