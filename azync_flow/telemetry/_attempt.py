"""The span of one attempt, usable with ``with`` and ``async with``."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextvars import Token
from datetime import timedelta
from types import TracebackType
from typing import Any, Self

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from azync_flow.errors import error_message
from azync_flow.telemetry._names import (
    ATTR_EVENTS_REPLAYED,
    ATTR_HISTORY_LENGTH,
    ATTR_NEW_COMMANDS,
    ATTR_OUTCOME,
    ATTR_RETRY_DELAY_S,
    AttemptOutcome,
)

#: ``(outcome, seconds)`` when an attempt span ends (its metrics; see ``azync_flow._metrics``).
#: ``outcome`` is the recorded outcome, ``error`` when an exception escaped without
#: one, ``unsettled`` when there is neither; ``seconds`` None for a lost attempt.
AttemptRecorder = Callable[[str, "float | None"], None]


def _seconds(delay: timedelta | float) -> float:
    return delay.total_seconds() if isinstance(delay, timedelta) else float(delay)


class AttemptSpan:
    """One attempt's span: a context manager usable with ``with`` and ``async with``.

    While the block runs the span is the current span (its context is
    attached), so spans that the handler creates are its children. On leaving
    the block the context is detached and the span ended; an exception leaving
    the block is recorded (error status, ``exception`` event) and re-raised.

    Create it with :meth:`RunTracer.attempt_span`; do not reuse an instance.
    """

    __slots__ = (
        "_abandoned",
        "_ctx",
        "_failed_with",
        "_outcome",
        "_recorder",
        "_span",
        "_started",
        "_token",
    )

    def __init__(
        self,
        span: trace.Span,
        parent: otel_context.Context,
        recorder: AttemptRecorder | None = None,
        *,
        timed: bool = True,
    ) -> None:
        self._span = span
        self._recorder = recorder
        self._started = time.perf_counter() if timed else None
        self._ctx = trace.set_span_in_context(span, parent)
        self._token: Token[otel_context.Context] | None = None
        self._failed_with: BaseException | None = None
        self._abandoned = False
        self._outcome: AttemptOutcome | None = None

    @property
    def span(self) -> trace.Span:
        """The underlying OpenTelemetry span (non-recording when tracing is off)."""
        return self._span

    @property
    def context(self) -> otel_context.Context:
        """Context with this span current; attach it in a thread that runs the handler.

        ``loop.run_in_executor`` does not copy context variables; use
        ``asyncio.to_thread`` or ``contextvars.copy_context().run`` inside the
        block, or ``opentelemetry.context.attach(span.context)`` in the thread.
        """
        return self._ctx

    def set_outcome(
        self, outcome: AttemptOutcome, *, retry_delay: timedelta | float | None = None
    ) -> None:
        """Record how the attempt ended.

        Args:
            outcome: The attempt's outcome; set it once, after the store settled
                the attempt (ack, reschedule, dead, snooze, skip, mark uncertain).
            retry_delay: For ``RETRIED`` (or ``SNOOZED``), the delay before the
                next attempt; ``timedelta`` or seconds. Recorded as
                ``azync.retry_delay_s`` (float seconds).
        """
        self._outcome = outcome
        self._span.set_attribute(ATTR_OUTCOME, outcome.value)
        if retry_delay is not None:
            self._span.set_attribute(ATTR_RETRY_DELAY_S, _seconds(retry_delay))

    def record_failure(
        self, exc: BaseException, *, attributes: Mapping[str, Any] | None = None
    ) -> None:
        """Mark the attempt failed: error status plus an ``exception`` event.

        Args:
            exc: The exception the handler raised; the event carries its type,
                message and stack trace. Recorded once even if it also leaves the
                block.
            attributes: Extra attributes for the exception event.
        """
        if self._failed_with is exc:
            return
        self._failed_with = exc
        self._span.record_exception(exc, attributes=dict(attributes or {}))
        message = error_message(exc)
        name = type(exc).__name__
        self._span.set_status(Status(StatusCode.ERROR, f"{name}: {message}" if message else name))

    def set_pass_stats(
        self, *, history_length: int, events_replayed: int, new_commands: int
    ) -> None:
        """Record replay statistics of a workflow task (pass).

        Args:
            history_length: Events in the history when the pass started.
            events_replayed: History events the pass matched while replaying.
            new_commands: Commands the pass appended (activities scheduled,
                timers started, completion, ...).
        """
        self._span.set_attribute(ATTR_HISTORY_LENGTH, history_length)
        self._span.set_attribute(ATTR_EVENTS_REPLAYED, events_replayed)
        self._span.set_attribute(ATTR_NEW_COMMANDS, new_commands)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set one extra attribute on the span."""
        self._span.set_attribute(key, value)

    def add_event(self, name: str, attributes: Mapping[str, AttributeValue] | None = None) -> None:
        """Add a span event (e.g. ``signal.consumed`` during a pass)."""
        self._span.add_event(name, attributes=dict(attributes or {}))

    @property
    def outcome(self) -> AttemptOutcome | None:
        """The outcome recorded with :meth:`set_outcome`; None while there is none."""
        return self._outcome

    def abandon(self) -> None:
        """Do not export this span: the attempt lost its lease, and whoever took
        the job over (the reaper, with ERROR ``lease expired``) records the
        attempt instead. Exporting it too would show the attempt twice, and a
        worker that was frozen past the run's end would end it after the run span.
        """
        self._abandoned = True

    def __enter__(self) -> Self:
        self._token = otel_context.attach(self._ctx)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is not None:
                self.record_failure(exc)
        finally:
            if self._token is not None:
                otel_context.detach(self._token)
                self._token = None
            if not self._abandoned:
                self._span.end()
                self._record(exc is not None)

    def _record(self, raised: bool) -> None:
        if self._recorder is None:
            return
        if self._outcome is not None:
            outcome = self._outcome.value
        else:
            outcome = "error" if raised or self._failed_with is not None else "unsettled"
        started = self._started
        self._recorder(outcome, None if started is None else time.perf_counter() - started)

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)
