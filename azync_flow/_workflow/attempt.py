"""The running activity attempt as activity code sees it: ``current_activity()``."""

from __future__ import annotations

import abc
import contextlib
import contextvars
import uuid
from collections.abc import Iterator
from typing import Any

from azync_flow.store.queue import Job

__all__ = ["ActivityInfo", "activity_context", "current_activity"]

_current: contextvars.ContextVar[ActivityInfo | None] = contextvars.ContextVar(
    "azync_activity", default=None
)


class ActivityInfo(abc.ABC):
    """What a running activity can learn about its attempt (``current_activity()``).

    The worker's activity runtime (and ``azync_flow.testing.ActivityEnvironment``)
    provide the implementation.

    Attributes:
        job: the operation job of this attempt.
        workflow_id: the execution that called the activity.
        seq: the history seq of the call (``<workflow_id>/<seq>`` is the
            operation's execution key).
        attempt: this attempt's number (1-based).
        activity: the activity name.
    """

    def __init__(self, job: Job, seq: int, activity: str) -> None:
        self.job = job
        self.workflow_id = job.run_id
        self.seq = seq
        self.attempt = job.attempt
        self.activity = activity

    @abc.abstractmethod
    async def publish(
        self,
        event_type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        meta: dict[str, str] | None = None,
    ) -> uuid.UUID:
        """Publish an event to the ledger from this activity, once per
        operation: the ``n``-th call of every attempt writes the same event
        id, so a retried attempt does not publish it again. Arguments as
        ``Client.publish``.

        Returns:
            The event id.

        Raises:
            ValueError, PayloadEncodeError: as ``Client.publish``.
        """

    @abc.abstractmethod
    async def heartbeat(self) -> None:
        """Extend this attempt's lease (long activities call it periodically).

        With ``heartbeat_timeout`` set these calls are the only thing that
        renews the lease: an attempt silent for longer than the timeout is
        lost (reaped; retried if idempotent, else parked uncertain) and its
        task cancelled.

        Raises:
            NotFoundError / LeaseLost: the attempt no longer owns the job (or its
                heartbeat-only lease lapsed); stop.
        """


def current_activity() -> ActivityInfo | None:
    """The attempt running in this context, or None outside activities."""
    return _current.get()


@contextlib.contextmanager
def activity_context(info: ActivityInfo) -> Iterator[None]:
    """Make :func:`current_activity` return ``info`` in this context (and in tasks
    created in it): the activity runtime runs each attempt so, and
    ``azync_flow.testing.ActivityEnvironment`` does the same."""
    token = _current.set(info)
    try:
        yield
    finally:
        _current.reset(token)
