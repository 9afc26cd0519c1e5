"""Run ``@subscriber`` handlers on a :class:`azync_flow.worker.Worker`.

Each subscriber is one lease loop of source ``event`` (kind = subscriber
name). A delivery is settled like a queue job (:class:`QueueRunner`): returning
acks it, raising retries it per the subscriber's :class:`RetryPolicy` and
dead-letters it once the budget is spent. The event maintenance of the worker
(promote retries that are due, reap expired leases, vacuum) and the ledger's
retention run on the event maintenance leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from ..runtime.job_tracing import job_span_interceptor
from ..store.types import DequeueParams, Job, Source, Subscriber
from ..worker._lease import LeaseHandle
from ..worker._maintenance import DEFAULT_LEADERSHIP
from ..worker._queue import JobContext, QueueHandler, QueueRunner
from ._publish import publish_once
from ._subscriber import SubscriberDefinition

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ..client import Client
    from ..worker import Worker

__all__ = [
    "EventContext",
    "SubscriberBinding",
    "attach_subscribers",
    "register_subscribers",
]

log = logging.getLogger("azync_flow.events")

#: How many events one retention pass removes at most.
RETAIN_BATCH = 1000


class _SubscriberStore(Protocol):
    async def register_subscriber(self, sub: Subscriber) -> None: ...


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
    _binding: SubscriberBinding = field(repr=False)
    _published: list[int] = field(default_factory=list, repr=False)

    @property
    def client(self) -> Client:
        """A :class:`~azync_flow.client.Client` on the worker's store (to start
        or signal workflows from an event)."""
        return self._binding.client

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
            self._binding.store,
            self.id,
            len(self._published),
            event_type,
            payload,
            key=key,
            meta=meta,
        )


class EventRunner(QueueRunner):
    """Settles deliveries exactly as queue jobs are settled; the payload comes
    from the ledger and handlers get an :class:`EventContext`."""

    def __init__(self, binding: SubscriberBinding) -> None:
        super().__init__(binding.store, binding.handlers, binding.worker.acks)
        self.binding = binding

    def payload_bytes(self, job: Job) -> bytes:
        if job.event is None:
            raise msgspec.DecodeError(
                f"the event {job.event_id} of this delivery is not in the ledger"
            )
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
            _binding=self.binding,
        )


class SubscriberBinding:
    """The subscribers of one worker: their loops, registration and retention.

    Create it with :func:`attach_subscribers` before the worker starts.
    """

    def __init__(
        self,
        worker: Worker,
        subscribers: Iterable[SubscriberDefinition],
        *,
        keep: timedelta = timedelta(days=7),
        trace: bool = False,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.worker = worker
        self.store: Any = worker.store
        self.keep = keep
        self.handlers: dict[str, QueueHandler] = {}
        self.subscribers: list[SubscriberDefinition] = []
        self.registered = False
        self._register_lock = asyncio.Lock()
        self._client: Client | None = None
        runner = EventRunner(self)
        if trace:
            runner.interceptors.append(job_span_interceptor(self, tracer_provider))
        for sub in subscribers:
            if sub.name in self.handlers:
                raise ValueError(f"subscriber {sub.name!r} is attached twice")
            policy = sub.retry or worker.retry
            spec = QueueHandler.build(
                sub.name,
                sub.fn,
                concurrency=sub.concurrency or worker.concurrency,
                max_attempts=sub.max_attempts or policy.maximum_attempts or worker.max_attempts,
                retry=policy,
                lease=sub.lease or worker.lease,
                payload_type=sub.payload_type,
            )
            worker.add_loop(
                Source.EVENT,
                sub.name,
                runner,
                concurrency=spec.concurrency,
                lease=spec.lease,
                default_max_attempts=spec.max_attempts,
                dequeue=self._dequeue_for(spec),
            )
            self.handlers[sub.name] = spec
            self.subscribers.append(sub)
        worker.maintain_source(Source.EVENT)
        # A second attach on the same worker keeps the first one's retention step.
        with contextlib.suppress(ValueError):
            worker.add_maintenance(
                self.retain,
                name="event.retain",
                interval=worker.vacuum_interval,
                leadership=f"{DEFAULT_LEADERSHIP}.{Source.EVENT}",
            )
        for sub in self.subscribers:
            log.info("subscriber %s registered for events %r", sub.name, sub.event_type)

    @property
    def client(self) -> Client:
        if self._client is None:
            from ..client import Client

            self._client = Client(self.store)
        return self._client

    async def register(self) -> None:
        """Record every subscription in the store (idempotent; the worker does
        it before its first lease). Only events published after a subscriber's
        registration are delivered to it."""
        await register_subscribers(
            self.store,
            self.subscribers,
            max_attempts={name: h.max_attempts for name, h in self.handlers.items()},
        )
        self.registered = True

    def _dequeue_for(self, spec: QueueHandler) -> Any:
        async def dequeue(limit: int, lease: timedelta) -> list[Job]:
            if not self.registered:
                async with self._register_lock:  # every loop's first lease waits for one
                    if not self.registered:
                        await self.register()
            jobs: list[Job] = await self.store.dequeue_batch(
                Source.EVENT,
                DequeueParams(
                    kind=spec.kind,
                    limit=limit,
                    lease=lease,
                    default_max_attempts=spec.max_attempts,
                ),
            )
            return jobs

        return dequeue

    async def retain(self) -> int:
        """The retention step: delete events older than ``keep`` whose
        deliveries are all terminal (succeeded, dead, skipped, cancelled); an
        event with a delivery still to run is kept however old.

        Returns:
            0 (removing events makes no work runnable); the count is logged.
        """
        now = self.store.now() if hasattr(self.store, "now") else None
        cutoff = (now or datetime.now(UTC)) - self.keep
        removed = int(await self.store.retain(cutoff, RETAIN_BATCH))
        if removed:
            log.debug("event retention removed %d events older than %s", removed, cutoff)
        return 0


async def register_subscribers(
    store: _SubscriberStore,
    subscribers: Iterable[SubscriberDefinition],
    *,
    max_attempts: Mapping[str, int] | None = None,
) -> None:
    """Record subscriptions in the store without running them (at deploy time,
    so events published before the first worker starts are delivered too).

    Args:
        store: the store.
        subscribers: ``@subscriber`` definitions.
        max_attempts: budget per subscriber name (default: the definition's
            ``max_attempts`` or ``retry.maximum_attempts``; 0 = the worker's).
    """
    for sub in subscribers:
        budget = (max_attempts or {}).get(sub.name) or sub.max_attempts
        if budget is None:
            budget = sub.retry.maximum_attempts if sub.retry is not None else 0
        await store.register_subscriber(
            Subscriber(name=sub.name, event_type=sub.event_type, max_attempts=budget)
        )


def attach_subscribers(
    worker: Worker,
    subscribers: Iterable[SubscriberDefinition],
    *,
    keep: timedelta = timedelta(days=7),
    trace: bool = False,
    tracer_provider: TracerProvider | None = None,
) -> SubscriberBinding:
    """Run ``subscribers`` on ``worker`` (before it starts).

    Adds one lease loop per subscriber (source ``event``), the event
    maintenance (promote due retries, reap expired leases, vacuum settled
    deliveries) and the ledger retention step. The subscriptions are recorded
    in the store before the worker's first lease.

    Args:
        worker: a :class:`~azync_flow.worker.Worker` that has not started.
        subscribers: ``@subscriber`` definitions (names must be distinct).
        keep: how long events are kept after they occurred; an event with a
            delivery not yet terminal is kept longer, until it is. (Attaching
            twice to one worker: the first call's ``keep`` applies.)
        trace: record each delivery attempt as a ``job <subscriber>`` span, a
            child of the publisher's span (its trace context rides in the
            event's meta), with the outcome (as ``Worker.trace_jobs``).
        tracer_provider: where those spans go (None: the global provider).

    Returns:
        The binding (its ``register()`` and ``retain()`` are useful in tests).

    Raises:
        TypeError: a handler is not an async function of 1 or 2 arguments.
        ValueError: a name is attached twice, or the worker is running.
    """
    return SubscriberBinding(
        worker, subscribers, keep=keep, trace=trace, tracer_provider=tracer_provider
    )
