"""Run ``@subscriber`` handlers on a :class:`azync_flow.worker.Worker`.

Each subscriber is one lease loop of source ``event`` (kind = subscriber
name) whose deliveries run through :class:`EventRunner`. The event maintenance of the worker
(promote retries that are due, reap expired leases, vacuum) and the ledger's
retention run on the event maintenance leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from azync_flow.store.admin import StoreClock
from azync_flow.store.events import EventConsumer, EventMaintenance, Subscriber
from azync_flow.store.queue import DequeueParams, Job, QueueConsumer, Source
from azync_flow.telemetry import flush_spans_on_stop, job_span_interceptor
from azync_flow.worker import DEFAULT_LEADERSHIP, QueueHandler, Worker

from ._delivery import EventContext, EventRunner
from ._subscriber import SubscriberDefinition

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["EventContext", "SubscriberBinding", "register_subscribers"]

log = logging.getLogger("azync_flow.events")

#: Events one retention statement removes at most, and statements per pass.
RETAIN_BATCH = 1000
RETAIN_ROUNDS = 10


@runtime_checkable
class SubscriberStore(QueueConsumer, EventConsumer, EventMaintenance, StoreClock, Protocol):
    """The roles a worker running subscribers needs: lease deliveries, record
    subscriptions, and retain the ledger on the store's clock."""


class SubscriberBinding:
    """The subscribers of one worker: their loops, registration and retention.

    Built by ``attach_subscribers(worker, subscribers, ...)`` before the worker
    starts (see there for the arguments).
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
        store = worker.store
        if not isinstance(store, SubscriberStore):
            raise TypeError(
                "the worker's store does not implement SubscriberStore (the event roles)"
            )
        self.store: SubscriberStore = store
        self.keep = keep
        self.handlers: dict[str, QueueHandler] = {}
        self.subscribers: list[SubscriberDefinition] = []
        self.registered = False
        self._register_lock = asyncio.Lock()
        runner = EventRunner(worker, self.handlers)
        if trace:
            runner.interceptors.append(job_span_interceptor(self, tracer_provider))
            flush_spans_on_stop(worker, tracer_provider)
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
            if sub.transactional and not spec.takes_context:
                raise TypeError(
                    f"transactional subscriber {sub.name!r} takes (payload, ctx): its "
                    "statements go on ctx.connection"
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
            if sub.transactional:
                runner.transactional[sub.name] = sub.isolation
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
        cutoff = await self.store.current_time() - self.keep
        removed = 0
        # Short transactions; a backlog larger than the rounds waits for the next pass.
        for _ in range(RETAIN_ROUNDS):
            batch = int(await self.store.retain(cutoff, RETAIN_BATCH))
            removed += batch
            if batch < RETAIN_BATCH:
                break
        if removed:
            log.debug("event retention removed %d events older than %s", removed, cutoff)
        return 0


async def register_subscribers(
    store: EventConsumer,
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
            Subscriber(
                name=sub.name,
                event_type=sub.event_type,
                max_attempts=budget,
                ordered=sub.ordering == "key",
            )
        )
