"""Completion folded into the next pass: an activity that finishes on the worker
holding its execution in the sticky cache records its outcome and the pass that
consumes it in ONE commit.

Per finished attempt (success or final failure)::

    instance = cache.take(run_id)                     # this worker's pass slot
    outcome  = instance.advance([completion events])  # in memory, no load
    store.commit_completions(run_id, [op ack + event ...], pass write)

Fences: each operation's lease token and the execution's ``next_seq`` (the
instance's). Any fence failure writes nothing; the instance is dropped and the
outcome is recorded alone (``complete_operation``), so a workflow task runs the
pass as on the plain path: never a lost or doubled result. Completions of one
execution arriving together (a ``gather``) share one pass.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from azync_flow._transient import retry_transient
from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.replay.outcome import PassStatus
from azync_flow.replay.passes import to_entries
from azync_flow.runtime.workflow_runner import WorkflowRunner
from azync_flow.store.queue import Job
from azync_flow.store.workflows import OperationSettle, OperationTransaction
from azync_flow.telemetry import AttemptKind, AttemptOutcome
from azync_flow.worker import lease_gone

__all__ = ["CompletionFolder"]

log = logging.getLogger("azync_flow.workflow")


@dataclass
class _Inbox:
    items: list[tuple[OperationSettle, asyncio.Future[bool], Any]] = field(default_factory=list)
    draining: bool = False


class CompletionFolder:
    """Commits finished operations together with the next pass of their execution.

    Args:
        runner: the worker's workflow runner (its sticky cache, locks and commit
            helpers).
    """

    def __init__(self, runner: WorkflowRunner) -> None:
        self.runner = runner
        self.store = runner.store
        self._inboxes: dict[uuid.UUID, _Inbox] = {}
        #: What waits for the attempt spans of the activities whose outcomes a
        #: folded pass recorded to end: the run span of a run that pass finished
        #: (a run span ends after every attempt span) and the after_commit hook.
        self._ending: dict[uuid.UUID, tuple[set[uuid.UUID], Callable[[], Awaitable[None]]]] = {}
        #: Passes committed with their completions / completions sent back to the plain path.
        self.folded = 0
        self.fallbacks = 0

    async def attempt_ended(self, job_id: uuid.UUID) -> None:
        """The attempt span of operation ``job_id`` ended: finish what waited for it
        (see ``_ending``)."""
        for run_id, (jobs, then) in list(self._ending.items()):
            jobs.discard(job_id)
            if not jobs and self._ending.get(run_id, (None,))[0] is jobs:
                del self._ending[run_id]
                await then()

    async def settle(self, job: Job, settle: OperationSettle, lease: Any = None) -> bool:
        """Record ``settle`` with the next pass of ``job.run_id`` if this worker
        caches the execution and nothing else owns it (and the attempt's
        ``lease`` handle, when given, still holds the job).

        Returns:
            True when committed (the operation is settled); False when the caller
            must record the outcome alone (not cached, or a fence failed).

        Raises:
            Exception: a store error other than a fence (the outcome may or may
                not be committed; the lease expiry decides, as on the plain path).
        """
        run_id = job.run_id
        if run_id is None or (run_id not in self.runner.cache and run_id not in self._inboxes):
            return False
        if "reset_run" in job.meta:
            # enqueued again by a reset: a cached instance may be the old run's,
            # at the same next_seq; the plain path's pass checks the run id
            return False
        if lease_gone(lease):  # taken over: the plain path refuses the report as before
            return False
        inbox = self._inboxes.get(run_id)
        if inbox is None:
            inbox = self._inboxes[run_id] = _Inbox()
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        inbox.items.append((settle, done, lease))
        if not inbox.draining:
            inbox.draining = True
            try:
                await self._drain(run_id, inbox)
            finally:
                inbox.draining = False
                if not inbox.items and self._inboxes.get(run_id) is inbox:
                    del self._inboxes[run_id]
        return await done

    async def settle_in(
        self, job: Job, settle: OperationSettle, lease: Any, tx: OperationTransaction
    ) -> bool:
        """Like :meth:`settle` for a transactional step: the outcome and the next
        pass are written on ``tx`` (the step's own open transaction), which
        commits them with the step's writes. It folds alone (the other
        completions of a gather commit on their own connections).

        Returns:
            True when committed; False when ``tx`` is still open and the caller
            must record the outcome alone (``tx.complete``).

        Raises:
            Exception: the commit failed otherwise (``tx`` is rolled back on
                leaving its block; the pass was not taken).
        """
        run_id = job.run_id
        if run_id is None or run_id not in self.runner.cache or lease_gone(lease):
            return False
        async with self.runner.serialized(run_id):
            return await self._fold(run_id, [settle], [lease], tx)

    async def _drain(self, run_id: uuid.UUID, inbox: _Inbox) -> None:
        async with self.runner.serialized(run_id):
            while inbox.items:
                await asyncio.sleep(0)  # let sibling completions of a gather join
                batch, inbox.items = inbox.items, []
                try:
                    ok = await self._fold(run_id, [s for s, _, _ in batch], [x for *_, x in batch])
                except BaseException as err:
                    for _, fut, _ in batch:
                        if not fut.done():
                            fut.set_exception(err)
                    for _, fut, _ in inbox.items:
                        if not fut.done():
                            fut.set_result(False)
                    inbox.items = []
                    if isinstance(err, Exception):
                        return
                    raise
                for _, fut, _ in batch:
                    if not fut.done():
                        fut.set_result(ok)

    async def _fold(
        self,
        run_id: uuid.UUID,
        settles: list[OperationSettle],
        leases: list[Any],
        tx: OperationTransaction | None = None,
    ) -> bool:
        runner = self.runner
        run = runner.runs.get(run_id)
        instance = runner.cache.take(run_id)
        if instance is None or run is None or run.signals_waiting or not instance.reusable:
            if instance is not None:
                runner.cache.put(run_id, instance)
            self.fallbacks += len(settles)
            return False
        carrier = run.carrier
        first = instance.next_seq
        entries = to_entries([(first + i, s.event_type, s.payload) for i, s in enumerate(settles)])
        async with runner.tracer.attempt_span(
            AttemptKind.WORKFLOW_TASK,
            instance.info.name,
            carrier=carrier,
            run_id=run_id,
            attempt=1,
            workflow_name=instance.info.name,
            seq=first + len(settles),  # the pass's own first event, as on a task's pass
        ) as span:
            try:
                outcome = instance.advance(entries, now=runner.clock.now())
            except Exception as err:  # a bug outside user code: the plain path retries
                instance.close()
                log.exception("in-memory pass of %s crashed; recording the outcome alone", run_id)
                span.record_failure(err)
                self.fallbacks += len(settles)
                return False
            span.set_pass_stats(
                history_length=first - 1,
                events_replayed=outcome.events_replayed,
                new_commands=len(outcome.new_events),
            )
            write = runner.pass_write(instance, outcome, first, carrier)
            claim = runner.dispatch.claim(write) if runner.dispatch is not None else None
            try:
                await runner.hook("before_commit", run_id, "completion")
                if tx is not None:  # the step's transaction: no repeat, it commits once
                    result = await tx.commit_completions(settles[0], write)
                else:
                    result = await retry_transient(
                        lambda: self.store.commit_completions(run_id, settles, write)
                    )
            except (ConflictError, NotFoundError) as err:
                if claim is not None:
                    claim.cancel()
                instance.close()
                if any(lease_gone(lease) for lease in leases):
                    span.abandon()  # taken over: the reaper records the lost attempt
                else:
                    span.add_event("pass.conflict", {"reason": str(err)[:512]})
                self.fallbacks += len(settles)
                return False
            except BaseException:
                if claim is not None:
                    claim.cancel()
                instance.close()
                raise
            span.set_outcome(AttemptOutcome.SUCCEEDED)
        self.folded += 1
        runner.committed(instance, outcome, run, result.now)
        if claim is not None:
            claim.launch(result.leased)
        runner.run_events(carrier, run_id, outcome, {}, set())

        async def then() -> None:
            if outcome.status is not PassStatus.BLOCKED:
                runner.end_run(run.execution, carrier, outcome)
            await runner.repark_unfit(run_id, outcome)
            await runner.hook("after_commit", run_id, "completion")

        jobs = {s.job_id for s in settles}
        earlier = self._ending.pop(run_id, None)
        if earlier is not None:  # a gather's earlier pass whose attempt is still open
            earlier_jobs, earlier_then = earlier

            async def both() -> None:
                await earlier_then()
                await then()

            self._ending[run_id] = (earlier_jobs | jobs, both)
        else:
            self._ending[run_id] = (jobs, then)
        return True
