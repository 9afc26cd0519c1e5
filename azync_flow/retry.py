"""Retry policy: exponential backoff with jitter, attempt budgets, non-retryable errors.

One :class:`RetryPolicy` serves every runtime that retries work — queue jobs
(:class:`azync_flow.worker.Worker`), activities and DAG tasks — so the same
knobs mean the same thing everywhere. It is a msgspec Struct, so a runtime can
persist it next to the work it governs (for example in an operation payload)
and a later attempt, on another worker, decides with the same policy.

The delay before retry ``n`` (``n`` = the attempt that just failed, 1-based)::

    base = min(initial_interval * backoff_coefficient ** (n - 1), maximum_interval)
    delay = base * uniform(1 - jitter, 1 + jitter), capped at maximum_interval

Delays are *relative*: the store adds them to the backend clock
(``Reschedule`` computes ``run_at = now() + delay`` in Postgres), so a worker
whose clock is skewed cannot shift a retry.
"""

from __future__ import annotations

import enum
import math
import random
from datetime import timedelta

import msgspec

from azync_flow._text import clean_text
from azync_flow.errors import error_message

__all__ = ["RetryDecision", "RetryPolicy", "describe_error", "error_type_names"]


class RetryDecision(enum.StrEnum):
    """What to do with a failed attempt."""

    RETRY = "retry"
    """Reschedule after :meth:`RetryPolicy.delay`."""
    DEAD = "dead"
    """The budget is spent: dead-letter the work."""
    NON_RETRYABLE = "non_retryable"
    """The error type is listed in ``non_retryable_error_types``: dead-letter now."""


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How failed attempts are retried.

    Attributes:
        initial_interval: delay before the first retry.
        backoff_coefficient: growth factor per attempt (finite, >= 1.0).
        maximum_interval: cap of any single delay (jitter included). ``None``
            means 100 x ``initial_interval``.
        maximum_attempts: total attempts including the first, used when the
            work carries no durable budget of its own (queue jobs do: the
            worker stores it at the first lease, see
            ``DequeueParams.default_max_attempts``); 0 = the budget of what
            runs it: for an activity or a queue job, the leasing worker's
            ``max_attempts`` (25 by default).
        non_retryable_error_types: exception class names (``"ValueError"`` or
            fully qualified ``"mypkg.errors.Fatal"``) that dead-letter at once.
            Matched against the raised exception's whole MRO, so listing a base
            class covers its subclasses.
        jitter: relative spread of each delay, 0 <= jitter < 1; 0.2 means
            +/-20 %. Jitter keeps a burst of failures from retrying in lockstep.
    """

    initial_interval: timedelta = timedelta(seconds=1)
    backoff_coefficient: float = 2.0
    maximum_interval: timedelta | None = None
    maximum_attempts: int = 0
    non_retryable_error_types: tuple[str, ...] = ()
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.initial_interval < timedelta(0):
            raise ValueError("initial_interval must be >= 0")
        # NaN/inf would also be stored as JSON null in the operation's payload
        if not 1.0 <= self.backoff_coefficient < math.inf:
            raise ValueError("backoff_coefficient must be a finite number >= 1.0")
        if self.maximum_interval is not None and self.maximum_interval < self.initial_interval:
            raise ValueError("maximum_interval must be >= initial_interval")
        if self.maximum_attempts < 0:
            raise ValueError("maximum_attempts must be >= 0 (0 = the caller's budget)")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError("jitter must be in [0, 1)")

    @property
    def cap(self) -> timedelta:
        """The effective ``maximum_interval``."""
        return self.maximum_interval or self.initial_interval * 100

    def base_delay(self, attempt: int) -> timedelta:
        """The un-jittered delay after failed attempt ``attempt`` (1-based)."""
        n = max(attempt, 1) - 1
        seconds = self.initial_interval.total_seconds()
        cap = self.cap.total_seconds()
        # A huge attempt number overflows the float power: that is the cap anyway.
        try:
            raw = seconds * self.backoff_coefficient**n
        except OverflowError:
            raw = cap
        return timedelta(seconds=min(raw, cap))

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """The jittered delay after failed attempt ``attempt`` (1-based), never above the cap."""
        base = self.base_delay(attempt).total_seconds()
        if self.jitter:
            base *= (rng or random).uniform(1.0 - self.jitter, 1.0 + self.jitter)
        return timedelta(seconds=min(base, self.cap.total_seconds()))

    def budget(self, durable: int) -> int:
        """Total attempts allowed: the work's ``durable`` budget, else ``maximum_attempts``.

        The budget stored with the work wins (a queue job's ``max_attempts`` is
        resolved once, at its first lease), so changing a deployed policy never
        changes the budget of work already started; 0 from both means unlimited.
        """
        return durable if durable > 0 else self.maximum_attempts

    def is_retryable(self, exc: BaseException) -> bool:
        """False when ``exc``'s type (or a base class) is listed as non-retryable."""
        if not self.non_retryable_error_types:
            return True
        listed = set(self.non_retryable_error_types)
        return not (listed & error_type_names(type(exc)))

    def decide(self, exc: BaseException, attempt: int, max_attempts: int) -> RetryDecision:
        """Decide the fate of failed attempt ``attempt`` out of ``max_attempts``.

        Args:
            exc: the error the attempt raised.
            attempt: the 1-based attempt that failed.
            max_attempts: the durable budget of the work; 0 defers to
                ``maximum_attempts`` (0 there too: unlimited).
        """
        if not self.is_retryable(exc):
            return RetryDecision.NON_RETRYABLE
        budget = self.budget(max_attempts)
        if budget > 0 and attempt >= budget:
            return RetryDecision.DEAD
        return RetryDecision.RETRY


def error_type_names(tp: type[BaseException]) -> set[str]:
    """Simple and qualified names of ``tp`` and its bases (for non-retryable matching)."""
    names: set[str] = set()
    for cls in tp.__mro__:
        names.add(cls.__name__)
        names.add(f"{cls.__module__}.{cls.__qualname__}")
    return names


def describe_error(exc: BaseException, *, limit: int = 8192) -> str:
    """``"<Type>: <message>"`` for recording a failure, safe to store in Postgres.

    NUL characters (which Postgres ``text`` rejects) are shown as ``\\x00`` and
    lone surrogates are backslash-escaped, so recording a failure can never
    itself fail. Long messages are cut to ``limit`` characters. The type is
    named once: an azync_flow error's ``[code]`` tag is left out.
    """
    message = error_message(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    text = clean_text(text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text
