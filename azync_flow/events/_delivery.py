"""One delivery of a ledger event to a subscriber: its context and its runner.

A delivery is settled like a queue job (:class:`QueueRunner`): returning acks
it, raising retries it per the subscriber's :class:`RetryPolicy` and
dead-letters it once the budget is spent.

A transactional subscriber's handler runs inside the transaction that acks
its delivery (``store.delivery_transaction``): its statements on
``ctx.connection`` and the ack commit together. A serialization failure or
deadlock runs the handler again at once (same attempt); any other exception
leaves the transaction (rolled back) and is settled as above.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from azync_flow._publish import publish_once
from azync_flow._transient import MAX_CONFLICT_RERUNS, is_transient
from azync_flow.client import Client
from azync_flow.errors import PayloadError, is_not_found
from azync_flow.store.events import TransactionalEventConsumer, TransactionIsolation
from azync_flow.store.queue import Job
from azync_flow.store.workflows import WorkflowClientStore
from azync_flow.worker import JobContext, LeaseHandle, QueueHandler, QueueRunner, Worker

__all__ = ["EventContext", "EventRunner"]

log = logging.getLogger("azync_flow.events")


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
    _connection: Any = field(default=None, repr=False)

    @property
    def connection(self) -> Any:
        """The asyncpg connection inside the transaction that acks this delivery
        (a ``transactional=True`` subscriber only): write the handler's effects
        on it to commit them with the ack. Do not commit, roll back or close it.

        Raises:
            RuntimeError: the subscriber is not transactional.
        """
        if self._connection is None:
            raise RuntimeError(
                f"subscriber {self.subscriber!r} is not transactional: declare it with "
                "@subscriber(..., transactional=True) to get ctx.connection"
            )
        return self._connection

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

    def __init__(
        self,
        worker: Worker,
        handlers: dict[str, QueueHandler],
        transactional: Mapping[str, TransactionIsolation] | None = None,
    ) -> None:
        super().__init__(worker.store, handlers, worker.acks)
        store = worker.store
        if not isinstance(store, WorkflowClientStore):
            raise TypeError("the worker's store does not implement WorkflowClientStore")
        #: The worker's store as a client's (the ledger's verbs among them).
        self.ledger = store
        self._client: Client | None = None
        #: Isolation level of each transactional subscriber, by name (filled
        #: by the binding as subscribers are attached).
        self.transactional: dict[str, TransactionIsolation] = dict(transactional or {})
        #: Open delivery transactions' connections, and deliveries acked in them.
        self._connections: dict[uuid.UUID, Any] = {}
        self._acked: set[uuid.UUID] = set()

    async def _invoke(
        self, handler: QueueHandler, job: Job, payload: Any, lease: LeaseHandle
    ) -> None:
        isolation = self.transactional.get(job.kind)
        if isolation is None:
            await super()._invoke(handler, job, payload, lease)
            return
        store = self.ledger
        if not isinstance(store, TransactionalEventConsumer):
            raise TypeError("the worker's store does not implement TransactionalEventConsumer")
        reruns = 0
        while True:
            try:
                await self._in_transaction(store, handler, job, payload, lease, isolation)
                return
            except Exception as err:
                if not is_transient(err) or reruns >= MAX_CONFLICT_RERUNS:
                    raise
                log.info("delivery %s rolled back by a conflict; running it again", job.id)
                await asyncio.sleep(random.uniform(0, min(0.5, 0.005 * 2**reruns)))
                reruns += 1

    async def _in_transaction(
        self,
        store: TransactionalEventConsumer,
        handler: QueueHandler,
        job: Job,
        payload: Any,
        lease: LeaseHandle,
        isolation: TransactionIsolation,
    ) -> None:
        """One run of the handler in the delivery's transaction, acked in it.
        The handler's error is raised after the block (rolled back), untouched
        by the store's error translation."""
        failure: BaseException | None = None
        try:
            async with store.delivery_transaction(job.id, lease.token, isolation=isolation) as tx:
                self._connections[job.id] = tx.connection
                try:
                    await super()._invoke(handler, job, payload, lease)
                except BaseException as err:
                    failure = err
                else:
                    await tx.ack()
                    self._acked.add(job.id)
        except Exception as err:
            if failure is None and is_not_found(err):  # lease taken: nothing written
                lease.lost = True
                log.info("delivery %s: lease lost, rolled back: %s", job.id, err)
                return
            raise
        finally:
            self._connections.pop(job.id, None)
        if failure is not None:
            raise failure

    async def _ack(self, job: Job, lease: LeaseHandle) -> None:
        if job.id in self._acked:
            self._acked.discard(job.id)  # acked with the handler's transaction
            return
        await super()._ack(job, lease)

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
            _connection=self._connections.get(job.id),
        )
