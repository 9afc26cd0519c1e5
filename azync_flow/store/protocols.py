"""The storage contract (``driver-contract.go.txt``) as ``typing.Protocol`` classes.

The runtime (worker, workflow, DAG scheduler, client) codes against these
Protocols, never against the Postgres driver. Each method ports one Go method
clause by clause; the Go doc comment is the specification and is summarised
here. Python conventions of the port:

* every I/O method is ``async``; ``context.Context`` is dropped (cancel the
  awaiting task instead);
* ``(value, err)`` returns become a value plus raised errors: a not-found
  error is :class:`~azync_flow.store.errors.NotFoundError` (see
  ``is_not_found``), any other backend failure a
  :class:`~azync_flow.store.errors.StoreError`;
* multi-value returns become tuples (``reap_expired -> (reaped, killed)``);
* ``uuid.Nil`` / zero times are ``None``; durations are ``timedelta``;
  payloads are ``bytes`` of JSON;
* a Go channel (``Wake``, ``Changes``) is a :class:`Subscription`, an async
  iterator closed with :meth:`Subscription.close` (the Go ``ctx`` ending);
  ``None`` instead of a subscription means the backend is poll-only;
* leadership is returned as ``None`` when another instance leads.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Literal, Protocol, Self, TypeVar, runtime_checkable

from .types import (
    AttemptError,
    Change,
    DAGDep,
    DAGFailure,
    DAGFilter,
    DAGParams,
    DAGSignalParams,
    DAGState,
    DAGView,
    DailyCount,
    Depths,
    DequeueParams,
    EnqueueParams,
    EventAdminRow,
    EventFilter,
    HistoryEvent,
    Job,
    JobFilter,
    JobState,
    LeasedTask,
    NukeReport,
    OperationSettle,
    OpsStats,
    PassCommitResult,
    PassWrite,
    PublishParams,
    QueryAnswer,
    QueryClaim,
    QueryRequest,
    ReplayFilter,
    ResolvedOperation,
    ScheduleChangeRecord,
    ScheduleMissedRecord,
    ScheduleOperationParams,
    ScheduleRecord,
    ScheduleRunRecord,
    SettledDAG,
    SignalParams,
    Source,
    StalledScan,
    StalledWorkflow,
    StartCommitResult,
    Subscriber,
    SubscriberView,
    TaskResult,
    TerminatedExecution,
    UncertainOperation,
    UpdateOutcome,
    Wake,
    WorkflowExecutionView,
    WorkflowStartParams,
    WorkflowState,
    WorkflowTaskState,
)

__all__ = [
    "ChangeNotifier",
    "DAGClientStore",
    "DAGStore",
    "LeaderElector",
    "LeadershipLease",
    "LeaseElector",
    "Migrator",
    "Notifier",
    "OperationStore",
    "ScheduleStore",
    "Store",
    "Subscription",
    "TxDAGStore",
    "TxStore",
    "UncertainStore",
    "WorkerRegistryStore",
    "WorkflowClientStore",
    "WorkflowInteractionStore",
    "WorkflowRuntimeStore",
    "WorkflowStore",
]

T_co = TypeVar("T_co", covariant=True)
TTx_contra = TypeVar("TTx_contra", contravariant=True)


@runtime_checkable
class Subscription(Protocol[T_co]):
    """A push stream (the Go channel of ``Wake``/``Changes``).

    Iterate it with ``async for`` (or ``await anext(sub)`` under
    ``asyncio.timeout`` to wait with a bound — cancelling a pending
    ``__anext__`` loses no item); iteration ends after :meth:`close`. Use it
    as an async context manager to close it on exit.
    """

    def __aiter__(self) -> Self: ...

    async def __anext__(self) -> T_co: ...

    async def close(self) -> None:
        """Stop the stream and release its connection. Idempotent."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class Store(Protocol):
    """Contract ``Store``: queue jobs, event deliveries, settles, maintenance, admin.

    Every settle verb (``ack``, ``reschedule``, ``dead``, ``skip``,
    ``release``, ``snooze``, ``extend_lease``) is fenced by the lease token:
    when the token no longer owns an active row it raises ``NotFoundError``
    and changes nothing. Every schedule uses the backend clock.
    """

    # --- producing -----------------------------------------------------------

    async def enqueue(self, p: EnqueueParams) -> bool:
        """Insert one queue job; False when deduplicated by its idempotency key.

        The live-key check always applies; a positive ``idempotency_ttl`` adds
        a time window that keeps the key rejected even after the job settles.
        Workers are woken after commit.
        """
        ...

    async def enqueue_many(self, ps: Sequence[EnqueueParams]) -> list[bool]:
        """Insert many queue jobs in one transaction; per item, False when
        deduplicated.

        Items are enqueued as :meth:`enqueue` would, one after another in
        order: an item whose key a live job, an unexpired TTL window or an
        earlier item of the batch holds writes nothing. Every item is checked
        before anything is written (a ``ValueError`` writes nothing); an
        existing or repeated id raises ``ConflictError`` and writes nothing.
        Workers of each due kind are woken once, after commit.
        """
        ...

    async def publish(self, p: PublishParams) -> int:
        """Append one event and fan out one pending delivery per registered
        subscriber of ``p.type``, atomically; wake each subscriber's workers.

        Returns:
            The number of deliveries created (0 when nobody subscribes).

        Raises:
            ConflictError: an event with the same ``id`` already exists.
        """
        ...

    async def register_subscriber(self, sub: Subscriber) -> None:
        """Upsert a subscriber registration keyed by ``(name, event_type)``."""
        ...

    async def subscribers(self, event_type: str) -> list[Subscriber]:
        """Registrations for an event type, ordered by name."""
        ...

    async def delete_subscriber(self, name: str, event_type: str) -> int:
        """Remove ``(name, event_type)``, or every registration of ``name`` when
        ``event_type`` is empty. Deliveries already fanned out are untouched.

        Returns:
            The number of registrations removed.
        """
        ...

    # --- leasing and settling -------------------------------------------------

    async def dequeue_batch(self, source: Source, p: DequeueParams) -> list[Job]:
        """Lease up to ``p.limit`` due pending jobs of ``(source, p.kind)`` for
        ``p.lease``, ordered by run_at then id: attempt incremented, fresh lease
        token, retry budget resolved durably. Event deliveries carry ``event``."""
        ...

    async def ack(self, id: uuid.UUID, lease_token: uuid.UUID) -> None:
        """Settle an active job as succeeded (kept as history); frees the live key."""
        ...

    async def ack_many(self, items: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> set[uuid.UUID]:
        """Extension: ack several ``(id, lease_token)`` pairs in one statement.

        Returns the ids acked; a stale pair is skipped (absent from the result)
        rather than raised.
        """
        ...

    async def reschedule(
        self, id: uuid.UUID, lease_token: uuid.UUID, delay: timedelta, last_error: str
    ) -> None:
        """Park a failed job as scheduled at now()+delay, recording the attempt."""
        ...

    async def dead(self, id: uuid.UUID, lease_token: uuid.UUID, last_error: str) -> None:
        """Dead-letter an active job, recording the final attempt."""
        ...

    async def skip(self, id: uuid.UUID, lease_token: uuid.UUID, reason: str) -> None:
        """Settle an active job as skipped: terminal, no result, ``reason`` kept as
        its last error, counted as processed in the daily stats.

        Raises:
            NotFoundError: the token no longer owns an active row (nothing changed).
        """
        ...

    async def release(self, id: uuid.UUID, lease_token: uuid.UUID) -> None:
        """Return a leased job to pending, attempt - 1 (floored at 0), no attempt recorded."""
        ...

    async def snooze(
        self,
        id: uuid.UUID,
        lease_token: uuid.UUID,
        delay: timedelta,
        deadline_error: str,
    ) -> bool:
        """Park an active job as scheduled at now()+delay without spending an attempt.

        The first snooze of a job with a snooze budget stamps
        ``deadline_at = now()+budget``; a snooze past that deadline dead-letters
        the job instead (recording the attempt with ``deadline_error``) and
        returns True ("deadlined"). Otherwise returns False.
        """
        ...

    async def extend_lease(self, id: uuid.UUID, lease_token: uuid.UUID, lease: timedelta) -> None:
        """Renew an active job's lease to now()+lease (a heartbeat)."""
        ...

    # --- maintenance -----------------------------------------------------------

    async def promote_due(self, source: Source, kinds: Sequence[str] | None = None) -> int:
        """Move due scheduled jobs of the kinds (None or empty: every kind) to
        pending, waking workers. Returns the count promoted."""
        ...

    async def reap_expired(
        self, source: Source, kinds: Sequence[str] | None = None, max_reaps: int = 5
    ) -> tuple[int, int]:
        """Reclaim expired active leases of the kinds (None or empty: every kind).

        Each returns to pending with reap_count + 1, or goes dead (recording an
        attempt) once reap_count reaches ``max_reaps``. Returns
        ``(reaped, killed)``, killed being the subset dead-lettered.
        """
        ...

    async def next_due_at(self) -> datetime | None:
        """The earliest moment after now (the store's clock) at which a job or
        workflow timer becomes due, or None when nothing waits on time."""
        ...

    async def vacuum_stats(self, source: Source, retention: timedelta) -> int:
        """Trim the daily counters (folded or not) of days older than retention
        (<= 0 keeps all)."""
        ...

    async def fold_stats(self, limit: int) -> int:
        """Fold up to ``limit`` recorded counter deltas (every source) into the
        daily counters, in one transaction.

        Every counted transaction (start, commit, settle, publish ...) only
        inserts delta rows, so none waits on a shared counter row; the leader's
        maintenance folds them. Reads (``stats``, ``all_daily``,
        ``list_kinds``) sum folded counts and pending deltas, so they are exact
        before and after a fold. Folds may race: each delta is counted by
        exactly one of them.

        Args:
            limit: the most delta rows folded by this call (> 0).

        Returns:
            The delta rows folded; ``limit`` means more may be pending.

        Raises:
            ValueError: ``limit`` is not positive.
        """
        ...

    async def vacuum_idempotency(self, source: Source) -> int:
        """Trim expired time-window idempotency keys."""
        ...

    async def vacuum_completed(self, source: Source, retention: timedelta) -> int:
        """Trim succeeded jobs completed before retention ago (<= 0 keeps all).

        DAG-owned (``dag_id``) and workflow-owned (``run_id``) jobs are exempt.
        """
        ...

    # --- admin ------------------------------------------------------------------

    async def list_kinds(self, source: Source) -> list[str]:
        """Distinct kinds of the source (live jobs and stat history), sorted."""
        ...

    async def kind_depths(self, source: Source) -> dict[str, Depths]:
        """Per-kind instantaneous state counters."""
        ...

    async def stats(self, source: Source, kind: str) -> tuple[Depths, list[DailyCount]]:
        """One kind's depths and its daily window, oldest day first."""
        ...

    async def all_daily(self, source: Source) -> list[DailyCount]:
        """Daily window summed over every kind, oldest day first."""
        ...

    async def list_jobs(
        self, source: Source, filter: JobFilter, offset: int, limit: int
    ) -> tuple[list[Job], int]:
        """A page of jobs and the total matching count.

        Ordering: pending/dead by enqueued_at asc; scheduled/paused by run_at
        asc; active by lease_until asc; succeeded by completed_at desc; no
        state filter by enqueued_at desc; ties by id.
        """
        ...

    async def get_job(self, source: Source, id: uuid.UUID) -> Job:
        """One job; NotFoundError when none matches."""
        ...

    async def job_attempts(self, source: Source, id: uuid.UUID) -> list[AttemptError]:
        """A job's failure history, oldest attempt first."""
        ...

    async def retry_job(self, source: Source, id: uuid.UUID) -> None:
        """Reset a dead job to pending (attempt, reap_count cleared); NotFoundError
        when not dead, ConflictError when a workflow execution or a DAG run owns it."""
        ...

    async def retry_all_dead(self, source: Source, kind: str) -> int:
        """Reset every dead job of (source, kind) ('' = all kinds) to pending,
        except those owned by a workflow execution or a DAG run; returns the count."""
        ...

    async def run_now(self, source: Source, id: uuid.UUID) -> None:
        """Expedite a scheduled job: pending with run_at = now, workers woken.

        Raises:
            NotFoundError: the job is missing or not scheduled.
        """
        ...

    async def archive_job(self, source: Source, id: uuid.UUID) -> None:
        """Force a pending or scheduled job to dead.

        Raises:
            NotFoundError: the job is missing or not pending/scheduled.
            ConflictError: a workflow execution or a DAG run owns the job.
        """
        ...

    async def pause_job(self, source: Source, id: uuid.UUID) -> None:
        """Hold a pending or scheduled job out of the ready set (paused).

        Raises:
            NotFoundError: the job is missing or not pending/scheduled.
        """
        ...

    async def resume_job(self, source: Source, id: uuid.UUID) -> None:
        """Return a paused job to pending (due) or scheduled (run_at in the future).

        Raises:
            NotFoundError: the job is missing or not paused.
        """
        ...

    async def delete_job(self, source: Source, id: uuid.UUID, state: JobState) -> None:
        """Delete one job of the source in ``state``.

        Raises:
            NotFoundError: no such job in that state.
            ConflictError: a workflow execution or a DAG run owns the job.
        """
        ...

    async def delete_all(self, source: Source, kind: str, state: JobState) -> int:
        """Delete every job of (source, kind) ('' = all kinds) in the state,
        except those owned by a workflow execution or a DAG run."""
        ...

    async def vacuum_dead(self, source: Source, kind: str, older_than: timedelta) -> int:
        """Delete dead jobs of ``(source, kind)`` enqueued before ``older_than`` ago.

        DAG- and workflow-owned jobs are exempt (their run removes them).
        """
        ...

    async def nuke_all(self, source: Source) -> NukeReport:
        """Delete every job, stat row and idempotency key of the source (a dev
        reset). The event ledger is left intact."""
        ...

    # --- event ledger admin --------------------------------------------------------

    async def list_events(
        self, filter: EventFilter, offset: int, limit: int
    ) -> tuple[list[EventAdminRow], int]:
        """Ledger events matching the filter, newest first, and the total count."""
        ...

    async def get_event(self, id: uuid.UUID) -> EventAdminRow:
        """One ledger event.

        Raises:
            NotFoundError: no event has this id.
        """
        ...

    async def list_subscriber_views(self, event_type: str) -> list[SubscriberView]:
        """Registrations ordered by event type then name ('' = all)."""
        ...

    async def ops_stats(self) -> OpsStats:
        """The event ledger admin summary."""
        ...

    async def replay(self, filter: ReplayFilter) -> int:
        """Re-fan-out matching events into fresh pending deliveries flagged replay."""
        ...

    async def retain(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` events that occurred before ``before`` and whose
        deliveries are all terminal (succeeded, dead, skipped or cancelled),
        cascading to those deliveries. An event with a pending, scheduled,
        active or paused delivery is kept. ``limit <= 0`` removes nothing.

        Returns:
            The number of events removed.
        """
        ...

    async def close(self) -> None:
        """Release the driver's resources."""
        ...


@runtime_checkable
class TxStore(Protocol[TTx_contra]):
    """Contract ``TxStore``: producers inside the caller's transaction ``tx``."""

    async def enqueue_tx(self, tx: TTx_contra, p: EnqueueParams) -> bool:
        """:meth:`Store.enqueue` on the caller's transaction; the wake fires on its commit."""
        ...

    async def enqueue_many_tx(self, tx: TTx_contra, ps: Sequence[EnqueueParams]) -> list[bool]:
        """:meth:`Store.enqueue_many` on the caller's transaction."""
        ...

    async def publish_tx(self, tx: TTx_contra, p: PublishParams) -> int:
        """:meth:`Store.publish` on the caller's transaction."""
        ...

    async def start_workflows_tx(
        self,
        tx: TTx_contra,
        ps: Sequence[WorkflowStartParams],
        *,
        trace_contexts: Sequence[Mapping[str, str]] | None = None,
    ) -> list[tuple[bool, uuid.UUID]]:
        """:meth:`WorkflowStore.start_workflows` on the caller's transaction."""
        ...


@runtime_checkable
class DAGStore(Protocol):
    """Contract ``DAGStore``: static DAGs with sagas."""

    async def create_dag(
        self, p: DAGParams, *, trace_context: Mapping[str, str] | None = None
    ) -> tuple[bool, uuid.UUID | None]:
        """Insert header, tasks and edges atomically; ``(inserted, existing_id)``.

        ``trace_context`` is the starter's W3C carrier, kept on the run.

        With a live ``(name, idempotency_key)`` nothing is inserted and the
        live execution's id is returned as ``(False, id)``.
        """
        ...

    async def signal(self, p: DAGSignalParams) -> tuple[int, bool]:
        """Deliver or buffer a signal; ``(delivered, deduplicated)``.

        NotFoundError for a missing or terminal DAG.
        """
        ...

    async def deliver_buffered_signals(self) -> int:
        """Hand buffered signals to tasks that became deliverable."""
        ...

    async def dag_trace_context(self, id: uuid.UUID) -> dict[str, str]:
        """The W3C carrier recorded when the run started (``{}`` without one).

        Raises:
            NotFoundError: the DAG does not exist.
        """
        ...

    async def find_dag_by_key(self, name: str, idempotency_key: str) -> uuid.UUID:
        """The live DAG holding the key; NotFoundError when none."""
        ...

    async def pause_dag(self, id: uuid.UUID, reason: str) -> None:
        """Freeze a running DAG; NotFoundError for any other state."""
        ...

    async def promote_unblocked(self, *, since: datetime | None = None) -> int:
        """Move blocked tasks whose dependencies are satisfied to their runnable state
        (``since``: only those whose dependencies settled after it; None: all)."""
        ...

    async def complete_due_sleeps(self) -> int:
        """Succeed every due scheduled sleep task."""
        ...

    async def apply_failure_policy(
        self, *, on_settled: Callable[[SettledDAG], None] | None = None
    ) -> list[DAGFailure]:
        """Apply each running DAG's on-failure policy to triggering dead tasks
        (``on_settled`` is called with each run it made terminal)."""
        ...

    async def complete_dags(
        self,
        *,
        since: datetime | None = None,
        on_settled: Callable[[SettledDAG], None] | None = None,
    ) -> int:
        """Settle DAGs whose work is finished; returns the number transitioned
        (``since`` as in :meth:`promote_unblocked`; ``on_settled`` per run settled)."""
        ...

    async def task_results(self, dag_id: uuid.UUID, keys: Sequence[str]) -> dict[str, TaskResult]:
        """Settled outcomes of succeeded and skipped tasks (empty keys: all)."""
        ...

    async def ack_task_result(self, id: uuid.UUID, lease_token: uuid.UUID, result: bytes) -> None:
        """Ack an active task and persist ``result`` (None = no result) atomically.

        Raises:
            NotFoundError: the lease token no longer owns an active row.
        """
        ...

    async def get_dag(self, id: uuid.UUID) -> DAGView:
        """One DAG header; NotFoundError when none."""
        ...

    async def list_dags(
        self, filter: DAGFilter, offset: int, limit: int
    ) -> tuple[list[DAGView], int]:
        """DAGs newest first, paginated, with the total count."""
        ...

    async def dag_tasks(self, id: uuid.UUID) -> list[Job]:
        """Every task job of the DAG (compensation tasks after the initial batch).

        Raises:
            NotFoundError: the DAG does not exist.
        """
        ...

    async def dag_deps(self, id: uuid.UUID) -> list[DAGDep]:
        """Every edge (static and compensation chain), ordered by (task_key, depends_on_key).

        An unknown id returns an empty list.
        """
        ...

    async def dag_name_state_counts(self) -> dict[str, dict[DAGState, int]]:
        """DAG counts per definition name and state."""
        ...

    async def dag_task_counts(
        self, ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, dict[JobState, int]]:
        """Task counts per state for each requested DAG; unknown ids are absent.

        An empty ``ids`` returns an empty map without querying.
        """
        ...

    async def retry_dag(self, id: uuid.UUID) -> None:
        """Reset dead tasks and resume a non-terminal DAG."""
        ...

    async def compensate_dag(self, id: uuid.UUID) -> SettledDAG | None:
        """Manually trigger compensation on a running or suspended DAG; the run
        when that settled it at once (nothing to compensate), else None."""
        ...

    async def cancel_dag(self, id: uuid.UUID) -> DAGState:
        """Cancel a non-terminal DAG without compensating; its new state."""
        ...

    async def vacuum_dags(self, retention: timedelta) -> int:
        """Delete terminal DAGs completed before ``retention`` ago, cascading.

        A retention <= 0 keeps everything and returns 0.
        """
        ...


@runtime_checkable
class TxDAGStore(Protocol[TTx_contra]):
    """Contract ``TxDAGStore``."""

    async def create_dag_tx(
        self, tx: TTx_contra, p: DAGParams, *, trace_context: Mapping[str, str] | None = None
    ) -> tuple[bool, uuid.UUID | None]:
        """:meth:`DAGStore.create_dag` inside the caller's transaction."""
        ...


@runtime_checkable
class WorkflowStore(Protocol):
    """Contract ``WorkflowStore``: workflow-as-code executions, history, operations."""

    async def start_workflow(
        self, p: WorkflowStartParams, *, trace_context: dict[str, str] | None = None
    ) -> tuple[bool, uuid.UUID]:
        """Insert an execution (and its first workflow task); ``(inserted, id)``
        where ``id`` is the existing execution's on a conflict."""
        ...

    async def start_workflows(
        self,
        ps: Sequence[WorkflowStartParams],
        *,
        trace_contexts: Sequence[Mapping[str, str]] | None = None,
    ) -> list[tuple[bool, uuid.UUID]]:
        """Insert many executions, each with its first workflow task, in one
        transaction; per item ``(inserted, id)`` as :meth:`start_workflow`.

        Items are started one after another in order: an item whose id or live
        ``(name, key)`` an execution or an earlier item holds writes nothing
        and returns that execution's id. ``IdempotencyConflictError`` when such
        an execution runs another workflow or input, ``ValueError`` for a bad
        item: both write nothing.
        """
        ...

    async def get_workflow_execution(self, id: uuid.UUID) -> WorkflowExecutionView:
        """One execution; NotFoundError when none."""
        ...

    async def list_workflow_executions(
        self,
        *,
        name: str | None = None,
        state: WorkflowState | str | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[WorkflowExecutionView]:
        """Executions newest first (``created_at``, then id); ``before`` is the
        keyset cursor ``(created_at, id)`` of the previous page's last row."""
        ...

    async def append_history(self, workflow_id: uuid.UUID, type: str, payload: bytes) -> int:
        """Append one history event; returns its seq."""
        ...

    async def list_history(
        self, workflow_id: uuid.UUID, after_seq: int = 0, limit: int | None = None
    ) -> list[HistoryEvent]:
        """The execution's history in seq order, past ``after_seq`` (``limit``: at most)."""
        ...

    async def signal_workflow(self, p: SignalParams) -> bool:
        """Buffer a signal (deduplicated by message id); False when a duplicate."""
        ...

    async def complete_workflow(self, id: uuid.UUID, result: bytes) -> None: ...

    async def fail_workflow(self, id: uuid.UUID, reason: str) -> None: ...

    async def cancel_workflow_execution(self, id: uuid.UUID) -> WorkflowState:
        """Request cancellation (a suspended execution ends cancelled at once);
        the execution's state after the request."""
        ...

    async def terminate_workflow(
        self, id: uuid.UUID, reason: str, terminated_by: str, event: tuple[str, bytes]
    ) -> TerminatedExecution:
        """Extension: end a running or suspended execution at once without its code
        (state ``terminated``, ``event`` appended, its jobs and timers cancelled,
        one ledger event); NotFoundError when missing or finished."""
        ...

    async def suspend_workflow(self, id: uuid.UUID, reason: str) -> None: ...

    async def resume_workflow(self, id: uuid.UUID) -> None: ...

    async def schedule_operation(self, p: ScheduleOperationParams) -> uuid.UUID:
        """Insert (or return the existing non-terminal) operation job by execution key."""
        ...

    async def schedule_task(
        self, workflow_id: uuid.UUID, kind: str, run_at: datetime | None = None
    ) -> None:
        """Insert one workflow-task job (None run_at: now)."""
        ...

    async def vacuum_workflows(self, retention: timedelta) -> int:
        """Delete terminal executions completed before retention ago (<= 0 keeps all)."""
        ...

    async def list_stalled_workflows(
        self, older_than: timedelta, limit: int
    ) -> list[StalledWorkflow]:
        """Running executions with nothing pending (no live workflow job, no unfired
        timer, not blocked on a signal), updated >= older_than ago."""
        ...

    async def scan_stalled_workflows(
        self,
        older_than: timedelta,
        after: tuple[datetime, uuid.UUID] | None,
        batch: int,
    ) -> StalledScan:
        """The next ``batch`` running executions updated >= older_than ago, in
        ``(updated_at, id)`` order after ``after`` (None: from the oldest), and
        every one holding a buffered signal: those of them that are stalled (as
        ``list_stalled_workflows``), and the cursor of the next batch."""
        ...


@runtime_checkable
class UncertainStore(Protocol):
    """Operations whose outcome is unknown: listing, deciding and reconciling them."""

    async def list_uncertain_operations(
        self, limit: int = 100, workflow_id: uuid.UUID | None = None
    ) -> list[UncertainOperation]:
        """Operations waiting for a decision, oldest first (optionally of one execution)."""
        ...

    async def get_operation(self, operation_job_id: uuid.UUID) -> UncertainOperation:
        """One operation in any state; NotFoundError when it does not exist."""
        ...

    async def resolve_uncertain(
        self,
        operation_job_id: uuid.UUID,
        decision: str,
        result: bytes | None = None,
        error: str | None = None,
        note: str | None = None,
        decided_by: str = "",
        *,
        resolved_event: tuple[str, bytes],
        outcome_event: tuple[str, bytes] | None = None,
        expected_attempt: int | None = None,
    ) -> ResolvedOperation:
        """Apply an audited decision (complete / fail / retry) to an uncertain
        operation, appending ``resolved_event`` (and ``outcome_event``) in one
        transaction. ConflictError when it is no longer uncertain (or its
        attempt is not ``expected_attempt``)."""
        ...

    async def list_unreconciled_operations(
        self, kinds: list[str], limit: int = 100
    ) -> list[UncertainOperation]:
        """Uncertain operations of ``kinds`` whose reconcile hook has not given a
        verdict for the current uncertain attempt yet, oldest first.

        A verdict is recorded by :meth:`record_reconcile_verdict` (unknown, hook
        error) or implied by a decision (the operation is no longer uncertain).
        """
        ...

    async def record_reconcile_verdict(
        self, operation_job_id: uuid.UUID, attempt: int, verdict: str
    ) -> bool:
        """Record that the reconcile hook left ``attempt`` undecided; False when
        the operation moved on (decided, or another attempt)."""
        ...


@runtime_checkable
class WorkflowClientStore(
    Store, TxStore[TTx_contra], WorkflowStore, UncertainStore, Protocol[TTx_contra]
):
    """What :class:`azync_flow.Client` needs: executions, uncertain operations and
    event publishing, also in the caller's transaction (``TTx_contra``: the
    driver's connection type)."""


@runtime_checkable
class DAGClientStore(DAGStore, TxDAGStore[TTx_contra], Protocol[TTx_contra]):
    """What :class:`azync_flow.dag.DAGClient` needs: the DAG verbs, also in the
    caller's transaction (``TTx_contra``: the driver's connection type)."""


@runtime_checkable
class WorkflowRuntimeStore(Protocol):
    """The hot path of the workflow runtime: lease, load and commit of replay
    passes, operation completion, and their one-transaction combinations.

    Every commit is fenced twice — by the lease token of the job(s) it settles
    and by the execution's expected ``next_seq`` — and writes nothing when a
    fence fails (NotFoundError for a token, ConflictError for the seq).
    """

    def now(self) -> datetime | None:
        """The clock override statements use (None = the backend clock)."""
        ...

    async def dequeue_workflow_tasks(
        self, limit: int, lease: timedelta, kind: str = "$wft", *, first_passes: bool = True
    ) -> list[Job]:
        """Lease up to ``limit`` due workflow tasks, never two of one execution.

        Tasks of executions in flight come before the first passes of new
        executions; ``first_passes=False`` leases only the former (depth-first
        admission when the caller's activity slots are scarce).
        """
        ...

    async def load_workflow_task(self, run_id: uuid.UUID, after_seq: int = 0) -> WorkflowTaskState:
        """Read the execution, its history past ``after_seq``, buffered signals and
        due timers in one statement (one snapshot, one round trip).

        Raises NotFoundError when the execution does not exist.
        """
        ...

    async def list_closed_children(
        self, parent_id: uuid.UUID, parent_run_id: uuid.UUID
    ) -> list[tuple[WorkflowExecutionView, dict[str, str]]]:
        """Executions the end of run ``parent_run_id`` terminated by parent-close
        policy (recursively), with their trace contexts."""
        ...

    async def lease_workflow_tasks(
        self,
        limit: int,
        lease: timedelta,
        kind: str = "$wft",
        known: Mapping[uuid.UUID, int] | None = None,
        *,
        first_passes: bool = True,
    ) -> list[LeasedTask]:
        """Lease workflow tasks and load each (history past ``known[run]``), one round
        trip; ordered and filtered as :meth:`dequeue_workflow_tasks`."""
        ...

    async def commit_pass(
        self,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
        write: PassWrite,
        *,
        next_task_at: datetime | Literal["now"] | None = None,
        keep_lease: timedelta | None = None,
    ) -> PassCommitResult:
        """Commit a pass and ack its workflow task, in one transaction."""
        ...

    async def abandon_workflow_task(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> bool:
        """Give up a leased task after a lost commit (release or ack)."""
        ...

    async def complete_operation(
        self,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
        event_type: str,
        payload: bytes,
        *,
        dead: bool = False,
        last_error: str = "",
    ) -> int:
        """Settle an operation, append its outcome, schedule a workflow task."""
        ...

    async def commit_completions(
        self, run_id: uuid.UUID, settles: Sequence[OperationSettle], write: PassWrite
    ) -> PassCommitResult:
        """Settle operations, append their outcomes and commit the pass that
        consumed them, in one transaction (no workflow task)."""
        ...

    async def start_workflow(
        self, p: WorkflowStartParams, *, trace_context: dict[str, str] | None = None
    ) -> tuple[bool, uuid.UUID]:
        """Insert an execution and its first workflow task; ``(inserted, id)``."""
        ...

    async def start_workflow_with_pass(
        self,
        p: WorkflowStartParams,
        write: PassWrite,
        *,
        trace_context: dict[str, str] | None = None,
    ) -> StartCommitResult:
        """Insert an execution and commit its first pass, in one transaction."""
        ...

    async def ack(self, id: uuid.UUID, lease_token: uuid.UUID) -> None:
        """Settle a leased job as succeeded (lease-fenced)."""
        ...

    async def reschedule(
        self, id: uuid.UUID, lease_token: uuid.UUID, delay: timedelta, last_error: str
    ) -> None:
        """Give a leased job back to run after ``delay`` (lease-fenced)."""
        ...

    async def extend_lease(self, id: uuid.UUID, lease_token: uuid.UUID, lease: timedelta) -> None:
        """Renew a lease to backend now + ``lease`` (lease-fenced)."""
        ...


@runtime_checkable
class OperationStore(WorkflowRuntimeStore, Protocol):
    """What an activity attempt settles with, beyond the hot path: parking an
    operation as uncertain and the late reports of a parked attempt."""

    async def mark_uncertain(
        self,
        operation_job_id: uuid.UUID,
        lease_token: uuid.UUID,
        reason: str,
        *,
        event_type: str,
        payload: bytes,
    ) -> int:
        """Park an active operation as uncertain and suspend its execution."""
        ...

    async def accept_late_report(
        self,
        operation_job_id: uuid.UUID,
        lease_token: uuid.UUID,
        event_type: str,
        payload: bytes,
        *,
        resolved_event: tuple[str, bytes],
        dead: bool = False,
        last_error: str = "",
        result: bytes | None = None,
    ) -> object:
        """Resolve a parked operation with its attempt's late outcome."""
        ...

    async def attempt_settlement(
        self, operation_job_id: uuid.UUID, lease_token: uuid.UUID
    ) -> tuple[JobState, str] | None:
        """State and last error of an operation no longer active that still
        carries ``lease_token`` (None otherwise): whether a report whose reply
        was lost had committed."""
        ...

    async def record_late_outcome(
        self,
        operation_job_id: uuid.UUID,
        attempt: int,
        event_type: str,
        payload: bytes,
        *,
        why: str,
    ) -> uuid.UUID:
        """Keep a refused late report as a ledger event."""
        ...


@runtime_checkable
class WorkflowInteractionStore(Protocol):
    """Queries and updates of workflow executions (what ``WorkflowHandle.query``
    / ``update`` and the worker's query loop use; update outcomes are written
    by the pass commit, ``PassWrite.updates``)."""

    async def request_workflow_query(self, p: QueryRequest) -> str:
        """Insert a pending query and wake the workers; returns the workflow name.
        NotFoundError: no such execution."""
        ...

    async def claim_workflow_queries(
        self, workflow_names: Sequence[str], limit: int
    ) -> list[QueryClaim]:
        """Claim up to ``limit`` pending, unexpired queries of these workflows,
        oldest first (``SKIP LOCKED``: each query goes to one worker); rows
        whose deadline passed a minute ago are deleted on the way."""
        ...

    async def answer_workflow_query(self, query_id: uuid.UUID, answer: QueryAnswer) -> bool:
        """Record a claimed query's answer and wake its caller; False when withdrawn."""
        ...

    async def take_workflow_query(
        self, query_id: uuid.UUID, *, withdraw: bool = False
    ) -> QueryAnswer | None:
        """Delete and return an answered query (any query with ``withdraw``)."""
        ...

    async def get_workflow_update(
        self, workflow_id: uuid.UUID, update_id: str
    ) -> UpdateOutcome | None:
        """The outcome of update ``update_id`` of an execution; None while it
        has none (not yet decided, or never requested)."""
        ...


@runtime_checkable
class ChangeNotifier(Protocol):
    """Contract ``ChangeNotifier``: change hints for admin surfaces."""

    async def changes(self) -> Subscription[Change] | None:
        """A stream of change hints whose first item is a ``ChangeEntity.RESET``
        sent once the push channel is live; a further RESET announces a gap.
        None when the backend is poll-only."""
        ...


@runtime_checkable
class Notifier(Protocol):
    """Contract ``Notifier``: wake-ups signalled by enqueues and publishes."""

    async def wake(self) -> Subscription[Wake] | None:
        """A stream of :class:`Wake` (source, kind), one per committed enqueue of a
        due job (and per publish delivery, promotion, run-now, retry). None when
        the store is poll-only. The stream survives a dropped connection."""
        ...


@runtime_checkable
class LeadershipLease(Protocol):
    """A held leadership (contract ``LeadershipLease``)."""

    async def valid(self) -> bool:
        """Renew the lease; True while this term still holds the leadership on
        the backend clock (one statement, once per tick)."""
        ...

    async def renew_if_due(self) -> bool:
        """:meth:`valid` when a third of the TTL passed since the last renewal,
        else True (so long maintenance ticks keep the lease)."""
        ...

    def fenced(self) -> AbstractContextManager[None]:
        """Fence the store statements of the current task by this term.

        Inside the block every statement runs in a transaction that first
        checks the term still leads (raising
        :class:`~azync_flow.store.LeadershipLostError` otherwise, nothing
        written) and blocks a takeover until it ends.
        """
        ...

    async def release(self) -> None:
        """Expire the lease now so another instance takes over at once.
        Idempotent; never raises."""
        ...


@runtime_checkable
class LeaderElector(Protocol):
    """Contract ``LeaderElector``."""

    async def acquire_leadership(self, name: str) -> Callable[[], Awaitable[None]] | None:
        """Contract ``LeaderElector.AcquireLeadership``.

        Returns:
            An async ``release`` callable when acquired, None when another
            instance leads. The caller renews nothing: the leadership lapses
            :data:`DEFAULT_LEADER_TTL` after acquisition unless released sooner.
        """
        ...


@runtime_checkable
class LeaseElector(Protocol):
    """Contract ``LeaseElector``."""

    async def acquire_leadership_lease(
        self, name: str, ttl: timedelta = ..., *, holder: str = ...
    ) -> LeadershipLease | None:
        """Try to take the named leadership; None when another instance leads.

        ``holder`` names the process for operators (default ``"<host>:<pid>"``).

        A leadership is a lease on the backend clock: free or lapsed for
        ``ttl`` since its last renewal, it is taken with a higher term. Renew
        it with :meth:`LeadershipLease.valid` (once per tick, well within
        ``ttl``), run leader-only writes inside :meth:`LeadershipLease.fenced`
        and release it when done.
        """
        ...


@runtime_checkable
class Migrator(Protocol):
    """Contract ``Migrator``."""

    async def migrate(self) -> list[int]:
        """Bring the schema up to date; returns the migration versions applied."""
        ...


@runtime_checkable
class WorkerRegistryStore(Protocol):
    """What each running worker registers (one row per worker, written only by
    it): the workflow names it runs, live until its expiry."""

    async def register_worker(
        self,
        worker_id: uuid.UUID,
        workflows: Sequence[str],
        ttl: timedelta,
        *,
        host: str = "",
        pid: int = 0,
    ) -> None:
        """Insert or refresh this worker's row, live for ``ttl`` from now."""
        ...

    async def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Remove this worker's row (it is stopping)."""
        ...

    async def live_workers_for_workflow(self, name: str) -> int:
        """How many live workers register workflow ``name``."""
        ...


@runtime_checkable
class ScheduleStore(Protocol):
    """Schedules and their run ledger (an extension of the contract).

    Times are the store's clock (``coalesce($now, now())``); ids are the
    user's schedule ids; ``spec``/``action``/``policy`` are stored byte for byte.
    """

    async def schedule_clock(self) -> datetime:
        """The store's current time (UTC)."""
        ...

    async def create_schedule(self, record: ScheduleRecord) -> bool:
        """Insert a schedule (its ``created_at``/``updated_at`` are the store clock).

        Returns:
            False when a schedule with this id exists (nothing written).
        """
        ...

    async def get_schedule(self, id: str) -> ScheduleRecord:
        """Raises NotFoundError: no schedule ``id``."""
        ...

    async def list_schedules(self, limit: int = 1000) -> list[ScheduleRecord]:
        """Schedules ordered by id."""
        ...

    async def due_schedules(self, limit: int = 100) -> list[ScheduleRecord]:
        """Unpaused schedules whose ``next_fire_at`` has come, most overdue first."""
        ...

    async def schedules_with_pending_runs(self) -> list[ScheduleRecord]:
        """Schedules holding a run still to start: requested (trigger,
        backfill) or buffered behind a running one."""
        ...

    async def pending_schedule_runs(self, schedule_id: str) -> list[ScheduleRunRecord]:
        """Requested and buffered runs of a schedule, oldest nominal time first."""
        ...

    async def request_schedule_runs(
        self,
        schedule_id: str,
        runs: Sequence[tuple[datetime, datetime, uuid.UUID]],
        overlap: str | None = None,
    ) -> int:
        """Record ``(nominal_at, fire_at, run_id)`` rows as ``requested`` for the
        scheduler to start; a nominal time already recorded is left alone.
        ``overlap`` overrides the schedule's overlap policy for these rows
        (None: the schedule's policy applies).

        Returns:
            How many rows were new.
        """
        ...

    async def update_schedule(
        self,
        id: str,
        spec: bytes,
        action: bytes,
        policy: bytes,
        cursor_at: datetime,
        next_fire_at: datetime | None,
        note: str = "",
    ) -> None:
        """Replace spec, action and policy, move the cursor to at least
        ``cursor_at`` and record the edit (time, values before and after).

        Raises NotFoundError: no schedule ``id``.
        """
        ...

    async def advance_schedule(
        self, id: str, cursor_at: datetime, next_fire_at: datetime | None
    ) -> bool:
        """Move the cursor to ``cursor_at`` (never back) and set the next fire.

        Returns:
            False when the schedule is gone or its cursor is already later
            (re-created meanwhile): nothing written.
        """
        ...

    async def set_schedule_paused(
        self, id: str, paused: bool, note: str, cursor_at: datetime, next_fire_at: datetime | None
    ) -> None:
        """Pause or unpause (the edit is recorded); the cursor moves to at
        least ``cursor_at``.

        Raises NotFoundError: no schedule ``id``.
        """
        ...

    async def delete_schedule(self, id: str) -> None:
        """Delete the schedule and its ledger (runs already started go on).

        Raises NotFoundError: no schedule ``id``.
        """
        ...

    async def record_schedule_run(
        self,
        schedule_id: str,
        nominal_at: datetime,
        fire_at: datetime,
        run_id: uuid.UUID,
        outcome: str,
    ) -> str | None:
        """Record the outcome of one nominal time (a ``buffered`` or
        ``requested`` row may be overwritten; any other is final).

        Returns:
            The outcome written, or None when the nominal time was already
            recorded with a final outcome (nothing written).
        """
        ...

    async def schedule_run(
        self, schedule_id: str, nominal_at: datetime
    ) -> ScheduleRunRecord | None:
        """The ledger row of one nominal time, if any."""
        ...

    async def recent_schedule_runs(
        self, schedule_id: str, limit: int, outcomes: Sequence[str] | None = None
    ) -> list[ScheduleRunRecord]:
        """Ledger rows, newest nominal time first, optionally of some outcomes."""
        ...

    async def last_started_schedule_run(self, schedule_id: str) -> ScheduleRunRecord | None:
        """The run started last (in start order, which a backfill of old
        nominal times makes differ from nominal order), if any."""
        ...

    async def record_schedule_missed(
        self,
        schedule_id: str,
        first_nominal_at: datetime,
        last_nominal_at: datetime,
        count: int,
        count_exact: bool,
        reason: str,
    ) -> bool:
        """Record the nominal times in ``[first, last]`` (``count`` of them) as
        missed, once per ``first_nominal_at``, and add ``count`` to the
        schedule's missed count.

        Returns:
            False when that range was recorded already (nothing written).
        """
        ...

    async def recent_schedule_missed(
        self, schedule_id: str, limit: int
    ) -> list[ScheduleMissedRecord]:
        """Missed ranges, newest first."""
        ...

    async def recent_schedule_changes(
        self, schedule_id: str, limit: int
    ) -> list[ScheduleChangeRecord]:
        """Edits (update, pause, unpause), newest first."""
        ...
