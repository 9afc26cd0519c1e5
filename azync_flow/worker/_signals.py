"""Control-flow signals a queue handler raises to settle its job other than by ack or failure.

They derive from ``BaseException`` so a handler's ``except Exception`` cannot
swallow them by accident.
"""

from __future__ import annotations

from datetime import timedelta

__all__ = ["Skip", "Snooze"]


class Snooze(BaseException):
    """Park the job and re-check after ``delay`` (contract ``Snooze``).

    The lease's attempt is given back, so snoozing never spends the retry
    budget (scenario C17). A job with a snooze budget is dead-lettered with
    ``SnoozeDeadlineExceeded`` once a snooze is settled past its deadline.

    Args:
        delay: how long to wait, from the backend clock's now.
    """

    def __init__(self, delay: timedelta) -> None:
        if delay < timedelta(0):
            raise ValueError("snooze delay must be >= 0")
        super().__init__(delay)
        self.delay = delay


class Skip(BaseException):
    """Settle the job as skipped: terminal, no retry, ``reason`` kept as its last error."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
