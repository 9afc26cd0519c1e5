"""Wiring an application onto a :class:`~azync_flow.worker.Worker`: the one
place where its concerns are composed.

The worker runs lease loops and maintenance steps and knows nothing of what
they run. Each ``attach_*`` function below builds one concern's runtime on a
worker that has not started, and is the only way to attach that concern:

* :func:`attach_workflows`: the workflow runtime (replay passes, activity
  attempts, their maintenance). A client bound to the worker
  (``Client.for_worker(worker)``) starts these workflows eagerly and wakes the
  worker's loops directly. The worker also runs the scheduler, which creates
  the schedules these workflows declare (``@workflow(schedule=...)``).
* :func:`attach_dags`: the DAG runtime (a loop per task kind, the leader's
  tick). The worker's schedules may start these DAGs (``StartDAG``).
* :func:`attach_subscribers`: the event subscribers (a delivery loop each,
  the event maintenance and the ledger's retention).
* :func:`attach_schedules`: the scheduler, for a worker without workflows
  (workers with workflows run it already).

Usage::

    worker = Worker(store)
    attach_workflows(worker, [order], [reserve, charge, ship])
    attach_dags(worker, [saga])
    attach_subscribers(worker, [mailer])
    await worker.run()          # or: async with worker: ... / run_until_idle()

The runtimes below this module never import one another: the scheduler starts
workflows and DAG runs through :class:`~azync_flow.schedules.RunStarter`,
built here on the client and the DAG client, and the client reaches the
workflow runtime of its worker only through what :func:`attach_workflows`
binds to that worker.
"""

from __future__ import annotations

import dataclasses
import uuid
import weakref
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import asyncpg

from azync_flow._local_workflows import bind_local_workflows
from azync_flow._workflow.definitions import (
    ActivityDefinition,
    Registry,
    WorkflowDefinition,
)
from azync_flow.client import Client
from azync_flow.dag import DAG, DAGClient, DAGWorkerBinding
from azync_flow.errors import ScheduleError
from azync_flow.events import SubscriberBinding, SubscriberDefinition
from azync_flow.retry import RetryPolicy
from azync_flow.runtime import WorkflowRuntime
from azync_flow.schedules import SCHEDULE_LEADERSHIP, Scheduler, StartDAG, StartWorkflow
from azync_flow.store import Store
from azync_flow.worker import Worker

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["attach_dags", "attach_schedules", "attach_subscribers", "attach_workflows"]


def attach_workflows(
    worker: Worker,
    workflows: Iterable[WorkflowDefinition[Any, Any]] | Registry = (),
    activities: Iterable[ActivityDefinition[Any, Any]] = (),
    **options: Any,
) -> WorkflowRuntime:
    """Run ``workflows`` and ``activities`` on ``worker``.

    Adds a ``$wft`` lease loop (replay passes; never two passes of one
    execution at once), one loop per activity, a ``$query`` loop and the
    leader-only workflow maintenance; binds the runtime to the worker for the
    clients of this process (``Client.for_worker``); and runs the scheduler on
    the worker (its own election), which creates the schedules the workflows
    declare.

    Args:
        worker: a Worker that has not started.
        workflows: ``@workflow`` definitions, or a ready :class:`Registry`
            (then ``activities`` must be empty).
        activities: ``@activity`` definitions.
        **options: :class:`~azync_flow.runtime.WorkflowRuntime` options
            (``cache_size``, ``max_payload_bytes``, ``concurrency``,
            ``activity_concurrency``, ``stalled_after``, ``retention``,
            ``max_reaps``, ``tracer_provider``, ``local_dispatch``,
            ``history_limit``).

    Returns:
        The workflow runtime (its runners and loops are useful in tests).

    Raises:
        ValueError: the worker already runs, a loop for one of the kinds
            exists, the worker maintains ``Source.WORKFLOW`` itself, or
            activities are given next to a Registry.
        TypeError: a workflow or activity is not decorated.
    """
    if isinstance(workflows, Registry):
        if activities:
            raise ValueError("pass activities inside the Registry, not next to it")
        registry = workflows
    else:
        registry = Registry(workflows, activities)
    runtime = WorkflowRuntime(worker, registry, **options)
    bind_local_workflows(worker, runtime)
    _scheduler(worker).declare(registry.workflows.values())
    return runtime


def attach_dags(
    worker: Worker,
    dags: Iterable[DAG],
    *,
    concurrency: int | None = None,
    tick_interval: timedelta = timedelta(seconds=1),
    retry: RetryPolicy | None = None,
    tracer_provider: TracerProvider | None = None,
) -> DAGWorkerBinding:
    """Run ``dags`` on ``worker``: a lease loop per task kind plus the DAG
    scheduler's tick (leader only, its own election). The worker's schedules
    may start these DAGs.

    Args:
        worker: a Worker that has not started.
        dags: the definitions whose tasks and compensations this worker runs.
        concurrency: per-kind limit (default: the worker's).
        tick_interval: polling period of the leader's tick.
        retry: backoff between failed task attempts.
        tracer_provider: where the attempt spans go (None: the global provider).

    Returns:
        The binding (its ``runner`` and ``scheduler`` are useful in tests).

    Raises:
        ValueError: the worker already runs, or a loop for one of the kinds exists.
    """
    dags = list(dags)
    binding = DAGWorkerBinding(
        worker,
        dags,
        concurrency=concurrency,
        tick_interval=tick_interval,
        retry=retry,
        tracer_provider=tracer_provider,
    )
    _composition(worker).dags.update((d.name, d) for d in dags)
    return binding


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
        worker: a Worker that has not started.
        subscribers: ``@subscriber`` definitions (names must be distinct).
        keep: how long events are kept after they occurred; an event with a
            delivery not yet terminal is kept longer, until it is. (Attaching
            twice to one worker: the first call's ``keep`` applies.)
        trace: record each delivery attempt as a ``job <subscriber>`` span, a
            child of the publisher's span (its trace context rides in the
            event's meta), with the outcome (as ``trace_jobs``).
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


def attach_schedules(
    worker: Worker, *, dags: Iterable[DAG] = (), interval: timedelta | None = None
) -> Scheduler:
    """Run the scheduler on ``worker``: a maintenance step under its own
    election (``azync_flow.schedule``), so one worker at a time fires schedules.

    Workers with workflows (:func:`attach_workflows`) run it already; calling
    this again on a worker adds to the same scheduler.

    Args:
        worker: a Worker that has not started.
        dags: DAGs the schedules may start (``StartDAG``) that the worker does
            not run itself (those of :func:`attach_dags` it knows already).
        interval: tick of the step (default: the maintenance tick; only the
            first call on a worker sets it).

    Returns:
        The :class:`~azync_flow.schedules.Scheduler` (``await scheduler.run_once()``
        steps it).
    """
    _composition(worker).dags.update((d.name, d) for d in dags)
    return _scheduler(worker, interval)


@dataclasses.dataclass
class _Composition:
    """What the attach functions composed on one worker."""

    #: The DAGs the worker's schedules may start, by name.
    dags: dict[str, DAG] = dataclasses.field(default_factory=dict)
    scheduler: Scheduler | None = None


#: The composition of each worker (the worker keeps no reference).
_COMPOSED: weakref.WeakKeyDictionary[Worker, _Composition] = weakref.WeakKeyDictionary()


def _composition(worker: Worker) -> _Composition:
    composition = _COMPOSED.get(worker)
    if composition is None:
        composition = _COMPOSED[worker] = _Composition()
    return composition


def _scheduler(worker: Worker, interval: timedelta | None = None) -> Scheduler:
    """The worker's scheduler, added as a maintenance step on first use."""
    composition = _composition(worker)
    if composition.scheduler is None:
        store = worker.store
        if not isinstance(store, Store):
            raise TypeError("the worker's store does not implement every role of the contract")
        runs = _ScheduledRuns(store, composition.dags)
        composition.scheduler = Scheduler(store, runs)
        worker.add_maintenance(
            composition.scheduler.run_once,
            name="schedule.tick",
            interval=interval,
            leadership=SCHEDULE_LEADERSHIP,
        )
    return composition.scheduler


class _ScheduledRuns:
    """The :class:`~azync_flow.schedules.RunStarter` of a worker's scheduler:
    workflow executions through a client, DAG runs through a DAG client.

    Args:
        store: the worker's store.
        dags: the DAGs the schedules may start, by name (read at each start).
    """

    def __init__(self, store: Store[asyncpg.Connection], dags: dict[str, DAG]) -> None:
        self.client = Client(store)
        self.dag_client = DAGClient(store)
        self.dags = dags

    async def start_workflow(
        self, action: StartWorkflow, run_id: uuid.UUID, meta: dict[str, str]
    ) -> bool:
        handle = await self.client.start(
            action.workflow, action.input, id=run_id, meta=meta, version=action.version
        )
        return handle.started

    async def start_dag(
        self, action: StartDAG, run_id: uuid.UUID, key: str, meta: dict[str, str]
    ) -> bool:
        dag = self.dags.get(action.dag)
        if dag is None:
            raise ScheduleError(
                f"no DAG named {action.dag!r} here: the worker firing schedules must "
                "attach it (attach_dags, or attach_schedules(worker, dags=[...]))"
            )
        run = await self.dag_client.run(
            dag, action.input, id=run_id, idempotency_key=key, meta=meta
        )
        return run.inserted

    async def cancel_dag(self, run_id: uuid.UUID) -> None:
        await self.dag_client.cancel(run_id)
