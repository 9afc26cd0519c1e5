"""``LocalRuntime``: the tests' shorthand for a :class:`~azync_flow.worker.Worker`
with the workflow runtime attached and test-friendly timings.

It is not a second way to wire a worker: it builds ``Worker(store, ...)`` and
calls ``attach_workflows(worker, registry, ...)``; ``run_until_idle`` and
``run`` are the worker's.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from azync_flow import attach_workflows
from azync_flow.runtime import ActivityRunner, WorkflowRunner, WorkflowRuntime
from azync_flow.worker import Worker
from azync_flow.workflow import Registry

__all__ = ["LocalRuntime"]


class LocalRuntime:
    """A Worker running the workflows and activities of ``registry`` against ``store``.

    Args:
        store: the store (``PostgresStore``).
        registry: workflow and activity definitions.
        lease: lease of each leased job.
        batch: jobs leased per loop per round (the worker's ``batch_size``).
        cache_size: sticky-cache size (0 = full replay on every pass).
        max_payload_bytes: per-value limit for workflow writes and activity results.
        poll_interval: fallback polling period of the worker's loops.
        task_queues: the task queues the worker serves.
        **options: more ``attach_workflows`` options.
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
        poll_interval: timedelta = timedelta(milliseconds=200),
        task_queues: tuple[str, ...] = ("default",),
        **options: Any,
    ) -> None:
        self.store = store
        self.registry = registry
        self.worker = Worker(
            store,
            concurrency=batch,
            batch_size=batch,
            lease=lease,
            poll_interval=poll_interval,
            maintenance_interval=timedelta(milliseconds=200),
            maintain=(),
            handle_signals=False,
            task_queues=task_queues,
        )
        self.runtime: WorkflowRuntime = attach_workflows(
            self.worker,
            registry,
            cache_size=cache_size,
            max_payload_bytes=max_payload_bytes,
            **options,
        )

    @property
    def workflows(self) -> WorkflowRunner:
        return self.runtime.workflows

    @property
    def activities(self) -> ActivityRunner:
        return self.runtime.activities

    async def run_until_idle(self) -> int:
        """``Worker.run_until_idle``: run until nothing is runnable, then stop.

        Returns:
            The number of jobs (workflow tasks and activity attempts) leased.
        """
        before = sum(lp.stats.leased for lp in self.worker.loops.values())
        await self.worker.run_until_idle()
        return sum(lp.stats.leased for lp in self.worker.loops.values()) - before

    async def run(self, stop: asyncio.Event, poll: timedelta | None = None) -> None:
        """Run the worker until ``stop`` is set (``poll`` is ignored: the worker
        wakes on NOTIFY and polls at its own ``poll_interval``)."""
        async with self.worker:
            await stop.wait()
