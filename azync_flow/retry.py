"""Retry policy shared by activities (and usable by queue jobs).

A :class:`RetryPolicy` decides, after a failed attempt, whether another attempt
is allowed and how long to wait before it. Delays grow geometrically:
``initial_interval * backoff_coefficient ** (attempt - 1)``, capped at
``maximum_interval``.
"""

from __future__ import annotations

from datetime import timedelta

import msgspec

__all__ = ["RetryPolicy"]


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How a failed activity attempt is retried.

    Attributes:
        initial_interval: delay before the second attempt.
        backoff_coefficient: multiplier applied to the delay after each attempt (>= 1).
        maximum_interval: cap on a single delay; ``None`` means 100x ``initial_interval``.
        maximum_attempts: total attempts including the first; 0 means unlimited.
        non_retryable_error_types: exception class names (``type(exc).__name__``)
            that fail the activity at once, without spending the budget.
    """

    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    maximum_interval: timedelta | None = None
    maximum_attempts: int = 3
    non_retryable_error_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.initial_interval < timedelta(0):
            raise ValueError("initial_interval must not be negative")
        if self.backoff_coefficient < 1.0:
            raise ValueError("backoff_coefficient must be >= 1")
        if self.maximum_attempts < 0:
            raise ValueError("maximum_attempts must be >= 0 (0 = unlimited)")

    def delay_for(self, attempt: int) -> timedelta:
        """Return the wait before the attempt after ``attempt`` (1-based) failed."""
        cap = self.maximum_interval or self.initial_interval * 100
        exponent = max(attempt - 1, 0)
        seconds = self.initial_interval.total_seconds() * self.backoff_coefficient**exponent
        return min(timedelta(seconds=min(seconds, cap.total_seconds())), cap)

    def should_retry(self, attempt: int, error_type: str) -> bool:
        """Return True when attempt ``attempt`` (1-based) failing with ``error_type``
        leaves budget for another attempt."""
        if error_type in self.non_retryable_error_types:
            return False
        return self.maximum_attempts == 0 or attempt < self.maximum_attempts
