"""Eager start: a client sharing its process with a worker that registers the
workflow starts the execution AND commits its first pass in one transaction.

The first pass runs in memory before the commit (an empty history needs no
load); its activities are leased to this worker in the same commit and start
at once, and the instance goes into the sticky cache, so the first activity's
completion folds into the second pass. A duplicate id or live idempotency key
discards the pass and answers as the plain start does.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import UTC, datetime

from azync_flow.errors import PayloadError, UnknownWorkflowError
from azync_flow.replay.engine import WorkflowInstance
from azync_flow.replay.outcome import WorkflowInfo
from azync_flow.runtime.workflow_runner import CachedRun, WorkflowRunner
from azync_flow.store.workflows import (
    StartCommitResult,
    WorkflowExecutionView,
    WorkflowStartParams,
    WorkflowState,
)
from azync_flow.telemetry import AttemptKind, AttemptOutcome

__all__ = ["EagerStarter"]

log = logging.getLogger("azync_flow.workflow")


class EagerStarter:
    """Starts executions of the workflows ``runner`` registers with their first pass.

    Args:
        runner: the worker's workflow runner.
        ready: returns True while the worker runs (eager starts need its loops).
        task_queues: the task queues the worker serves.
    """

    def __init__(
        self, runner: WorkflowRunner, ready: object, task_queues: Collection[str] = ("default",)
    ) -> None:
        self.runner = runner
        self._ready = ready
        self.task_queues = frozenset(task_queues)
        #: Executions started with their first pass committed in the start.
        self.started = 0

    def accepts(self, name: str, task_queue: str) -> bool:
        """True when this worker runs the workflow ``name``, serves ``task_queue``
        and is running."""
        return (
            bool(getattr(self._ready, "running", False))
            and name in self.runner.registry.workflows
            and task_queue in self.task_queues
        )

    async def start(
        self, p: WorkflowStartParams, trace_context: dict[str, str] | None = None
    ) -> StartCommitResult:
        """Insert the execution with its first pass committed (see the module doc).

        Returns:
            ``inserted`` False (nothing written) when the id or live key is taken,
            with the existing id; ``commit`` None when the first pass could not run
            in memory and the plain start was used (a workflow task runs it).

        Raises:
            ValueError: invalid names or meta (nothing written).
        """
        runner = self.runner
        store = runner.store
        try:
            defn = runner.registry.workflow(p.name)
            defn.check_input(p.input)
        except (UnknownWorkflowError, PayloadError):  # for a worker that can run it
            inserted, wid = await store.start_workflow(p, trace_context=trace_context)
            return StartCommitResult(inserted=inserted, id=wid)
        carrier = trace_context or {}
        async with runner.serialized(p.id):
            instance = WorkflowInstance(
                defn,
                p.input,
                WorkflowInfo.of(
                    p.id, p.name, p.version, p.meta, task_queue=p.task_queue, priority=p.priority
                ),
                max_payload_bytes=runner.max_payload_bytes,
                task_context=runner.task_context(),
            )
            async with runner.tracer.attempt_span(
                AttemptKind.WORKFLOW_TASK,
                p.name,
                carrier=carrier,
                run_id=p.id,
                attempt=1,
                workflow_name=p.name,
                seq=1,
            ) as span:
                try:
                    outcome = instance.advance([], now=runner.clock.now())
                except Exception as err:  # a bug outside user code: the task path retries
                    instance.close()
                    log.exception("eager first pass of %s crashed; starting plainly", p.id)
                    span.record_failure(err)
                    inserted, wid = await store.start_workflow(p, trace_context=trace_context)
                    return StartCommitResult(inserted=inserted, id=wid)
                span.set_pass_stats(
                    history_length=0,
                    events_replayed=0,
                    new_commands=len(outcome.new_events),
                )
                write = runner.pass_write(instance, outcome, 1, carrier)
                claim = runner.dispatch.claim(write) if runner.dispatch is not None else None
                try:
                    await runner.hook("before_commit", p.id, "start")
                    result = await store.start_workflow_with_pass(
                        p, write, trace_context=trace_context
                    )
                except BaseException:
                    if claim is not None:
                        claim.cancel()
                    instance.close()
                    raise
                if result.commit is None:
                    if claim is not None:
                        claim.cancel()
                    instance.close()
                    span.add_event("start.deduplicated")
                    return result
                span.set_outcome(AttemptOutcome.SUCCEEDED)
            self.started += 1
            run = CachedRun(carrier, False, _execution(p, result.commit.now))
            runner.committed(instance, outcome, run, result.commit.now)
            if claim is not None:
                claim.launch(result.commit.leased)
            runner.run_events(carrier, p.id, outcome, {}, set())
            runner.end_run(run.execution, carrier, outcome)
            await runner.hook("after_commit", p.id, "start")
        return result


def _execution(p: WorkflowStartParams, at: datetime | None) -> WorkflowExecutionView:
    """The row the start just inserted, as the runtime needs it (no read)."""
    created = at or datetime.now(UTC)
    return WorkflowExecutionView(
        id=p.id,
        name=p.name,
        version=p.version,
        state=WorkflowState.RUNNING,
        business_idempotency_key=p.business_idempotency_key,
        task_queue=p.task_queue,
        priority=p.priority,
        input=p.input,
        result=None,
        failure_reason="",
        meta=p.meta,
        created_at=created,
        updated_at=created,
    )
