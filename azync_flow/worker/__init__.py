"""The worker runtime: lease loops per (source, kind), queue handlers, maintenance.

Public surface::

    Worker            start with your handlers; run() / run_until_idle() / async with
    JobContext        what a queue handler gets next to its payload
    RetryPolicy       backoff, jitter, budget, non-retryable errors (azync_flow.retry)
    Retention         what the leader's vacuum keeps
    LeaseLoop         one (source, kind) loop; built by Worker.add_loop (reserve +
                      run_leased hand it a job leased elsewhere)
    LeaseHandle       a runner's lease on one job (token, extend, lost)
    JobRunner         ``async def run(job, lease) -> None`` for Worker.add_loop
    Batch             what a loop's own lease query may return: jobs, and whether
                      nothing else was due (the loop then sleeps until woken)
    MaintenanceStep   ``async def step() -> int | None`` for Worker.add_maintenance
    Interceptor       ``async def (ctx, call_next)`` around queue handlers (add_interceptor)
    QueueHandler      a registered handler: kind, function, budget, retry, lease
    QueueRunner       settles leased jobs through their handlers (a runner to build on)
    AckBatcher        group-commit of acks (Worker.acks), usable by runners

The errors and signals a handler meets (``LeaseLost``, ``Snooze``, ``Skip``) are
in :mod:`azync_flow.errors`. Run a worker from the command line with
``azync-flow worker module:factory``.
"""

from ..retry import RetryPolicy
from ._acker import AckBatcher
from ._lease import LeaseHandle, lease_gone
from ._loop import Batch, JobRunner, LeaseLoop, LoopStats
from ._maintenance import DEFAULT_LEADERSHIP, STATS_LEADERSHIP, MaintenanceStep, Retention
from ._queue import Interceptor, JobContext, QueueHandler, QueueRunner
from ._store import WorkerStore
from ._worker import Worker

__all__ = [
    "DEFAULT_LEADERSHIP",
    "STATS_LEADERSHIP",
    "AckBatcher",
    "Batch",
    "Interceptor",
    "JobContext",
    "JobRunner",
    "LeaseHandle",
    "LeaseLoop",
    "LoopStats",
    "MaintenanceStep",
    "QueueHandler",
    "QueueRunner",
    "Retention",
    "RetryPolicy",
    "Worker",
    "WorkerStore",
    "lease_gone",
]
