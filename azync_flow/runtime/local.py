"""A minimal in-process driver for workflow tasks and activities.

``LocalRuntime`` leases and runs due workflow tasks and operation jobs in
rounds (``run_once``/``run_until_idle``) — what tests, samples and benchmarks
need without a full :class:`azync_flow.worker.Worker`. For production, call
:meth:`LocalRuntime.attach` to register the same runners as loops of a Worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from azync_flow.runtime.activity_runner import ActivityRunner
from azync_flow.runtime.uncertain import uncertain_event
from azync_flow.runtime.workflow_runner import WorkflowRunner
from azync_flow.store.types import DequeueParams, Source
from azync_flow.workflow import Registry

__all__ = ["WORKFLOW_TASK_KIND", "LocalRuntime"]

WORKFLOW_TASK_KIND = "$wft"


class LocalRuntime:
    """Runs the workflows and activities of ``registry`` against ``store``.

    Args:
        store: the store (``PostgresStore``).
        registry: workflow and activity definitions.
        lease: lease of each leased job (activity default start-to-close).
        batch: jobs leased per kind per round.
        cache_size: sticky-cache size (0 = full replay on every pass).
        max_payload_bytes: per-value limit for workflow writes and activity results.
    """

    def __init__(
        self,
        store: Any,
        registry: Registry,
        *,
        lease: timedelta = timedelta(seconds=30),
        batch: int = 50,
        cache_size: int = 1000,
        max_payload_bytes: int | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.lease = lease
        self.batch = batch
        self.workflows = WorkflowRunner(
            store, registry, cache_size=cache_size, max_payload_bytes=max_payload_bytes
        )
        self.activities = ActivityRunner(store, registry, max_payload_bytes=max_payload_bytes)

    async def run_once(self) -> int:
        """Lease and run one batch of due workflow tasks, then of operations.

        Returns:
            The number of jobs run.
        """
        await self.store.promote_workflow_jobs()
        ran = 0
        tasks = await self.store.dequeue_workflow_tasks(self.batch, self.lease, WORKFLOW_TASK_KIND)
        # distinct executions (the lease never hands out two tasks of one run)
        await asyncio.gather(*(self.workflows.run_task(j, j.lease_token) for j in tasks))
        ran += len(tasks)
        for kind in list(self.registry.activities):
            jobs = await self.store.dequeue_batch(
                Source.WORKFLOW, DequeueParams(kind=kind, limit=self.batch, lease=self.lease)
            )
            await asyncio.gather(*(self.activities.run_operation(j, j.lease_token) for j in jobs))
            ran += len(jobs)
        return ran

    async def maintain_once(self, stalled_after: timedelta = timedelta(minutes=5)) -> int:
        """One round of the workflow maintenance a leader runs: promote due jobs,
        park lease-expired non-idempotent operations as uncertain (and ask their
        reconcile hooks), and give
        stalled executions (running, nothing scheduled) a workflow task.

        Returns:
            The number of jobs promoted, operations parked and executions repaired.
        """
        done = int(await self.store.promote_workflow_jobs())
        done += len(await self.store.reap_uncertain_operations(uncertain_event))
        done += await self.activities.reconciler.run_once()
        for stalled in await self.store.list_stalled_workflows(stalled_after, 100):
            await self.store.schedule_task(stalled.id)
            done += 1
        return done

    async def run_until_idle(self, max_rounds: int = 100_000) -> int:
        """Run rounds until one finds nothing due. Returns the jobs run in total."""
        total = 0
        for _ in range(max_rounds):
            ran = await self.run_once()
            if ran == 0:
                return total
            total += ran
        raise RuntimeError("runtime did not become idle")

    async def run(self, stop: asyncio.Event, poll: timedelta = timedelta(milliseconds=50)) -> None:
        """Run rounds until ``stop`` is set, pausing ``poll`` when idle."""
        while not stop.is_set():
            if await self.run_once() == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), poll.total_seconds())

    def attach(self, worker: Any, *, concurrency: int | None = None) -> None:
        """Register the runners as loops of an ``azync_flow.worker.Worker``, and the
        workflow maintenance (promote/reap of workflow jobs, parking lease-expired
        non-idempotent operations, repairing stalled executions) on its leader.

        Note for integration: the ``$wft`` loop must lease with
        ``store.dequeue_workflow_tasks`` (never two passes of one execution at
        once), and due scheduled operations need ``store.promote_workflow_jobs``.
        """
        worker.add_loop(
            Source.WORKFLOW, WORKFLOW_TASK_KIND, self.workflows.run, concurrency=concurrency
        )
        for kind in self.registry.activities:
            worker.add_loop(Source.WORKFLOW, kind, self.activities.run, concurrency=concurrency)
        worker.maintain_source(Source.WORKFLOW)

        async def reap_uncertain() -> int:
            parked = len(await self.store.reap_uncertain_operations(uncertain_event))
            return parked + await self.activities.reconciler.run_once()  # reconcile hooks

        async def repair_stalled() -> int:
            stalled = await self.store.list_stalled_workflows(timedelta(minutes=5), 100)
            for execution in stalled:
                await self.store.schedule_task(execution.id)
            return len(stalled)

        async def promote() -> int:
            return int(await self.store.promote_workflow_jobs())

        worker.add_maintenance(promote, name="workflow.promote", source=Source.WORKFLOW)
        worker.add_maintenance(
            reap_uncertain, name="workflow.reap_uncertain", source=Source.WORKFLOW
        )
        worker.add_maintenance(
            repair_stalled,
            name="workflow.repair_stalled",
            interval=timedelta(seconds=30),
            source=Source.WORKFLOW,
        )
