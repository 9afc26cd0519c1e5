"""``ActivityEnvironment``: run one activity in isolation, as the worker would."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azync_flow._workflow.attempt import ActivityInfo, activity_context
from azync_flow._workflow.definitions import ActivityDefinition
from azync_flow.codec import decode_value
from azync_flow.store.queue import Job, JobState, Source

__all__ = ["ActivityEnvironment", "HeartbeatRecord", "PublishedEvent"]


@dataclass(frozen=True, slots=True)
class HeartbeatRecord:
    """One ``heartbeat()`` call of the activity under test.

    Attributes:
        attempt: the attempt number the activity saw.
        at: ``time.monotonic()`` when it was made.
    """

    attempt: int
    at: float


@dataclass(frozen=True, slots=True)
class PublishedEvent:
    """One ``current_activity().publish(...)`` call of the activity under test.

    Attributes:
        id: the event id returned to the activity.
        event_type, payload, key, meta: as passed.
    """

    id: uuid.UUID
    event_type: str
    payload: Any
    key: str | None
    meta: dict[str, str] | None


class _TestActivityInfo(ActivityInfo):
    """What ``current_activity()`` returns under an :class:`ActivityEnvironment`."""

    def __init__(self, env: ActivityEnvironment, job: Job, seq: int, activity: str) -> None:
        # No store or lease behind it: heartbeats are recorded by the environment.
        super().__init__(job, seq, activity)
        self._env = env

    async def publish(
        self,
        event_type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        meta: dict[str, str] | None = None,
    ) -> uuid.UUID:
        """Record the event in the environment's ``published`` (no ledger behind it)."""
        event = PublishedEvent(uuid.uuid4(), event_type, payload, key, meta)
        self._env.published.append(event)
        return event.id

    async def heartbeat(self) -> None:
        """Record the heartbeat; then call the environment's ``on_heartbeat`` hook."""
        self._env.heartbeats.append(HeartbeatRecord(self.attempt, time.monotonic()))
        if self._env.on_heartbeat is not None:
            self._env.on_heartbeat(self._env)
        await asyncio.sleep(0)  # a cancellation injected by the hook lands here


class ActivityEnvironment:
    """Run ``@activity`` functions outside any worker, with what a worker gives them.

    The arguments and the result make the same JSON round trip as in
    production (typed by the function's annotations), ``current_activity()``
    returns an info naming this attempt, ``heartbeat()`` calls are recorded in
    :attr:`heartbeats` and ``publish()`` calls in :attr:`published`, and
    :meth:`cancel` injects the cancellation a worker
    delivers on shutdown or a lost lease (``asyncio.CancelledError`` at the
    activity's current await)::

        env = ActivityEnvironment(attempt=2)
        env.on_heartbeat = lambda env: env.cancel() if len(env.heartbeats) == 3 else None
        with pytest.raises(asyncio.CancelledError):
            await env.run(upload, "big-file")

    Args:
        attempt: the attempt number the activity sees (1 = first try).
        workflow_id: the execution the attempt belongs to (default: a random id).
        seq: the history position of its ``ActivityScheduled``.

    Attributes:
        heartbeats: every heartbeat made, in order.
        published: every event the activity published, in order.
        on_heartbeat: called with this environment after each heartbeat.
    """

    def __init__(
        self, *, attempt: int = 1, workflow_id: uuid.UUID | None = None, seq: int = 1
    ) -> None:
        if attempt < 1:
            raise ValueError(f"attempt must be >= 1, got {attempt}")
        self.attempt = attempt
        self.workflow_id = workflow_id or uuid.uuid4()
        self.seq = seq
        self.heartbeats: list[HeartbeatRecord] = []
        self.published: list[PublishedEvent] = []
        self.on_heartbeat: Callable[[ActivityEnvironment], Any] | None = None
        self._task: asyncio.Task[bytes] | None = None

    async def run(self, activity: Any, *args: Any) -> Any:
        """Run one attempt of ``activity`` with ``args`` and return its decoded result.

        Args:
            activity: an ``@activity`` definition.
            *args: its arguments (encoded and decoded as for a durable call).

        Returns:
            The result, decoded to the function's return annotation.

        Raises:
            TypeError: ``activity`` is not an ``@activity`` definition.
            asyncio.CancelledError: :meth:`cancel` was called and the activity
                let the cancellation propagate.
            Exception: whatever the activity raised.
        """
        if not isinstance(activity, ActivityDefinition):
            raise TypeError(f"ActivityEnvironment.run needs an @activity, got {activity!r}")
        data = activity.encode_args(args, {})
        job = Job(
            id=uuid.uuid4(),
            source=Source.WORKFLOW,
            kind=activity.kind,
            state=JobState.ACTIVE,
            attempt=self.attempt,
            run_id=self.workflow_id,
        )
        info = _TestActivityInfo(self, job, self.seq, activity.name)
        with activity_context(info):
            self._task = asyncio.create_task(activity.run(data))
        try:
            raw = await self._task
        finally:
            self._task = None
        return decode_value(raw, activity.return_type, f"result of activity {activity.name!r}")

    def cancel(self) -> None:
        """Cancel the running attempt (as a worker shutdown or a lost lease would).

        Raises:
            RuntimeError: no activity is running.
        """
        if self._task is None:
            raise RuntimeError("no activity is running in this environment")
        self._task.cancel()
