"""Queue handlers: decode the payload, call the user's function, settle the job.

Settlement rules (source ``queue``):

* the handler returns -> ``ack`` (batched through :class:`AckBatcher`);
* the handler raises :class:`Snooze` -> ``snooze`` (no attempt spent), or
  :class:`Skip` -> ``skip`` (terminal);
* the handler raises -> ``reschedule`` after the :class:`RetryPolicy` delay, or
  ``dead`` once the attempt budget is spent or the error type is listed as
  non-retryable; the recorded error is ``"<Type>: <message>"``;
* the payload cannot be decoded (:class:`PayloadError`), or no handler is
  registered for the kind (:class:`UnknownKindError`) -> ``dead`` at once with
  that error (retrying cannot help); but a payload whose codec or key this
  worker lacks (:class:`PayloadCodecError`) is left for a worker that has it
  (``release_blocked``: the attempt given back, the reason kept, leased again
  after ``UNDECODABLE_RETRY``);
* the lease was lost or the worker shuts down -> nothing is settled (the
  reaper or ``release`` takes care of the job).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, get_type_hints

from .. import _metrics
from ..codec import check_payload_type, decode_value
from ..errors import PayloadCodecError, PayloadError, Skip, Snooze, UnknownKindError, is_not_found
from ..payload_codec import UNDECODABLE_RETRY
from ..retry import RetryDecision, RetryPolicy, describe_error
from ..store.queue import Job
from ._lease import LeaseHandle

if TYPE_CHECKING:
    from ._acker import AckBatcher
    from ._store import WorkerStore

__all__ = ["Interceptor", "JobContext", "QueueHandler", "QueueRunner"]

log = logging.getLogger("azync_flow.worker")
WORKER = f"{socket.gethostname()}:{os.getpid()}"

Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a queue handler knows about the job it runs.

    Attributes:
        id: job id.
        kind: job kind.
        attempt: 1-based attempt number of this run.
        max_attempts: the job's durable attempt budget.
        meta: string annotations given at enqueue.
        job: the full leased row.
    """

    id: uuid.UUID
    kind: str
    attempt: int
    max_attempts: int
    meta: Mapping[str, str]
    job: Job = field(repr=False)
    _lease: LeaseHandle = field(repr=False)

    async def heartbeat(self, lease: timedelta | None = None) -> None:
        """Renew this job's lease now (the worker also renews it every ~lease/3).

        Args:
            lease: new lease length from now (backend clock); default the
                handler's lease.

        Raises:
            LeaseLost: another attempt owns the job now; stop working.
        """
        await self._lease.extend(lease)

    @property
    def lease_lost(self) -> bool:
        """True once a renewal was rejected."""
        return self._lease.lost


#: ``async def interceptor(ctx: JobContext, call_next) -> None``: wraps every queue
#: handler call (``await call_next()`` runs the next interceptor or the handler).
#: The handler's exception (or Snooze/Skip) propagates through it, so it can time,
#: trace or log each attempt; it must re-raise to keep the settle semantics.
#: (Defined after JobContext, not as a string forward reference, so that
#: annotation readers such as the API reference can resolve it.)
Interceptor = Callable[[JobContext, Callable[[], Awaitable[None]]], Awaitable[None]]


@dataclass(slots=True)
class QueueHandler:
    """One registered queue handler and its settings (see :meth:`Worker.register`)."""

    kind: str
    fn: Handler
    concurrency: int
    max_attempts: int
    retry: RetryPolicy
    lease: timedelta
    payload_type: Any = Any
    takes_context: bool = False

    def __post_init__(self) -> None:
        check_payload_type(self.payload_type)

    @classmethod
    def build(
        cls,
        kind: str,
        fn: Handler,
        *,
        concurrency: int,
        max_attempts: int,
        retry: RetryPolicy,
        lease: timedelta,
        payload_type: Any = None,
    ) -> QueueHandler:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"handler for {kind!r} must be an async function")
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not 1 <= len(params) <= 2:
            raise TypeError(
                f"handler for {kind!r} must take (payload) or (payload, ctx: JobContext)"
            )
        if payload_type is None:
            try:
                payload_type = get_type_hints(fn).get(params[0].name, Any)
            except Exception:
                payload_type = Any
        return cls(
            kind=kind,
            fn=fn,
            concurrency=concurrency,
            max_attempts=max_attempts,
            retry=retry,
            lease=lease,
            payload_type=payload_type,
            takes_context=len(params) == 2,
        )


class QueueRunner:
    """The :data:`JobRunner` of queue jobs: dispatches by kind to registered handlers."""

    def __init__(
        self, store: WorkerStore, handlers: Mapping[str, QueueHandler], acks: AckBatcher
    ) -> None:
        self.store = store
        self.handlers = handlers
        self.acks = acks
        self.interceptors: list[Interceptor] = []
        self._undecodable_warned: set[str] = set()

    async def __call__(self, job: Job, lease: LeaseHandle) -> None:
        started = time.perf_counter()
        outcome = await self._run(job, lease)
        if outcome is not None and not lease.lost:
            seconds = time.perf_counter() - started
            _metrics.job_attempt(job.source.value, job.kind, outcome, seconds)

    async def _run(self, job: Job, lease: LeaseHandle) -> str | None:
        """Run and settle one job; the outcome for the metrics (None: lease lost)."""
        handler = self.handlers.get(job.kind)
        if handler is None:
            await self._dead(lease, UnknownKindError(job.kind))
            return "dead"
        try:
            what = f"payload of kind {job.kind!r}"
            payload = decode_value(self.payload_bytes(job), handler.payload_type, what)
        except PayloadCodecError as exc:  # a codec or key this worker lacks
            return await self._leave_undecodable(job, lease, exc)
        except PayloadError as exc:
            await self._dead(lease, exc)
            return "dead"
        try:
            await self._invoke(handler, job, payload, lease)
        except Snooze as snooze:
            if lease.lost:
                return None
            await self._settle(
                lease, self.store.snooze(job.id, lease.token, snooze.delay, _deadline(job))
            )
            return "snoozed"
        except Skip as skip:
            if lease.lost:
                return None
            await self._settle(lease, self.store.skip(job.id, lease.token, skip.reason))
            return "skipped"
        except Exception as exc:
            if lease.lost:
                return None
            return await self._fail(handler, job, lease, exc)
        if lease.lost:
            return None
        await self._ack(job, lease)
        return "succeeded"

    async def _ack(self, job: Job, lease: LeaseHandle) -> None:
        """Ack a job whose handler returned (runners whose handlers ack in their
        own transaction override it)."""
        # the slot and the lease are held until the ack commits
        await asyncio.shield(self.acks.ack(job.id, lease.token))

    async def _invoke(
        self, handler: QueueHandler, job: Job, payload: Any, lease: LeaseHandle
    ) -> None:
        if not handler.takes_context and not self.interceptors:
            await handler.fn(payload)
            return
        ctx = self.context(job, lease)

        async def call() -> None:
            if handler.takes_context:
                await handler.fn(payload, ctx)
            else:
                await handler.fn(payload)

        chain: Callable[[], Awaitable[None]] = call
        for interceptor in reversed(self.interceptors):
            chain = functools.partial(interceptor, ctx, chain)
        await chain()

    def payload_bytes(self, job: Job) -> bytes:
        """The JSON the handler's payload is decoded from (runners of other
        sources override it: an event delivery's body lives in the ledger).

        Raises:
            PayloadError: there is no body to decode (the job is dead-lettered).
        """
        return job.payload or b"null"

    def context(self, job: Job, lease: LeaseHandle) -> JobContext:
        """The context handed to handlers and interceptors (overridable like
        :meth:`payload_bytes`)."""
        return JobContext(
            id=job.id,
            kind=job.kind,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            meta=job.meta,
            job=job,
            _lease=lease,
        )

    async def _leave_undecodable(
        self, job: Job, lease: LeaseHandle, exc: PayloadCodecError
    ) -> str | None:
        """Leave a job whose payload this worker cannot decode (a codec or key it
        lacks) for a worker that can: the attempt given back, the reason kept,
        leased again after ``UNDECODABLE_RETRY``; one WARNING per kind."""
        if lease.lost:
            return None
        why = f"a worker ({WORKER}) cannot decode its payload: {describe_error(exc)}"
        try:
            await self.store.release_blocked(lease.id, lease.token, why, UNDECODABLE_RETRY)
        except Exception as lost:  # settled or re-leased meanwhile
            if not is_not_found(lost):
                raise
            return None
        if job.kind not in self._undecodable_warned:
            self._undecodable_warned.add(job.kind)
            log.warning(
                "%s %s: this worker cannot decode its payload (%s); it leaves such jobs for "
                "a worker that has the codec and key (docs/codecs.md)",
                job.source,
                job.kind,
                describe_error(exc),
            )
        return "released"

    async def _dead(self, lease: LeaseHandle, err: Exception) -> None:
        await self._settle(lease, self.store.dead(lease.id, lease.token, describe_error(err)))

    async def _fail(
        self, handler: QueueHandler, job: Job, lease: LeaseHandle, exc: Exception
    ) -> str:
        error = describe_error(exc)
        decision = handler.retry.decide(exc, job.attempt, job.max_attempts)
        if decision is RetryDecision.RETRY:
            delay = handler.retry.delay(job.attempt)
            log.info(
                "%s %s (job %s): attempt %d failed, retrying in %.2fs: %s",
                job.source,
                job.kind,
                job.id,
                job.attempt,
                delay.total_seconds(),
                error,
            )
            await self._settle(lease, self.store.reschedule(job.id, lease.token, delay, error))
            return "retried"
        log.warning(
            "%s %s (job %s): attempt %d failed, dead-lettered (%s): %s",
            job.source,
            job.kind,
            job.id,
            job.attempt,
            decision,
            error,
        )
        await self._settle(lease, self.store.dead(job.id, lease.token, error))
        return "dead"

    async def _settle(self, lease: LeaseHandle, op: Awaitable[Any]) -> None:
        try:
            await op
        except Exception as exc:
            if not is_not_found(exc):
                raise
            lease.lost = True
            log.info("job %s was settled elsewhere (lease lost): %s", lease.id, exc)


def _deadline(job: Job) -> str:
    return f"SnoozeDeadlineExceeded: job {job.id} of kind {job.kind!r} snoozed past its deadline"
