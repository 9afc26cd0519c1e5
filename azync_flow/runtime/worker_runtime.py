"""The workflow runtime on the real :class:`~azync_flow.worker.Worker`: what
``attach_workflows(worker, [order], [reserve, charge, ship])`` builds.

It adds to the worker:

* a ``$wft`` lease loop that leases with ``store.lease_workflow_tasks`` (never
  two passes of one execution at once) and runs each task as one replay pass
  (:class:`WorkflowRunner`);
* one lease loop per registered activity (``$op:<name>@<version>``), one attempt
  per lease (:class:`ActivityRunner`);
* a ``$query`` loop answering queries of the registered workflows
  (:class:`~azync_flow.runtime.query_responder.QueryResponder`);
* leader-only maintenance under its own election (``azync_flow.workflow``):
  promote due workflow jobs, reap expired workflow tasks (re-run) and
  idempotent operations (re-run), park expired non-idempotent operations as
  uncertain (never re-run) and run the ``reconcile=`` hooks of uncertain
  operations (:class:`~azync_flow.runtime.uncertain.Reconciler`), repair stalled
  executions, vacuum finished ones;
* the scheduler of :mod:`azync_flow.schedules` (its own election,
  ``azync_flow.schedule``), which also creates the schedules of workflows
  declared with ``@workflow(schedule=...)``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from azync_flow import _metrics
from azync_flow._operations import decode_operation, seq_of_execution_key
from azync_flow._workflow.definitions import Registry
from azync_flow._workflow.limits import HistoryLimit
from azync_flow.errors import StoreUnavailableError
from azync_flow.replay.events import ActivityFailed, WorkflowTimedOut, encode_event
from azync_flow.runtime.activity_runner import ActivityRunner, ActivityStore, log_suspended
from azync_flow.runtime.admission import DepthFirstAdmission
from azync_flow.runtime.eager_start import EagerStarter
from azync_flow.runtime.folded_completion import CompletionFolder
from azync_flow.runtime.local_dispatch import LocalDispatch
from azync_flow.runtime.query_responder import (
    QUERY_KIND,
    QUERY_LEASE,
    QueryResponder,
    QueryStore,
)
from azync_flow.runtime.uncertain import uncertain_event
from azync_flow.runtime.workflow_runner import WorkflowRunner
from azync_flow.store.leadership import WorkerRegistryStore
from azync_flow.store.queue import Job, JobSettler, Source
from azync_flow.store.workflows import (
    StartCommitResult,
    UncertainStore,
    WorkflowMaintenance,
    WorkflowProducer,
    WorkflowStartParams,
    WorkflowState,
)
from azync_flow.telemetry import (
    AttemptKind,
    AttemptOutcome,
    RunKind,
    RunTracer,
    end_finished_run,
    flush_spans_on_stop,
)
from azync_flow.worker import Batch

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from azync_flow.worker import Worker

__all__ = [
    "WORKFLOW_LEADERSHIP",
    "WORKFLOW_TASK_KIND",
    "WorkflowRuntime",
    "lease_expired_event",
]

WORKFLOW_TASK_KIND = "$wft"
#: Election of the workflow maintenance steps (workers without workflows never win it).
WORKFLOW_LEADERSHIP = "azync_flow.workflow"
#: Executions one statement of the stalled repair examines.
STALLED_BATCH = 1000
#: Most wall time one run of the stalled repair spends catching up (the lease TTL
#: is longer: the leader renews between steps).
STALLED_SWEEP = timedelta(seconds=1)

log = logging.getLogger("azync_flow.workflow")

#: How often a workflow worker refreshes its registry row, and how long the row
#: counts as live without a refresh (a killed worker's row lapses then). A
#: refresh the database refused is tried again at every maintenance tick, so a
#: live worker's row lapsed in an outage is live again one tick after it ends.
PRESENCE_INTERVAL = timedelta(seconds=10)
PRESENCE_TTL = timedelta(seconds=30)
#: How often the leader looks for runs no live worker serves (a WARNING once each).
#: It does not look while its own refresh fails, nor for PRESENCE_INTERVAL after
#: one succeeds again: the other workers' rows may have lapsed in the same outage.
UNSERVED_INTERVAL = timedelta(seconds=30)


def _named(defn: Any) -> str:
    return f"{defn.name}@{defn.version}" if defn.version else str(defn.name)


def lease_expired_event(job: Job, reason: str) -> tuple[str, bytes]:
    """ActivityFailed ``(type, payload)`` for an operation given up by the reaper."""
    op = decode_operation(job.payload) if job.payload is not None else None
    seq = op.seq if op is not None else seq_of_execution_key(job.task_key)
    # with a heartbeat timeout only heartbeats keep the lease: its expiry is that timeout
    timeout = "heartbeat" if op is not None and op.heartbeat_timeout is not None else ""
    event = ActivityFailed(
        scheduled_seq=seq,
        error_type="LeaseExpired",
        message=reason,
        attempts=job.attempt,
        timeout=timeout,
    )
    return encode_event(event)


def operation_timed_out_event(job: Job, kind: str, timeout: timedelta) -> tuple[str, bytes]:
    """ActivityFailed ``(type, payload)`` for an operation a timeout of ``kind``
    (``schedule_to_start`` / ``schedule_to_close``) ended: the workflow's code
    gets ``ActivityTimeoutError``."""
    seq = (
        decode_operation(job.payload).seq
        if job.payload is not None
        else seq_of_execution_key(job.task_key)
    )
    event = ActivityFailed(
        scheduled_seq=seq,
        error_type="ActivityTimeoutError",
        message=f"{kind} timeout of {timeout.total_seconds():g}s elapsed",
        attempts=job.attempt,
        timeout=kind,
    )
    return encode_event(event)


def workflow_timed_out_event(kind: str, timeout: timedelta) -> tuple[str, bytes]:
    """WorkflowTimedOut ``(type, payload)``: the terminal event of an execution
    whose ``kind`` timeout (``execution`` / ``run``) elapsed."""
    return encode_event(WorkflowTimedOut(kind=kind, timeout_s=timeout.total_seconds()))


def heartbeat_budget_spent(job: Job) -> bool:
    """True when ``job`` is an operation with a heartbeat timeout whose lost
    attempt was the last its retry policy allows: a heartbeat timeout is
    retried by the policy, like a start-to-close timeout."""
    if job.payload is None:
        return False
    op = decode_operation(job.payload)
    budget = op.retry.budget(job.max_attempts)
    return op.heartbeat_timeout is not None and 0 < budget <= job.attempt


def lost_attempt_delay(job: Job) -> timedelta:
    """The retry backoff after a lost attempt: the operation's own policy."""
    if job.payload is None:
        return timedelta(0)
    return decode_operation(job.payload).retry.delay(max(job.attempt, 1))


@runtime_checkable
class WorkflowWorkerStore(
    ActivityStore,
    QueryStore,
    UncertainStore,
    WorkflowMaintenance,
    WorkflowProducer,
    WorkerRegistryStore,
    JobSettler,
    Protocol,
):
    """The roles a worker running workflows needs: replay passes, activity
    attempts, queries, uncertain operations, their maintenance, eager starts
    and the worker registry."""


class WorkflowRuntime:
    """Workflows and activities of a registry, running on a Worker.

    Built by ``attach_workflows`` before the worker starts.

    Args:
        worker: the worker to add loops and maintenance steps to.
        registry: workflow and activity definitions.
        cache_size: sticky-cache size of replayed instances (0 = full replay
            on every pass; results are identical).
        max_payload_bytes: per-value limit for workflow writes and activity
            results (None = no limit of ours; PostgreSQL's 1 GiB bytea applies).
        concurrency: concurrent workflow tasks (default: the worker's).
        activity_concurrency: concurrent attempts per activity kind (default: the worker's).
        stalled_after: a running execution with nothing scheduled for this
            long gets a workflow task (leader).
        retention: finished executions older than this are deleted with their
            history (leader; ``<= 0`` keeps them forever).
        max_reaps: lease expiries a workflow task or idempotent operation
            survives (default: the worker's).
        tracer_provider: OpenTelemetry provider (None = the global one).
        local_dispatch: run the activities a pass schedules on this worker
            when it registers them and has free slots (leased in the pass's
            commit, no dequeue), and commit an activity's outcome together
            with the next pass of an execution this worker caches. False: every
            operation is inserted pending and completed alone (the plain path).
        history_limit: the history size of a run past which the worker logs a
            WARNING suggesting ``continue_as_new`` (default
            :class:`~azync_flow.workflow.HistoryLimit`: 10,000 events / 10 MiB).
    """

    def __init__(
        self,
        worker: Worker,
        registry: Registry,
        *,
        cache_size: int = 1000,
        max_payload_bytes: int | None = None,
        concurrency: int | None = None,
        activity_concurrency: int | None = None,
        stalled_after: timedelta = timedelta(minutes=5),
        retention: timedelta = timedelta(days=7),
        max_reaps: int | None = None,
        tracer_provider: TracerProvider | None = None,
        local_dispatch: bool = True,
        history_limit: HistoryLimit | None = None,
    ) -> None:
        if Source.WORKFLOW in worker.maintained_sources:
            raise ValueError(
                "worker.maintain_source(Source.WORKFLOW) adds the generic reaper, which would "
                "re-run non-idempotent operations and drop lease-expired ones without history; "
                "attach_workflows adds the workflow maintenance itself"
            )
        store = worker.store
        if not isinstance(store, WorkflowWorkerStore):
            raise TypeError("the worker's store does not implement WorkflowWorkerStore")
        self.worker = worker
        self.store = store
        self.registry = registry
        self.tracer = RunTracer(tracer_provider)
        flush_spans_on_stop(worker, tracer_provider)
        self.stalled_after = stalled_after
        #: (task queue, workflow) pairs already warned about as served by no worker.
        self._unserved_warned: set[tuple[str, str]] = set()
        #: This worker's registry row: whether its refresh fails (the database is
        #: unreachable) and since when (monotonic) it succeeds again.
        self._presence_failing = False
        self._presence_back_at: float | None = None
        #: Where the incremental stalled repair resumes: (progress_at, id) examined last.
        self._stalled_cursor: tuple[datetime, uuid.UUID] | None = None
        self.retention = retention
        self.max_reaps = worker.max_reaps if max_reaps is None else max_reaps
        self.workflows = WorkflowRunner(
            store,
            registry,
            cache_size=cache_size,
            max_payload_bytes=max_payload_bytes,
            tracer=self.tracer,
            history_limit=history_limit,
        )
        self.activities = ActivityRunner(
            store, registry, max_payload_bytes=max_payload_bytes, tracer=self.tracer
        )

        async def dequeue_tasks(limit: int, lease: timedelta) -> Batch:
            # Only what this worker can run: its workflows on its task queues
            # (none registered: an empty lease that reads nothing).
            limit, first_passes = self.admission.lease_plan(limit)
            tasks = await store.lease_workflow_tasks(
                limit,
                lease,
                WORKFLOW_TASK_KIND,
                self.workflows.cache.known_seqs(),
                first_passes=first_passes,
                task_queues=worker.task_queues,
                names=list(registry.workflows),  # read per lease: a registry may grow
                exclude=self.workflows.left,
            )
            drained = bool(tasks) and not tasks[0].more_due
            return Batch(self.workflows.preload(tasks), drained)

        self.task_loop = worker.add_loop(
            Source.WORKFLOW,
            WORKFLOW_TASK_KIND,
            self.workflows.run,
            concurrency=concurrency,
            dequeue=dequeue_tasks,
        )
        # A pass that arms a durable timer wakes this loop at its due time, and
        # an idle poll learns the earliest timer other workers armed.
        self.workflows.timer_armed = self.task_loop.wake_in

        async def next_due() -> float | None:
            return await store.next_workflow_task_due(
                WORKFLOW_TASK_KIND, task_queues=worker.task_queues, names=list(registry.workflows)
            )

        self.task_loop.next_due = next_due
        #: Answers queries of these workflows (a cached instance or a full replay).
        self.queries = QueryResponder(self.workflows, store)
        self.query_loop = worker.add_loop(
            Source.WORKFLOW,
            QUERY_KIND,
            self.queries.run,
            concurrency=concurrency,
            lease=QUERY_LEASE,
            dequeue=self.queries.dequeue,
        )
        self.activity_loops = [
            worker.add_loop(
                Source.WORKFLOW, kind, self.activities.run, concurrency=activity_concurrency
            )
            for kind in registry.activities
        ]
        for kind, definition in registry.activities.items():
            worker.declare_limits(Source.WORKFLOW, kind, definition.options.limits)
        #: Depth-first: new executions start only while activity slots are free.
        self.admission = DepthFirstAdmission(self.task_loop, self.activity_loops)
        self.dispatch = LocalDispatch(
            {loop.kind: loop for loop in self.activity_loops},
            enabled=local_dispatch,
            task_queues=worker.task_queues,
        )
        self.workflows.dispatch = self.dispatch
        self.folder = CompletionFolder(self.workflows) if local_dispatch else None
        self.activities.folder = self.folder
        #: Starts executions with their first pass (a Client bound to this worker).
        self.eager = EagerStarter(self.workflows, self.task_loop, worker.task_queues)
        log.info(
            "workflows registered: %s; activities: %s",
            ", ".join(_named(w) for w in registry.workflows.values()) or "none",
            ", ".join(_named(a) for a in registry.activities.values()) or "none",
        )
        tick = timedelta(seconds=worker.maintenance.tick_seconds)
        steps = [
            ("workflow.promote", self.promote, tick),
            ("workflow.reap_tasks", self.reap_tasks, tick),
            ("workflow.reap_operations", self.reap_operations, tick),
            ("workflow.reap_uncertain", self.reap_uncertain, tick),
            ("workflow.timeouts", self.enforce_timeouts, tick),
            (
                "workflow.repair_stalled",
                self.repair_stalled,
                max(tick, min(stalled_after, timedelta(seconds=30))),
            ),
            ("workflow.vacuum", self.vacuum, worker.vacuum_interval),
            ("workflow.unserved", self.warn_unserved, UNSERVED_INTERVAL),
        ]
        for name, step, interval in steps:
            worker.add_maintenance(
                step,
                name=name,
                interval=interval,
                leadership=WORKFLOW_LEADERSHIP,
                source=Source.WORKFLOW,
            )
        if isinstance(worker.store, WorkerRegistryStore) and (
            registry.workflows or registry.activities
        ):
            self._register_presence(worker, worker.store, registry)

    # --- a client of this process bound to the worker ---------------------------------

    def accepts(self, name: str, task_queue: str) -> bool:
        """True while the worker runs, registers workflow ``name`` and serves
        ``task_queue``: a start of it may run its first pass here (:meth:`start`)."""
        return self.eager.accepts(name, task_queue)

    async def start(
        self, params: WorkflowStartParams, trace_context: dict[str, str] | None
    ) -> StartCommitResult:
        """Start an execution with its first pass run and committed by this worker
        (see :class:`~azync_flow.runtime.eager_start.EagerStarter`).

        Raises:
            ValueError: invalid names or meta (nothing written).
        """
        return await self.eager.start(params, trace_context=trace_context)

    def wake_tasks(self) -> None:
        """Look for workflow tasks now (a signal or update was just sent)."""
        self.task_loop.poke()

    def wake_queries(self) -> None:
        """Look for queries now (one was just asked)."""
        self.query_loop.poke()

    # --- maintenance steps (leader only; each returns what it made runnable) ---------

    def _register_presence(
        self, worker: Worker, store: WorkerRegistryStore, registry: Registry
    ) -> None:
        """Keep this worker's registry row (the workflows and activities it runs,
        the task queues it serves) fresh: written at start, every
        :data:`PRESENCE_INTERVAL` by this worker only (off the hot path), at
        every maintenance tick while the database refuses it, removed at stop;
        a killed worker's row lapses after :data:`PRESENCE_TTL`."""
        worker_id = uuid.uuid4()
        host, pid = socket.gethostname(), os.getpid()
        next_at = 0.0

        async def beat() -> None:
            nonlocal next_at
            now = time.monotonic()
            if now < next_at and not self._presence_failing:
                return
            next_at = now + PRESENCE_INTERVAL.total_seconds()
            try:
                await store.register_worker(
                    worker_id,
                    sorted(registry.workflows),
                    PRESENCE_TTL,
                    host=host,
                    pid=pid,
                    task_queues=worker.task_queues,
                    activities=sorted(registry.activities),
                )
            except StoreUnavailableError:
                # The store logs the outage once; the next tick tries again.
                self._presence_failing = True
                return
            if self._presence_failing:
                self._presence_failing = False
                self._presence_back_at = now

        async def leave() -> None:
            await store.unregister_worker(worker_id)

        tick = timedelta(seconds=worker.maintenance.tick_seconds)
        worker.add_periodic(
            beat, name="workflow.presence", interval=min(tick, PRESENCE_INTERVAL), on_stop=leave
        )

    def _presence_settling(self) -> bool:
        """True while this worker's registry refresh fails or succeeded again
        less than :data:`PRESENCE_INTERVAL` ago: live workers' rows may still
        be lapsed from the outage, so their absence proves nothing yet."""
        if self._presence_failing:
            return True
        back = self._presence_back_at
        return back is not None and time.monotonic() - back < PRESENCE_INTERVAL.total_seconds()

    async def warn_unserved(self) -> int:
        """One WARNING per (task queue, workflow) whose runs wait for a worker
        that is not there (none live registers the workflow on that queue).
        Skipped (a later round looks again) right after a database outage, see
        :meth:`_presence_settling`.

        Returns:
            0 (it makes nothing runnable).
        """
        if self._presence_settling():
            return 0
        for queue, name in await self.store.list_unserved_workflows():
            if (queue, name) in self._unserved_warned:
                continue
            self._unserved_warned.add((queue, name))
            log.warning(
                "executions of workflow %r on task queue %r wait: no live worker serves that "
                "workflow on that queue (describe() shows them blocked; start a worker that "
                "registers it with task_queues=[%r], or terminate them)",
                name,
                queue,
                queue,
            )
        return 0

    async def promote(self) -> int:
        """Due scheduled workflow jobs (retries after backoff, timers) -> pending."""
        return int(await self.store.promote_workflow_jobs())

    async def reap_tasks(self) -> int:
        """Workflow tasks whose worker died: back to pending (re-run), or dead and the
        execution suspended after ``max_reaps`` expiries. Each lost pass gets its
        ``workflow.task`` span, closed here with status ERROR ``lease expired``."""
        jobs: list[Job] = []
        report = await self.store.reap_workflow_tasks(self.max_reaps, on_reaped=jobs.append)
        for job in jobs:
            assert job.run_id is not None
            state = await self.store.load_workflow_task(job.run_id, after_seq=2**31 - 1)
            name = state.execution.name
            self.tracer.lost_attempt(
                AttemptKind.WORKFLOW_TASK,
                name,
                carrier=state.trace_context,
                run_id=job.run_id,
                attempt=job.attempt,
                started_at=job.started_at,
                outcome=self._reap_outcome(job),
                workflow_name=name,
            )
            if self._reap_outcome(job) is AttemptOutcome.DEAD and state.suspend_reason:
                _metrics.workflow_suspended(name, "lease_expired")
                log.warning("workflow %s suspended: %s", job.run_id, state.suspend_reason)
            else:
                log.info(
                    "reaper: workflow task of %s (workflow %s, attempt %d) was lost (lease "
                    "expired); its pass runs again",
                    name,
                    job.run_id,
                    job.attempt,
                )
        return int(report.reaped + report.killed)

    async def reap_operations(self) -> int:
        """Idempotent operations whose attempt was lost (worker died, or no heartbeat
        within ``heartbeat_timeout``): re-run as attempt + 1 after the activity's
        retry backoff (or failed after ``max_reaps``)."""
        jobs: list[Job] = []
        report = await self.store.reap_expired_operations(
            lease_expired_event,
            self.max_reaps,
            on_reaped=jobs.append,
            retry_delay=lost_attempt_delay,
            give_up=heartbeat_budget_spent,
        )
        for job in jobs:
            outcome = (
                AttemptOutcome.DEAD if heartbeat_budget_spent(job) else self._reap_outcome(job)
            )
            self._lost_activity(job, outcome)
            if outcome is AttemptOutcome.RETRIED:
                log.info(
                    "reaper: attempt %d of activity %s (workflow %s) was lost (lease "
                    "expired); it runs again as attempt %d",
                    job.attempt,
                    job.meta.get("activity", job.kind),
                    job.run_id,
                    job.attempt + 1,
                )
            else:
                log.warning(
                    "reaper: attempt %d of activity %s (workflow %s) was lost (lease "
                    "expired) %d times; the activity failed",
                    job.attempt,
                    job.meta.get("activity", job.kind),
                    job.run_id,
                    job.reap_count + 1,
                )
        return int(report.reaped + report.killed)

    async def enforce_timeouts(self) -> int:
        """End the executions whose execution or run timeout elapsed and fail
        the operations whose schedule-to-start or schedule-to-close timeout
        elapsed (database clock; docs/flow-control.md).

        Returns:
            How many operations were failed (their executions have a pass to run).
        """
        for ended in await self.store.time_out_workflows(workflow_timed_out_event):
            if ended.created_at is not None:
                end_finished_run(
                    self.tracer,
                    RunKind.WORKFLOW,
                    ended.name,
                    ended.id,
                    ended.trace_context,
                    ended.created_at,
                    WorkflowState.FAILED,
                    ended.reason,
                )
            log.warning(
                "workflow %s (%s) timed out: its %s timeout of %gs elapsed; it failed",
                ended.id,
                ended.name,
                ended.kind,
                ended.timeout.total_seconds(),
            )
        failed = await self.store.time_out_operations(operation_timed_out_event)
        for op in failed:
            log.warning(
                "activity %s of workflow %s timed out: its %s timeout of %gs elapsed; "
                "the call failed (not retried)",
                op.job.meta.get("activity", op.job.kind),
                op.job.run_id,
                op.kind,
                op.timeout.total_seconds(),
            )
        return len(failed)

    async def reap_uncertain(self) -> int:
        """Non-idempotent operations whose worker died: uncertain (never re-run);
        then the reconcile hooks of every uncertain operation without a verdict
        (these just parked, and any whose inline reconcile was missed by a crash).

        Returns:
            How many operations the hooks decided (their executions resumed).
        """
        jobs: list[tuple[Job, str]] = []

        def encode(job: Job, reason: str) -> tuple[str, bytes]:
            jobs.append((job, reason))
            return uncertain_event(job, reason)

        marked = set(await self.store.reap_uncertain_operations(encode))
        for job, reason in jobs:
            if job.id in marked:
                self._lost_activity(job, AttemptOutcome.UNCERTAIN)
                log_suspended(job, reason)
        reconciler = self.activities.reconciler
        return 0 if reconciler is None else await reconciler.run_once()

    def _reap_outcome(self, job: Job) -> AttemptOutcome:
        """What the reaper did with ``job`` (as it was before the reap): the store
        dead-letters it once its reap count reaches ``max_reaps``."""
        return (
            AttemptOutcome.DEAD
            if 0 < self.max_reaps <= job.reap_count + 1
            else AttemptOutcome.RETRIED
        )

    def _lost_activity(self, job: Job, outcome: AttemptOutcome) -> None:
        """Close the span of an activity attempt lost to lease expiry."""
        assert job.run_id is not None
        self.tracer.lost_attempt(
            AttemptKind.ACTIVITY,
            job.meta.get("activity", "operation"),
            carrier=job.meta,
            run_id=job.run_id,
            attempt=job.attempt,
            started_at=job.started_at,
            outcome=outcome,
            workflow_name=job.meta.get("workflow_name"),
            seq=decode_operation(job.payload).seq if job.payload is not None else None,
        )

    async def repair_stalled(self) -> int:
        """Running executions with nothing scheduled get a workflow task.

        Incremental: each execution is examined once it has gone
        ``stalled_after`` without a change (a keyset cursor over
        ``(progress_at, id)``, the 10-second bin of ``updated_at``), plus those
        holding a buffered signal, so an idle run costs what became due, not
        what is parked. The first run of this runtime sweeps every running
        execution, in batches, at most ``STALLED_SWEEP`` of wall time per run
        (the rest on the next runs).
        """
        repaired = 0
        deadline = time.monotonic() + STALLED_SWEEP.total_seconds()
        while True:
            scan = await self.store.scan_stalled_workflows(
                self.stalled_after, self._stalled_cursor, STALLED_BATCH
            )
            for execution in scan.stalled:
                await self.store.schedule_task(execution.id)
            repaired += len(scan.stalled)
            # advanced only once every stalled run of the batch got its task
            self._stalled_cursor = scan.cursor or self._stalled_cursor
            if scan.scanned < STALLED_BATCH or time.monotonic() >= deadline:
                return repaired

    async def vacuum(self) -> int:
        """Delete finished executions older than ``retention`` (with their history)."""
        if self.retention > timedelta(0):
            await self.store.vacuum_workflows(self.retention)
        return 0
