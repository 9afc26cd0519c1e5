"""Executes leased DAG task jobs: calls the handler and settles the job.

:meth:`DAGRunner.run_task` is the unit a worker loop calls per leased job
(``worker.add_loop(Source.DAG, kind, runner.run_task, concurrency)``);
:meth:`DAGRunner.run_batch` leases and runs a batch itself for standalone use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from opentelemetry.trace import TracerProvider

from .._text import clean_text
from .._transient import MAX_CONFLICT_RERUNS, is_transient
from ..codec import encode_value
from ..errors import NotFoundError, NotReady, PayloadError, Skip, UnknownKindError
from ..retry import RetryDecision, RetryPolicy, describe_error
from ..store.dags import DAGConsumer, TransactionalDAGConsumer
from ..store.queue import Job
from ..telemetry import AttemptKind, AttemptOutcome, AttemptSpan, RunTracer
from ._context import TaskContext, TaskOutcome
from ._definition import DAG, Handler, TaskSpec

log = logging.getLogger("azync_flow.dag")


#: Backoff of a DAG task when the runner is given none: 1 s doubling up to
#: 5 min, no jitter.
DEFAULT_TASK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=5), jitter=0.0
)


class DAGRunner:
    """Runs DAG task handlers of the registered definitions.

    Args:
        store: the store (DAG verbs plus plain settle verbs).
        dags: the definitions whose handlers this runner executes.
        default_max_attempts: retry budget for tasks that declared none.
        retry: backoff between attempts and the errors never retried
            (default :data:`DEFAULT_TASK_RETRY`); the attempt budget is the
            task's own (``max_attempts``), else ``default_max_attempts``.
        lease: lease taken by :meth:`run_batch` and renewed while a handler runs.
        release_on_cancel: hand the job back (release) when the handler is
            cancelled. A Worker releases jobs itself on shutdown, so the
            worker binding turns this off.
        tracer_provider: where attempt spans go (None: the global provider).
            Every attempt is a ``dag.task <key>`` or ``dag.compensation <key>``
            span, a child of the run span (the W3C carrier in the
            task's meta), current while the handler runs.
        task_queues: the task queues :meth:`run_batch` leases from.
    """

    def __init__(
        self,
        store: DAGConsumer,
        dags: Iterable[DAG],
        *,
        default_max_attempts: int = 25,
        retry: RetryPolicy | None = None,
        lease: timedelta = timedelta(seconds=60),
        release_on_cancel: bool = True,
        tracer_provider: TracerProvider | None = None,
        task_queues: Sequence[str] = ("default",),
    ) -> None:
        self.store = store
        self.task_queues = tuple(task_queues)
        self.tracer = RunTracer(tracer_provider)
        self.release_on_cancel = release_on_cancel
        self.default_max_attempts = default_max_attempts
        self.retry = retry or DEFAULT_TASK_RETRY
        self.lease = lease
        self._handlers: dict[str, tuple[TaskSpec, Handler, bool]] = {}
        self._dag_names: dict[str, str] = {}
        for dag in dags:
            dag.validate()
            found = dag.handlers()
            self._handlers.update(found)
            self._dag_names.update(dict.fromkeys(found, dag.name))

    @property
    def kinds(self) -> list[str]:
        """Every handler kind this runner executes (one leasing loop each)."""
        return sorted(self._handlers)

    async def run_batch(self, limit: int = 32) -> int:
        """Lease up to ``limit`` due tasks of this runner's kinds, run them concurrently.

        Returns the number of jobs run.
        """
        jobs = await self.store.dag_dequeue(
            self.kinds, limit, self.lease, self.default_max_attempts, self.task_queues
        )
        if jobs:
            await asyncio.gather(*(self.run_task(j, self.lease) for j in jobs))
        return len(jobs)

    async def run_task(self, job: Job, lease: timedelta | None = None) -> AttemptOutcome | None:
        """Run the handler of one leased task job and settle it (lease-fenced).

        Returning a value acks with it as the task result (None: no result);
        raising :class:`NotReady` snoozes, :class:`Skip` skips, anything else
        retries with backoff until the budget is spent, then dead-letters.

        Returns:
            How the attempt was settled: ``SUCCEEDED``, ``SKIPPED``,
            ``SNOOZED``, ``RETRIED`` or ``DEAD`` (also a snooze past the task's
            deadline); None when the settle was dropped because the lease was
            lost (reaped, cancelled).

        The attempt is one span (see :class:`DAGRunner`) whose ``azync.outcome``
        is that value (none when the settle was dropped), with the delay of a
        retry or snooze. A failed or deadlined attempt has error status and an
        exception event.
        """
        assert job.lease_token is not None
        assert job.dag_id is not None
        entry = self._handlers.get(job.kind)
        is_comp = entry[2] if entry else job.task_key.startswith("comp:")
        span_name = entry[0].key if entry else job.task_key.removeprefix("comp:")
        async with self.tracer.attempt_span(
            AttemptKind.DAG_COMPENSATION if is_comp else AttemptKind.DAG_TASK,
            span_name,
            carrier=job.meta,
            run_id=job.dag_id,
            attempt=job.attempt,
            dag_name=self._dag_names.get(job.kind, job.kind.partition("/")[0]),
            task_key=job.task_key,
        ) as span:
            if entry is None:
                err = UnknownKindError(job.kind)
                span.record_failure(err)
                return _traced(span, await self._dead(job, describe_error(err)))
            return await self._attempt(job, lease, entry, span)

    async def _attempt(
        self,
        job: Job,
        lease: timedelta | None,
        entry: tuple[TaskSpec, Handler, bool],
        span: AttemptSpan,
    ) -> AttemptOutcome | None:
        assert job.lease_token is not None
        spec, handler, is_comp = entry
        try:
            ctx = await self._context(job, spec, is_comp)
            if (
                not is_comp
                and spec.skip_when_upstream_skipped
                and spec.after
                and all(k in ctx.task_results and ctx.task_results[k].skipped for k in spec.after)
            ):
                raise Skip("every upstream task was skipped")
            if spec.transactional and not is_comp:
                async with self._heartbeat(job, lease):
                    settled = await self._transactional(job, spec, handler, ctx)
                return _traced(span, settled)
            async with self._heartbeat(job, lease):
                value = await handler(ctx)
            raw = None if value is None else encode_value(value, f"result of task {spec.key!r}")
        except NotReady as e:
            return _traced(span, await self._snooze(job, e, span), e.delay)
        except Skip as e:
            skipped = self.store.skip(job.id, job.lease_token, clean_text(e.reason or "skipped"))
            outcome = await self._settle(AttemptOutcome.SKIPPED, skipped)
            if outcome is AttemptOutcome.SKIPPED:  # dependents may start: wake the scheduler
                await self.store.dag_notify_tick()
            return _traced(span, outcome)
        except asyncio.CancelledError:
            if not self.release_on_cancel:
                raise
            with contextlib.suppress(NotFoundError):
                await asyncio.shield(self.store.release(job.id, job.lease_token))
            raise
        except Exception as e:
            span.record_failure(e)
            return await self._failed(job, e, span)
        acked = self.store.ack_task_result(job.id, job.lease_token, raw)
        return _traced(span, await self._settle(AttemptOutcome.SUCCEEDED, acked))

    async def _transactional(
        self, job: Job, spec: TaskSpec, handler: Handler, ctx: TaskContext
    ) -> AttemptOutcome | None:
        """Run a transactional task's handler in the transaction that acks it.

        A serialization failure or deadlock runs the handler again at once (same
        attempt); its other errors (``NotReady``, ``Skip`` included) are raised
        after the transaction rolled back, and settled as for any task.
        """
        store = self.store
        if not isinstance(store, TransactionalDAGConsumer):
            raise TypeError("the store does not implement TransactionalDAGConsumer")
        assert job.lease_token is not None
        reruns = 0
        while True:
            failure: BaseException | None = None
            try:
                async with store.dag_task_transaction(
                    job.id,
                    job.lease_token,
                    isolation=spec.isolation,  # type: ignore[arg-type]
                ) as tx:
                    ctx._connection = tx.connection
                    try:
                        value = await handler(ctx)
                        raw = (
                            None
                            if value is None
                            else encode_value(value, f"result of task {spec.key!r}")
                        )
                    except BaseException as err:
                        failure = err
                    else:
                        await tx.ack(raw)
            except NotFoundError:
                if failure is None:
                    log.info("dag task %s: lease lost, rolled back", job.id)
                    return None
                raise
            except Exception as err:
                if failure is None and is_transient(err) and reruns < MAX_CONFLICT_RERUNS:
                    reruns = await _conflict_pause(job, reruns)
                    continue
                raise
            finally:
                ctx._connection = None
            if failure is None:
                return AttemptOutcome.SUCCEEDED
            if (
                isinstance(failure, Exception)
                and is_transient(failure)
                and reruns < MAX_CONFLICT_RERUNS
            ):
                reruns = await _conflict_pause(job, reruns)
                continue
            raise failure

    # --- internals --------------------------------------------------------------

    async def _context(self, job: Job, spec: TaskSpec, is_comp: bool) -> TaskContext:
        keys = [spec.key] if is_comp else list(spec.after)
        results: dict[str, TaskOutcome] = {}
        if keys:
            found = await self.store.task_results(job.dag_id, keys)  # type: ignore[arg-type]
            results = {k: TaskOutcome.from_store(v) for k, v in found.items()}
        return TaskContext(
            run_id=job.dag_id,  # type: ignore[arg-type]
            key=job.task_key,
            kind=job.kind,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            raw_payload=job.payload or b"null",
            meta=job.meta,
            task_results=results,
            compensates=spec.key if is_comp else "",
            _store=self.store,
        )

    @contextlib.asynccontextmanager
    async def _heartbeat(self, job: Job, lease: timedelta | None) -> Any:
        if lease is None or lease <= timedelta(0):
            yield
            return

        async def beat() -> None:
            while True:
                await asyncio.sleep(lease.total_seconds() / 3)
                with contextlib.suppress(NotFoundError):
                    await self.store.extend_lease(job.id, job.lease_token, lease)  # type: ignore[arg-type]

        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _snooze(self, job: Job, e: NotReady, span: AttemptSpan) -> AttemptOutcome | None:
        try:
            deadlined = await self.store.snooze(
                job.id,
                job.lease_token,  # type: ignore[arg-type]
                e.delay,
                clean_text(f"deadline exceeded: {e.reason}"),
            )
        except NotFoundError:
            return None
        if not deadlined:
            return AttemptOutcome.SNOOZED
        span.record_failure(e)
        await self.store.dag_notify_tick()  # the failure policy may fire: wake the scheduler
        return AttemptOutcome.DEAD

    async def _failed(self, job: Job, e: Exception, span: AttemptSpan) -> AttemptOutcome | None:
        msg = describe_error(e)
        # an unencodable result (NaN, lone surrogate, ...) would fail again: no retry
        if (
            isinstance(e, PayloadError)
            or self.retry.decide(e, job.attempt, max(job.max_attempts, 1))
            is not RetryDecision.RETRY
        ):
            return _traced(span, await self._dead(job, msg))
        delay = self.retry.delay(job.attempt)
        rescheduled = self.store.reschedule(job.id, job.lease_token, delay, msg)  # type: ignore[arg-type]
        return _traced(span, await self._settle(AttemptOutcome.RETRIED, rescheduled), delay)

    async def _dead(self, job: Job, msg: str) -> AttemptOutcome | None:
        dead = self.store.dead(job.id, job.lease_token, msg)  # type: ignore[arg-type]
        out = await self._settle(AttemptOutcome.DEAD, dead)
        if out is AttemptOutcome.DEAD:
            await self.store.dag_notify_tick()
        return out

    @staticmethod
    async def _settle(outcome: AttemptOutcome, op: Any) -> AttemptOutcome | None:
        try:
            await op
        except NotFoundError:
            log.info("dag task settle dropped: lease no longer held")
            return None
        return outcome


async def _conflict_pause(job: Job, reruns: int) -> int:
    """Wait a little before running a transactional task again (jittered, growing)."""
    log.info("dag task %s rolled back by a conflict; running it again", job.id)
    await asyncio.sleep(random.uniform(0, min(0.5, 0.005 * 2**reruns)))
    return reruns + 1


def _traced(
    span: AttemptSpan, outcome: AttemptOutcome | None, delay: timedelta | None = None
) -> AttemptOutcome | None:
    """Record the settled outcome on the attempt span (nothing for a dropped settle)."""
    if outcome is not None:
        delayed = outcome in (AttemptOutcome.RETRIED, AttemptOutcome.SNOOZED)
        span.set_outcome(outcome, retry_delay=delay if delayed else None)
    return outcome
