"""One delivery of a ledger event to a subscriber: its context and its runner.

A delivery is settled like a queue job (:class:`QueueRunner`): returning acks
it, raising retries it per the subscriber's :class:`RetryPolicy` and
dead-letters it once the budget is spent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from azync_flow._publish import publish_once
from azync_flow.client import Client
from azync_flow.errors import PayloadError
from azync_flow.store.queue import Job
from azync_flow.store.workflows import WorkflowClientStore
from azync_flow.worker import JobContext, LeaseHandle, QueueHandler, QueueRunner, Worker

__all__ = ["EventContext", "EventRunner"]


@dataclass(frozen=True, slots=True)
class EventContext(JobContext):
    """What a subscriber knows about the delivery it handles (a :class:`JobContext`).

    Attributes:
        event_id: the ledger event's id (stable across retries and replays:
            use it to make the handler's effects idempotent).
        event_type: the event's type.
        key: what the event is about (``publish(..., key=...)``), ``""`` if none.
        occurred_at: when the event was published (backend clock, UTC).
        replay: True for a delivery re-created by an operator's replay.
        subscriber: this subscriber's name.
    """

    event_id: uuid.UUID
    event_type: str
    key: str
    occurred_at: datetime
    replay: bool
    subscriber: str
    _runner: EventRunner = field(repr=False)
    _published: list[int] = field(default_factory=list, repr=False)

    @property
    def client(self) -> Client:
        """A :class:`~azync_flow.client.Client` on the worker's store (to start
        or signal workflows from an event)."""
        return self._runner.client

    async def publish(
        self,
        event_type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> uuid.UUID:
        """Publish a follow-up event, once per delivery: the ``n``-th call of
        every attempt of this delivery writes the same event id, so a retried
        attempt does not publish it twice. Arguments as ``Client.publish``.

        Returns:
            The event id.

        Raises:
            ValueError, PayloadEncodeError: as ``Client.publish``.
        """
        self._published.append(1)
        return await publish_once(
            self._runner.ledger,
            self.id,
            len(self._published),
            event_type,
            payload,
            key=key,
            meta=meta,
        )


class EventRunner(QueueRunner):
    """Settles deliveries exactly as queue jobs are settled; the payload comes
    from the ledger and handlers get an :class:`EventContext`.

    Args:
        worker: the worker running the deliveries (its store and acks).
        handlers: the subscribers' handlers by subscriber name.
    """

    def __init__(self, worker: Worker, handlers: dict[str, QueueHandler]) -> None:
        super().__init__(worker.store, handlers, worker.acks)
        store = worker.store
        if not isinstance(store, WorkflowClientStore):
            raise TypeError("the worker's store does not implement WorkflowClientStore")
        #: The worker's store as a client's (the ledger's verbs among them).
        self.ledger = store
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        """A client on the worker's store, made on first use."""
        if self._client is None:
            self._client = Client(self.ledger)
        return self._client

    def payload_bytes(self, job: Job) -> bytes:
        if job.event is None:
            raise PayloadError(f"the event {job.event_id} of this delivery is not in the ledger")
        return job.event.payload

    def context(self, job: Job, lease: LeaseHandle) -> EventContext:
        ev = job.event
        occurred = ev.occurred_at if ev is not None else None
        return EventContext(
            id=job.id,
            kind=job.kind,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            meta=ev.meta if ev is not None else job.meta,
            job=job,
            _lease=lease,
            event_id=job.event_id or uuid.UUID(int=0),
            event_type=ev.type if ev is not None else "",
            key=ev.aggregate_id if ev is not None else "",
            occurred_at=occurred or job.enqueued_at or datetime.now(UTC),
            replay=job.replay,
            subscriber=job.kind,
            _runner=self,
        )
