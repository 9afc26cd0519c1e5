"""The workflow contract: executions of ``@workflow`` code and their
append-only history, the replay passes that drive them (lease, load, commit),
activity operations (including those whose outcome is uncertain), child
executions, queries and updates.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import msgspec

from ._common import Subscription, TransactionIsolation, TTx_contra
from .events import EventConsumer, EventProducer, TxEventProducer
from .queue import (
    DEFAULT_TASK_QUEUE,
    Job,
    JobState,
    LimitStore,
    QueueProducer,
    ReapReport,
    TxQueueProducer,
)

__all__ = [
    "DONE_RESET",
    "BufferedSignal",
    "ChildSignalParams",
    "ChildStartParams",
    "HistoryEvent",
    "LeasedTask",
    "OperationLease",
    "OperationSettle",
    "OperationState",
    "OperationStore",
    "OperationTransaction",
    "Outcome",
    "PassCommitResult",
    "PassWrite",
    "QueryAnswer",
    "QueryClaim",
    "QueryRequest",
    "ResetResult",
    "ResolvedOperation",
    "ScheduleOperationParams",
    "SearchFilter",
    "SignalParams",
    "StalledScan",
    "StalledWorkflow",
    "StartCommitResult",
    "TerminatedExecution",
    "TimedOutOperation",
    "TimedOutWorkflow",
    "TransactionIsolation",
    "TransactionalOperationStore",
    "TxWorkflowProducer",
    "UncertainDecision",
    "UncertainOperation",
    "UncertainStore",
    "UpdateOutcome",
    "WorkflowAdmin",
    "WorkflowClientStore",
    "WorkflowExecutionView",
    "WorkflowInteractionStore",
    "WorkflowMaintenance",
    "WorkflowProducer",
    "WorkflowRunView",
    "WorkflowRuntimeStore",
    "WorkflowStartParams",
    "WorkflowState",
    "WorkflowTaskState",
]

#: The id a :meth:`WorkflowInteractionStore.workflow_done_events` stream yields
#: after a reconnect: hints may have been missed, every waiter re-reads.
DONE_RESET = uuid.UUID(int=0)


class WorkflowState(enum.StrEnum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: ended by an operator's ``terminate``: no workflow code ran to end it
    TERMINATED = "terminated"


class OperationState(enum.StrEnum):
    """State of an activity operation, as seen through its job row."""

    PENDING = "pending"
    ACTIVE = "active"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNCERTAIN = "uncertain"


class UncertainDecision(enum.StrEnum):
    COMPLETE = "complete"
    FAIL = "fail"
    RETRY = "retry"


class WorkflowStartParams(msgspec.Struct, kw_only=True):
    """An execution to start.

    Attributes:
        task_queue: the task queue its workflow tasks are routed to ("" =
            ``"default"``); its activities and children default to it.
        priority: the lease priority of its workflow tasks (higher first, aged
            by waiting: see ``QueueConsumer.dequeue_batch``); its activities
            and children default to it.
        execution_timeout: the longest the whole execution may take, from
            its start, across continue-as-new runs (None: no limit).
        run_timeout: the longest one run may take, from the run's start
            (None: no limit). Either elapsing fails the execution with
            ``WorkflowTimeoutError`` (docs/flow-control.md).
    """

    id: uuid.UUID
    name: str
    input: bytes
    version: str = ""
    business_idempotency_key: str = ""
    task_queue: str = DEFAULT_TASK_QUEUE
    meta: dict[str, str] = msgspec.field(default_factory=dict)
    priority: int = 0
    execution_timeout: timedelta | None = None
    run_timeout: timedelta | None = None
    #: Search attributes to start with: name -> str, int, float, bool or
    #: timezone-aware datetime (``azync_flow.search``).
    search_attributes: dict[str, Any] = msgspec.field(default_factory=dict)


class SearchFilter(msgspec.Struct, frozen=True, kw_only=True):
    """One search attribute comparison of a listing (``azync_flow.search``
    builds and checks them: ``SearchAttr("amount") > 1000``).

    Attributes:
        name: the attribute's name.
        op: one of ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``.
        values: the value compared with (one; any number for ``in``): str,
            int, float, bool or timezone-aware datetime.
    """

    name: str
    op: str
    values: tuple[Any, ...]


class WorkflowExecutionView(msgspec.Struct, kw_only=True):
    """One workflow execution as ``describe()``, ``list()`` and the CLI show it.

    Attributes:
        suspend_reason: why the execution is suspended (non-determinism, a
            forbidden call, an uncertain operation, a workflow task that kept
            losing its lease, an operator); '' when it never was or was
            resumed. Kept when a suspended execution is cancelled.
        suspend_seq: the history seq the suspension concerns: where replay
            disagreed with the code, or the ``OperationUncertain`` event of an
            uncertain operation; None when not tied to one (a forbidden call).
        suspend_operation_id: the operation job the suspension concerns (an
            uncertain operation, to pass to ``resolve_uncertain``), else None.
        signals_undelivered: signals accepted (``signal()`` returned True) but
            never consumed by the code before the execution finished; each is
            listed in the history's terminal ``SignalsUndelivered`` event.
    """

    id: uuid.UUID
    name: str
    version: str
    state: WorkflowState
    business_idempotency_key: str
    task_queue: str
    input: bytes
    result: bytes | None
    failure_reason: str
    meta: dict[str, str]
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None
    suspend_reason: str = ""
    suspend_seq: int | None = None
    suspend_operation_id: uuid.UUID | None = None
    signals_undelivered: int = 0
    #: Why a running execution is not progressing: its workflow task keeps
    #: failing (e.g. no worker registers the workflow) — the last error and
    #: the attempts made. "" when nothing is known to hold it up.
    blocked_reason: str = ""
    #: The current run (``continue_as_new`` starts a new one in place): its id
    #: (the execution id for the first run), number (from 1) and start.
    run_id: uuid.UUID | None = None
    run_no: int = 1
    run_started_at: datetime | None = None
    #: For a child execution: its parent, the parent run that started it, the
    #: seq of the ChildStarted event there, and its parent-close policy.
    parent_id: uuid.UUID | None = None
    parent_run_id: uuid.UUID | None = None
    parent_seq: int | None = None
    parent_close_policy: str = ""
    #: Size of the current run's history (``describe()`` fills these; None
    #: when not read) and whether it passed the history limit's warning
    #: threshold (then ``continue_as_new`` is due).
    history_events: int | None = None
    history_bytes: int | None = None
    history_limit_exceeded: bool = False
    #: What a running execution waits on, as its last committed pass left it
    #: (``describe()`` fills these): the signal names of its ``wait_signal``
    #: calls, and when its earliest unfired timer is due (None: no timer).
    awaited_signals: list[str] = msgspec.field(default_factory=list)
    next_timer_at: datetime | None = None
    #: The lease priority of its workflow tasks (and default of its activities).
    priority: int = 0
    #: Its timeouts (None: no limit) and the deadline of the current run: the
    #: earlier of the execution's and the run's (None: none; kept after the end).
    execution_timeout: timedelta | None = None
    run_timeout: timedelta | None = None
    timeout_at: datetime | None = None
    #: Its search attributes as the start and the code's upserts left them.
    search_attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    #: When the current run was started by a reset: the run it replaced
    #: (``run_no``), the last seq of that run's history it kept, and why.
    reset_from_run: int | None = None
    reset_seq: int | None = None
    reset_reason: str = ""


class WorkflowRunView(msgspec.Struct, kw_only=True):
    """One run of an execution (``continue_as_new`` chains them).

    Attributes:
        run_no: 1 for the first run.
        run_id: the run's id (the execution id for the first run).
        input: the run's input (JSON bytes).
        started_at / ended_at: when it began; when it ended: continued as new,
            or (the final run) when the execution completed; None while the
            current run is live.
        events: history events of the run (so far, for the current run).
        current: True for the execution's current (or final) run.
        state: ``"continued_as_new"`` or ``"reset"`` for an earlier run; the
            execution's state for the current (or final) run (``running``,
            ``succeeded`` ...).
        reset_seq / reset_reason / state_at_reset: for a run ended by a reset:
            the last seq of its history the next run kept, why, and the state
            it was in (``running``, ``failed`` ...).
    """

    run_no: int
    run_id: uuid.UUID
    input: bytes
    started_at: datetime
    ended_at: datetime | None
    events: int
    current: bool = False
    state: str = "continued_as_new"
    reset_seq: int | None = None
    reset_reason: str = ""
    state_at_reset: str = ""


class ResetResult(msgspec.Struct, kw_only=True):
    """What ``WorkflowAdmin.reset_workflow`` did.

    Attributes:
        run_no / run_id: the new run.
        kept: the last seq of the old run's history the new run keeps.
        previous_state: the state the execution was in before the reset.
        rerun_activities: activities enqueued again (scheduled in the kept
            history without their outcome there).
        redelivered_signals: signals the old run consumed after the point,
            buffered again for the new run.
    """

    run_no: int
    run_id: uuid.UUID
    kept: int
    previous_state: WorkflowState
    rerun_activities: int
    redelivered_signals: int


class TerminatedExecution(msgspec.Struct, kw_only=True):
    """What ``terminate_workflow`` ended.

    Attributes:
        seq: history seq of the terminal ``WorkflowTerminated`` event.
        previous_state: ``running`` or ``suspended``.
        operations: the cancelled operations, ``"<execution key> <kind>"`` each.
        workflow_tasks: workflow tasks cancelled (a leased one included).
        timers: seqs of the cancelled (never delivered) timers.
        signals_undelivered: accepted signals its code never consumed, recorded
            undelivered after the terminal event.
        trace_context: the run's W3C trace context.
    """

    seq: int
    previous_state: WorkflowState
    operations: list[str]
    workflow_tasks: int
    timers: list[int]
    signals_undelivered: int
    trace_context: dict[str, str]


class HistoryEvent(msgspec.Struct, kw_only=True):
    workflow_id: uuid.UUID
    seq: int
    type: str
    payload: bytes
    created_at: datetime


class SignalParams(msgspec.Struct, kw_only=True):
    workflow_id: uuid.UUID
    name: str
    payload: bytes = b"null"
    message_id: str = ""


class ScheduleOperationParams(msgspec.Struct, kw_only=True):
    """An operation (one activity call) to insert.

    Attributes:
        task_queue: the task queue its attempts are routed to ("" = ``"default"``).
        priority: its lease priority (higher first, aged by waiting).
        schedule_to_start: the longest it may wait, from now, for its first
            lease (None: no limit).
        schedule_to_close: the longest it may take, from now, to settle,
            across every attempt (None: no limit).
        limit_key: its key for the limits of its kind (``LimitStore``); None
            when its activity declares no limits.
    """

    workflow_id: uuid.UUID
    kind: str
    payload: bytes
    execution_key: str
    meta: dict[str, str] = msgspec.field(default_factory=dict)
    run_at: datetime | None = None
    max_attempts: int = 0
    task_queue: str = DEFAULT_TASK_QUEUE
    priority: int = 0
    schedule_to_start: timedelta | None = None
    schedule_to_close: timedelta | None = None
    limit_key: str | None = None


class TimedOutWorkflow(msgspec.Struct, kw_only=True):
    """An execution a timeout ended (``time_out_workflows``).

    Attributes:
        id: the execution id.
        name: its workflow name.
        kind: ``"execution"`` or ``"run"``: the timeout that elapsed.
        timeout: its length.
        previous_state: ``running`` or ``suspended``.
        reason: its failure reason (``WorkflowTimeoutError: ...``).
        created_at: when it started.
        trace_context: its run's W3C trace context (to end its run span).
    """

    id: uuid.UUID
    name: str
    kind: str
    timeout: timedelta
    previous_state: WorkflowState
    reason: str = ""
    created_at: datetime | None = None
    trace_context: dict[str, str] = msgspec.field(default_factory=dict)


class TimedOutOperation(msgspec.Struct, kw_only=True):
    """An operation a timeout failed (``time_out_operations``).

    Attributes:
        job: the operation as it was when its deadline passed.
        kind: ``"schedule_to_start"`` or ``"schedule_to_close"``.
        timeout: its length.
    """

    job: Job
    kind: str
    timeout: timedelta


class StalledWorkflow(msgspec.Struct, kw_only=True):
    """A running execution with nothing pending (see ``list_stalled_workflows``).

    Attributes:
        id: the execution id.
        name: its workflow name.
        updated_at: its last change (nothing has moved it since).
    """

    id: uuid.UUID
    name: str
    updated_at: datetime | None = None


class StalledScan(msgspec.Struct, kw_only=True):
    """One batch of the incremental stalled-execution scan (``scan_stalled_workflows``).

    Attributes:
        stalled: the stalled executions found in the batch, oldest first.
        scanned: candidates examined; fewer than the batch means the scan
            caught up with every execution aged ``older_than``.
        cursor: ``(progress_at, id)`` of the last candidate examined (its
            10-second progress bin and id), the ``after`` of the next batch
            (None: none examined; keep the old one).
    """

    stalled: list[StalledWorkflow]
    scanned: int
    cursor: tuple[datetime, uuid.UUID] | None = None


#: A pass outcome: ("complete", result bytes) | ("fail", reason) |
#: ("cancelled", reason) | ("suspend", reason[, history seq it concerns or
#: None]) | ("continue", new input bytes, new run id, the pass saw the cancel
#: request); None = keep running.
Outcome = (
    tuple[Literal["complete"], bytes]
    | tuple[Literal["fail", "cancelled", "suspend"], str]
    | tuple[Literal["suspend"], str, int | None]
    | tuple[Literal["continue"], bytes, uuid.UUID, bool]
)


class ChildStartParams(msgspec.Struct, kw_only=True):
    """A child execution a pass starts (its ``ChildStarted`` event is in the pass).

    Attributes:
        seq: the parent's seq of the ChildStarted event.
        id: the child execution id.
        name / version / input: the child workflow and its encoded input.
        parent_close_policy: ``terminate``, ``request_cancel`` or ``abandon``.
        trace_context: the child's run carrier (in the parent's trace).
        task_queue: the child's task queue ("" = ``"default"``).
        priority: the child's priority.
        execution_timeout / run_timeout: the child's timeouts (None: none).
    """

    seq: int
    id: uuid.UUID
    name: str
    version: str
    input: bytes
    parent_close_policy: str = "terminate"
    trace_context: dict[str, str] = msgspec.field(default_factory=dict)
    task_queue: str = DEFAULT_TASK_QUEUE
    priority: int = 0
    execution_timeout: timedelta | None = None
    run_timeout: timedelta | None = None


class ChildSignalParams(msgspec.Struct, kw_only=True):
    """A signal a pass sends to one of its children (``ChildSignaled`` event)."""

    workflow_id: uuid.UUID
    name: str
    payload: bytes
    message_id: str


class BufferedSignal(NamedTuple):
    """A signal accepted but not yet consumed by a pass, in arrival order.

    Attributes:
        signal_id: the store's id of the signal (arrival order).
        name: the signal name.
        payload: its JSON-encoded argument.
        message_id: the sender's deduplication id ('' when none).
    """

    signal_id: int
    name: str
    payload: bytes = b"null"
    message_id: str = ""


class WorkflowTaskState(msgspec.Struct, kw_only=True):
    """Everything a replay pass reads, from one snapshot.

    Attributes:
        execution: the execution row.
        next_seq: seq the pass's first new event will take (the commit fence).
        cancel_requested: cancellation was requested.
        suspend_reason: why the execution is suspended ('' when running).
        trace_context: the starter's W3C trace context.
        history: events with seq > ``after_seq``, in order.
        signals: buffered (unconsumed) signals, in arrival order.
        due_timers: seqs of unfired timers whose fire time has come.
        now: the backend (or overridden) clock at the snapshot.
    """

    execution: WorkflowExecutionView
    next_seq: int
    cancel_requested: bool
    suspend_reason: str
    trace_context: dict[str, str]
    history: list[HistoryEvent]
    signals: list[BufferedSignal]
    due_timers: list[int]
    now: datetime


class OperationLease(msgspec.Struct, kw_only=True):
    """Operations of a pass to insert already leased to the committing worker
    (state active, attempt 1, a fresh fencing token, no NOTIFY), so it runs
    them at once without a dequeue.

    Attributes:
        keys: execution keys (``ScheduleOperationParams.execution_key``) to
            lease; an operation with a ``run_at`` or deduplicated against an
            existing one is never leased.
        lease: lease duration, from the backend clock at the commit.
        default_max_attempts: attempt budget of an operation whose call set none.
    """

    keys: list[str]
    lease: timedelta
    default_max_attempts: int = 25


class UpdateOutcome(msgspec.Struct, kw_only=True):
    """How an update ended (kept per ``(execution, update_id)``; the first wins).

    Attributes:
        update_id: the update's id.
        name: the update name.
        state: ``"rejected"`` (not recorded in history), ``"completed"`` or ``"failed"``.
        result: the JSON result when completed, else None.
        error_type: class name of the rejection or failure ("" when completed).
        message: its message.
    """

    update_id: str
    name: str
    state: str
    result: bytes | None = None
    error_type: str = ""
    message: str = ""


class QueryRequest(msgspec.Struct, kw_only=True):
    """A query to answer (``request_workflow_query``).

    Attributes:
        id: the query's id (the caller's handle on the answer).
        workflow_id: the execution asked.
        name: the query name.
        args: the arguments, a JSON array.
        timeout: how long a worker may take to claim it (after that it is left).
    """

    id: uuid.UUID
    workflow_id: uuid.UUID
    name: str
    args: bytes = b"[]"
    timeout: timedelta = timedelta(seconds=10)


class QueryClaim(msgspec.Struct, kw_only=True):
    """A query a worker claimed to answer."""

    id: uuid.UUID
    workflow_id: uuid.UUID
    workflow_name: str
    name: str
    args: bytes


class QueryAnswer(msgspec.Struct, kw_only=True):
    """The answer of a query: ``state`` is ``"answered"`` (``answer`` holds the
    JSON result) or ``"failed"`` (``error_type``: ``message``; ``error_type``
    ``QueryNotFoundError`` for an unknown name), or ``"pending"``/``"claimed"``
    for a query withdrawn unanswered."""

    state: str
    answer: bytes | None = None
    error_type: str = ""
    message: str = ""


class PassWrite(msgspec.Struct, kw_only=True):
    """What one replay pass writes, fenced by the seq it replayed up to.

    Attributes:
        expected_next_seq: the execution's ``next_seq`` the pass saw; the
            commit fails with ConflictError when it moved.
        events: ``(type, payload)`` appended from the first free seq, in order.
        operations: operations to schedule (deduplicated by execution key).
        timers: ``(seq, fire after)`` durable timers, on the backend clock.
        consumed_signals: ``(signal id, seq of its SignalReceived event)``.
        fired_timers: timer seqs to mark fired.
        outcome: terminal or suspending outcome; None keeps the execution running.
        local: operations to insert leased to the committing worker.
        awaited_signals: signal names the pass left the workflow waiting for
            (replaces the recorded set; None keeps it).
        run_id: the run the pass belongs to (None = the first run); the
            parent run of the children it starts.
        children: child executions to create (idempotent by id).
        child_signals: signals to buffer for children (deduplicated by message id).
        child_cancels: children to request cancellation of.
        updates: outcomes of the updates the pass rejected, completed or failed.
        cancel_known: the pass knows of the execution's cancel request, if
            any (it was told of it, or delivered it). A pass that keeps the run
            going, completes or fails it while a cancel it does not know of is
            requested is refused (ConflictError): it runs again with it.
    """

    expected_next_seq: int
    events: list[tuple[str, bytes]] = msgspec.field(default_factory=list)
    operations: list[ScheduleOperationParams] = msgspec.field(default_factory=list)
    timers: list[tuple[int, timedelta]] = msgspec.field(default_factory=list)
    consumed_signals: list[tuple[int, int]] = msgspec.field(default_factory=list)
    fired_timers: list[int] = msgspec.field(default_factory=list)
    outcome: Outcome | None = None
    local: OperationLease | None = None
    awaited_signals: list[str] | None = None
    run_id: uuid.UUID | None = None
    children: list[ChildStartParams] = msgspec.field(default_factory=list)
    child_signals: list[ChildSignalParams] = msgspec.field(default_factory=list)
    child_cancels: list[uuid.UUID] = msgspec.field(default_factory=list)
    updates: list[UpdateOutcome] = msgspec.field(default_factory=list)
    cancel_known: bool = False


class OperationSettle(msgspec.Struct, kw_only=True):
    """The end of one leased operation attempt, recorded with the next pass.

    Attributes:
        job_id: the operation job.
        lease_token: its fencing token.
        event_type: history event type of the outcome (``ActivityCompleted`` ...).
        payload: the encoded event.
        dead: dead-letter the job (a final failure) instead of acking it.
        last_error: the error text of a dead job.
    """

    job_id: uuid.UUID
    lease_token: uuid.UUID
    event_type: str
    payload: bytes
    dead: bool = False
    last_error: str = ""


class PassCommitResult(msgspec.Struct, kw_only=True):
    """What a committed pass wrote.

    Attributes:
        next_seq: the execution's new ``next_seq``.
        leased: the operations inserted leased to the caller (``PassWrite.local``),
            ready to run (``lease_token`` set).
        now: the backend (or overridden) clock of the commit.
    """

    next_seq: int
    leased: list[Job] = msgspec.field(default_factory=list)
    now: datetime | None = None


class StartCommitResult(msgspec.Struct, kw_only=True):
    """Result of a start committed together with its first pass.

    Attributes:
        inserted: False when an execution with the same id (or live idempotency
            key) exists; then nothing was written.
        id: the new execution's id, or the existing one's.
        commit: what the first pass wrote (None when not inserted).
    """

    inserted: bool
    id: uuid.UUID
    commit: PassCommitResult | None = None


class LeasedTask(msgspec.Struct, kw_only=True):
    """A workflow task leased together with what its pass reads.

    Attributes:
        job: the leased task (``lease_token`` fences its commit).
        state: the load, history past ``after_seq``.
        after_seq: the seq the history was read past (0 = the whole history).
        more_due: the lease that took this task left a due task behind (the
            batch was full, or a concurrent lease held a due task's lock);
            False: it took every task due for the caller then. Every task of
            one lease carries the same answer.
    """

    job: Job
    state: WorkflowTaskState
    after_seq: int
    more_due: bool


class ResolvedOperation(NamedTuple):
    """What ``resolve_uncertain`` returns: the execution of the decided operation."""

    workflow_id: uuid.UUID
    workflow_name: str


class UncertainOperation(msgspec.Struct, kw_only=True):
    """One operation waiting for a decision.

    Attributes:
        job_id: the operation job id (what ``resolve_uncertain`` takes).
        workflow_id / workflow_name: its execution.
        kind: ``$op:<activity>@<version>``; ``activity`` is meta's "activity"
            or the name parsed from ``kind``.
        execution_key: ``<workflow_id>/<seq>``, the natural idempotency key.
        input: the operation payload, byte for byte.
        attempt: attempts leased so far.
        since / reason: when and why it turned uncertain.
        state: the job state ('uncertain' in listings; any from ``get_operation``).
    """

    job_id: uuid.UUID
    workflow_id: uuid.UUID
    workflow_name: str
    kind: str
    activity: str
    execution_key: str
    input: bytes
    attempt: int
    since: datetime | None
    reason: str
    meta: dict[str, str]
    state: str = "uncertain"


@runtime_checkable
class WorkflowProducer(Protocol):
    """Starts executions and signals them."""

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

    async def signal_workflow(self, p: SignalParams) -> bool:
        """Buffer a signal (deduplicated by message id); False when a duplicate."""
        ...


@runtime_checkable
class TxWorkflowProducer(Protocol[TTx_contra]):
    """Starts executions inside the caller's transaction ``tx`` (contract ``TxStore``)."""

    async def start_workflows_tx(
        self,
        tx: TTx_contra,
        ps: Sequence[WorkflowStartParams],
        *,
        trace_contexts: Sequence[Mapping[str, str]] | None = None,
    ) -> list[tuple[bool, uuid.UUID]]:
        """:meth:`WorkflowProducer.start_workflows` on the caller's transaction."""
        ...


@runtime_checkable
class WorkflowAdmin(Protocol):
    """What an operator (and a handle) reads and does on executions."""

    async def get_workflow_execution(self, id: uuid.UUID) -> WorkflowExecutionView:
        """One execution; NotFoundError when none."""
        ...

    async def workflow_trace_context(self, id: uuid.UUID) -> dict[str, str]:
        """The W3C carrier recorded when the execution started (``{}`` without one).

        Raises:
            NotFoundError: the execution does not exist.
        """
        ...

    async def list_workflow_executions(
        self,
        *,
        name: str | None = None,
        state: WorkflowState | str | None = None,
        limit: int = 50,
        before: tuple[datetime, uuid.UUID] | None = None,
        where: Sequence[SearchFilter] = (),
    ) -> list[WorkflowExecutionView]:
        """Executions newest first (``created_at``, then id); ``before`` is the
        keyset cursor ``(created_at, id)`` of the previous page's last row;
        ``where``: only executions whose search attributes pass every filter.

        Raises:
            SearchAttributeError: a filter of a bad name, operator or value.
        """
        ...

    async def schedule_operation(self, p: ScheduleOperationParams) -> uuid.UUID:
        """Contract ``ScheduleOperation``: insert, or return the existing, operation
        job of ``p.execution_key`` for the execution.

        Deduplicated by ``execution_key`` among the execution's non-terminal
        operations (pending, scheduled, active, paused, uncertain), the same
        rule and the same insert as the operations a pass commit schedules
        (so a pass scheduling that key afterwards inserts nothing either); an
        operation of that key that ended (succeeded, dead, cancelled) does not
        count, so crash recovery can schedule the call again. The execution
        row is locked first, as every pass commit does: concurrent calls and
        passes with one key end with one live job.

        An inserted job is ``pending`` at ``run_at`` (None or past: now; its
        workers are woken) or ``scheduled`` (future), of source ``workflow``
        and kind ``p.kind`` (``$op:<activity>@<version>``), routed by
        ``task_queue`` / ``priority`` / ``limit_key``, its deadlines from
        ``schedule_to_start`` / ``schedule_to_close`` (from now), its budget
        ``max_attempts`` (0: the leasing runtime's default); it is counted as
        enqueued. An existing job is returned untouched.

        Args:
            p: the operation (:class:`ScheduleOperationParams`).

        Returns:
            The id of the execution's live operation job of that key.

        Raises:
            NotFoundError: the execution does not exist, or is finished;
                nothing written.
            ValueError: an empty, overlong or NUL-containing kind or
                execution key, NUL in meta, a negative ``max_attempts``, a
                bad task queue or priority, or a timeout that is not
                positive; nothing written.
        """
        ...

    async def append_history(self, workflow_id: uuid.UUID, type: str, payload: bytes) -> int:
        """Contract ``AppendHistory``: append one event at the execution's next seq.

        For events written outside a replay pass (an operator's note). The
        append takes the execution row's lock, as every pass commit does, so
        seqs stay unique and gapless: a pass in flight that loaded the history
        before the append loses its commit (its expected next seq moved) and
        runs again on the history with the event in it. It wakes nothing.
        The caller picks an event type the history's readers know: the
        workflow runtime replays every event, and one it does not know, or a
        command the code did not issue, stops the execution's next pass
        (``azync_flow.replay.OperatorNote`` is the annotation replay skips).

        Args:
            workflow_id: the execution (live or finished).
            type: the event's type name (at most 255 characters, no NUL).
            payload: the event's JSON bytes, stored verbatim.

        Returns:
            The seq written (the execution's previous next seq, >= 1).

        Raises:
            NotFoundError: the execution does not exist; nothing written.
            ValueError: ``type`` is empty, too long or has NUL, or ``payload``
                is not JSON; nothing written.
            TypeError: ``type`` is not a str or ``payload`` not bytes.
        """
        ...

    async def list_history(
        self, workflow_id: uuid.UUID, after_seq: int = 0, limit: int | None = None
    ) -> list[HistoryEvent]:
        """The execution's history in seq order, past ``after_seq`` (``limit``: at most)."""
        ...

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

    async def complete_workflow(
        self, id: uuid.UUID, result: bytes, closed_by: str, event: tuple[str, bytes]
    ) -> None:
        """An operator's close: end a running or suspended execution as
        ``succeeded`` with ``result``, without running its code, in one
        transaction: ``event`` (the encoded ``WorkflowClosedByOperator``) is
        appended, its workflow task, operations and timers are cancelled (a
        worker still holding one loses its fence), signals it never consumed
        are recorded undelivered and ``result()`` waiters are woken.

        Args:
            id: the execution.
            result: the JSON result (bytes) recorded on the execution.
            closed_by: who (free text, e.g. ``user@host``).
            event: ``(type, payload)`` of the terminal history event.

        Raises:
            NotFoundError: the execution is missing or already finished;
                nothing written.
            ConflictError: its jobs stayed locked by other transactions (about
                5 s); nothing written, retry.
        """
        ...

    async def fail_workflow(
        self, id: uuid.UUID, reason: str, closed_by: str, event: tuple[str, bytes]
    ) -> None:
        """As :meth:`complete_workflow`, ending the execution ``failed`` with
        ``failure_reason`` = ``failed by <closed_by>: <reason>``.

        Raises:
            NotFoundError: the execution is missing or already finished.
            ConflictError: as :meth:`complete_workflow`.
        """
        ...

    async def suspend_workflow(self, id: uuid.UUID, reason: str) -> None:
        """An operator's pause: a running execution becomes ``suspended`` with
        ``reason`` (its ``suspend_reason`` reads ``suspended by an operator:
        <reason>``) and runs no workflow task until :meth:`resume_workflow`.

        Its waiting workflow task is removed; meanwhile signals are buffered,
        and activities still running and timers firing record their outcome
        in history, without scheduling a task. Resuming schedules one, which
        sees all of it.

        Args:
            id: the execution.
            reason: why (non-empty; NUL and lone surrogates refused).

        Raises:
            ValueError: ``reason`` is empty or not storable text; nothing changed.
            NotFoundError: the execution is missing, finished or already
                suspended; nothing changed.
            ConflictError: a worker is running a workflow task of it right now;
                nothing changed, call again.
        """
        ...

    async def resume_workflow(self, id: uuid.UUID) -> None:
        """Suspended -> running, and schedule a workflow task.

        Raises:
            NotFoundError: the execution is missing or not suspended.
            ConflictError: an operation of it is still uncertain (resolve it,
                which resumes).
        """
        ...

    async def list_stalled_workflows(
        self, older_than: timedelta, limit: int
    ) -> list[StalledWorkflow]:
        """Running executions with nothing pending (no live workflow job, no unfired
        timer, not blocked on a signal), updated >= older_than ago."""
        ...

    async def list_workflow_runs(self, id: uuid.UUID) -> list[WorkflowRunView]:
        """Every run of an execution, oldest first; the last is the current (or
        final) one.

        Raises:
            NotFoundError: no such execution.
        """
        ...

    async def list_run_history(self, id: uuid.UUID, run_no: int) -> list[HistoryEvent]:
        """The history of run ``run_no`` of an execution (the current run's comes
        from :meth:`list_history`).

        Raises:
            NotFoundError: the execution has no such earlier run.
        """
        ...

    async def workflow_history_size(self, id: uuid.UUID) -> tuple[int, int]:
        """``(events, payload bytes)`` of the current run's history."""
        ...

    async def reset_workflow(
        self,
        id: uuid.UUID,
        *,
        expected_next_seq: int,
        keep: int,
        new_run_id: uuid.UUID,
        reason: str,
        rerun_seqs: Sequence[int] = (),
        open_timer_seqs: Sequence[int] = (),
    ) -> ResetResult:
        """Start a new run of an execution that keeps events ``1..keep`` of the
        current run's history, in one transaction (any state: a running run
        is ended by it).

        The current run and its whole history are archived as an earlier run
        (state ``reset``, with ``keep``, ``reason`` and its state); history
        past ``keep`` is removed; every live job of the execution is cancelled
        with its lease token cleared (a worker holding one writes nothing);
        the activities scheduled at ``rerun_seqs`` are enqueued again (copies
        of their last job); the timers started at ``open_timer_seqs`` are
        pending again with their original deadlines and every other timer is
        dropped; signals the old run consumed after ``keep`` are buffered again
        in their original order; live children of the old run get their
        parent-close policy; the execution becomes ``running`` in run
        ``run_no + 1`` (``new_run_id``) with its result, reasons, suspension
        and cancel request cleared, and a workflow task due now.

        Args:
            id: the execution.
            expected_next_seq: the next seq of the history the caller planned
                from (a fence: the history must not have moved on).
            keep: the last seq kept (0: none).
            new_run_id: the new run's id.
            reason: why (kept with the old run and on the execution).
            rerun_seqs: seqs of ``ActivityScheduled`` events to run again.
            open_timer_seqs: seqs of ``TimerStarted`` events to start again.

        Returns:
            A :class:`ResetResult`.

        Raises:
            NotFoundError: the execution does not exist.
            ConflictError: its history moved past ``expected_next_seq``, its
                jobs stayed locked by other transactions, or its business key
                is held by another live execution now; nothing written, plan
                again.
            ValueError: ``keep`` outside ``0..expected_next_seq - 1``, or a
                reason the store refuses (NUL).
        """
        ...


@runtime_checkable
class WorkflowMaintenance(Protocol):
    """Housekeeping of executions (run by the leader)."""

    async def schedule_task(
        self, workflow_id: uuid.UUID, kind: str = "$wft", run_at: datetime | None = None
    ) -> None:
        """Make sure a workflow task of ``kind`` runs at ``run_at`` (None: now).

        When a runnable task already exists its ``run_at`` moves to
        ``least(existing, run_at)`` instead of a second one being inserted.

        Raises:
            NotFoundError: the execution is missing.
        """
        ...

    async def vacuum_workflows(self, retention: timedelta) -> int:
        """Delete terminal executions completed before retention ago (<= 0 keeps all)."""
        ...

    async def scan_stalled_workflows(
        self,
        older_than: timedelta,
        after: tuple[datetime, uuid.UUID] | None,
        batch: int,
    ) -> StalledScan:
        """The next ``batch`` running executions whose 10-second progress bin
        ended ``older_than`` ago, in ``(progress_at, id)`` order after
        ``after`` (None: from the oldest), the ones of the cutoff's own bin
        updated >= older_than ago, and every one holding a buffered signal:
        those of them that are stalled (as ``list_stalled_workflows``), and the
        cursor of the next batch."""
        ...

    async def list_unserved_workflows(self) -> list[tuple[str, str]]:
        """``(task queue, workflow name)`` of the executions with a runnable
        workflow task that no live worker (``register_worker``) serves, in
        that order: what waits for a worker that is not there. Reads one index
        entry per distinct pair, however many tasks wait."""
        ...

    async def promote_workflow_jobs(self, kinds: list[str] | None = None) -> int:
        """Move due scheduled workflow jobs (operation retries after backoff, future
        workflow tasks) of ``kinds`` (None = all) to pending and wake workers.

        ``lease_workflow_tasks`` already takes due scheduled workflow tasks;
        operations leased with ``dequeue_batch`` need this (the workflow-source
        equivalent of :meth:`QueueMaintenance.promote_due`). Returns the count
        promoted.
        """
        ...

    async def reap_workflow_tasks(
        self,
        max_reaps: int = 5,
        *,
        limit: int = 100,
        on_reaped: Callable[[Job], None] | None = None,
    ) -> ReapReport:
        """Reclaim workflow tasks whose lease expired (backend clock).

        Each returns to pending with ``reap_count`` + 1; once ``reap_count``
        would reach ``max_reaps`` (> 0) the task is dead-lettered and a
        running execution suspended with a reason naming it. Each job is
        handled in its own transaction under ``FOR UPDATE SKIP LOCKED``.
        ``on_reaped(job)`` is called after the commit for each job reaped or
        dead-lettered (the job as it was when its lease expired).
        """
        ...

    async def reap_expired_operations(
        self,
        encode_failed: Callable[[Job, str], tuple[str, bytes]],
        max_reaps: int = 5,
        *,
        limit: int = 100,
        on_reaped: Callable[[Job], None] | None = None,
        retry_delay: Callable[[Job], timedelta] | None = None,
        give_up: Callable[[Job], bool] | None = None,
    ) -> ReapReport:
        """Reclaim idempotent operations whose lease expired (backend clock).

        Each returns to pending with ``reap_count`` + 1 (its attempt kept, so
        the next lease is attempt + 1), or, with ``retry_delay(job)`` (the
        runtime's backoff for the lost attempt), to scheduled that much later.
        Once ``reap_count`` would reach ``max_reaps`` (> 0), or ``give_up(job)``
        says so (the runtime's retry budget of a heartbeat timeout is spent),
        the operation is dead-lettered and ``encode_failed(job, reason)`` (the runtime's
        ActivityFailed event ``(type, payload)``) appended with a workflow
        task scheduled, in one transaction. Operations with meta
        ``idempotent="false"`` are skipped (they turn uncertain instead).
        ``on_reaped(job)`` is called after each commit.
        """
        ...

    async def time_out_workflows(
        self,
        encode: Callable[[str, timedelta], tuple[str, bytes]],
        *,
        limit: int = 100,
    ) -> list[TimedOutWorkflow]:
        """End the live executions whose execution or run deadline passed
        (backend clock), each in its own transaction, the way
        ``terminate_workflow`` ends one but ``failed``.

        ``encode(kind, timeout)`` returns the terminal history event
        ``(type, payload)``, appended at the next seq; the execution's live
        jobs are cancelled with their lease tokens cleared, its unfired timers
        cancelled, and it fails with reason ``WorkflowTimeoutError: <kind>
        timeout of <s>s elapsed`` (its parent, if any, gets a ``ChildFailed``
        naming ``WorkflowTimeoutError``). An execution whose jobs are locked
        by another transaction is left for the next call. Reads only the
        executions that carry a deadline (an index).

        Returns:
            The executions ended, earliest deadline first.
        """
        ...

    async def time_out_operations(
        self,
        encode: Callable[[Job, str, timedelta], tuple[str, bytes]],
        *,
        limit: int = 100,
    ) -> list[TimedOutOperation]:
        """Fail the operations whose schedule-to-start deadline passed before
        their first lease, or whose schedule-to-close deadline passed before
        they settled (backend clock), each in its own transaction.

        Each is dead-lettered with its lease token cleared (a worker running
        an attempt loses its fence), and ``encode(job, kind, timeout)`` — the
        runtime's ``ActivityFailed`` event — is appended to its live
        execution, with a workflow task scheduled when it is running. An
        operation locked by another transaction is left for the next call.
        Reads only the operations that carry a deadline (indexes).

        Returns:
            The operations failed.
        """
        ...

    async def reap_uncertain_operations(
        self,
        encode: Callable[[Job, str], tuple[str, bytes]],
        *,
        reason: str = ...,
        limit: int = 100,
    ) -> list[uuid.UUID]:
        """Mark lease-expired non-idempotent operations uncertain (a reaper pass).

        Takes active operations whose meta says ``idempotent="false"`` and
        whose lease expired on the backend clock; each is marked (as
        ``mark_uncertain``, under its current lease token) in its own
        transaction. ``encode(job, reason)`` returns the history event
        ``(type, payload)``. Such an operation never returns to pending: a
        generic lease reap of it is suppressed by a trigger, so run this pass
        on the leader alongside the generic reaper.

        Returns:
            Ids of the operations marked uncertain.
        """
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
        task_queues: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        exclude: Collection[uuid.UUID] = (),
    ) -> list[LeasedTask]:
        """Lease up to ``limit`` due workflow tasks, never two of one execution, and
        load each (history past ``known[run]``), in one round trip.

        Tasks of executions in flight come before the first passes of new
        executions; ``first_passes=False`` leases only the former (depth-first
        admission when the caller's activity slots are scarce).

        Args:
            task_queues: lease only tasks of executions on these task queues
                (None: any queue).
            names: lease only tasks of these workflow names (None: any name).
                With both given, tasks of other queues or names are never
                read: a worker leases only what it can run, whatever waits
                for other workers.
            exclude: leave the tasks of these executions (the caller found it
                cannot run them).
        """
        ...

    async def next_workflow_task_due(
        self,
        kind: str = "$wft",
        *,
        task_queues: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
    ) -> float | None:
        """Seconds until the earliest scheduled workflow task of ``task_queues``
        x ``names`` (None: any) is due, on the backend clock (negative: overdue;
        None: none scheduled)."""
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

    async def release_blocked(
        self,
        id: uuid.UUID,
        lease_token: uuid.UUID,
        reason: str,
        delay: timedelta = timedelta(0),
    ) -> None:
        """Leave a leased job this worker cannot run for one that can (pending,
        or scheduled at now+``delay`` when ``delay`` is over zero; attempt given
        back, ``reason`` kept as its ``blocked_reason``; lease-fenced)."""
        ...

    async def repark_decided_operation(
        self,
        workflow_id: uuid.UUID,
        execution_key: str,
        result: bytes,
        reason: str,
        *,
        payload: Callable[[bytes], bytes],
        event_type: str,
        event: bytes,
    ) -> int:
        """Park again as uncertain the operation at ``execution_key`` whose
        complete decision recorded ``result`` (which does not fit its result
        type), in one transaction: payload rewritten by ``payload``, ``(event_type,
        event)`` appended, a running execution suspended naming it. Returns the
        appended seq; 0 when it was decided anew meanwhile (nothing written)."""
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


class OperationTransaction(Protocol):
    """The open transaction of one transactional operation attempt.

    The step's own statements run on :attr:`connection`; the attempt's outcome
    is recorded on the same connection by :meth:`complete` or
    :meth:`commit_completions`, which COMMIT, so the step's writes and its
    recorded outcome commit together or not at all. Leaving the
    ``operation_transaction`` block without either rolls everything back.
    """

    @property
    def connection(self) -> Any:
        """The driver connection (asyncpg) inside the transaction, with the
        database's default ``search_path`` (the user's, not the store's schema)."""
        ...

    async def complete(self, event_type: str, payload: bytes) -> int:
        """Ack the operation, append its outcome and schedule a workflow task (as
        ``complete_operation``), then COMMIT.

        Returns:
            The seq of the appended event (0 when the execution is no longer live).

        Raises:
            NotFoundError: the operation is no longer active under the token;
                the transaction is rolled back (the step's writes too).
        """
        ...

    async def commit_completions(
        self, settle: OperationSettle, write: PassWrite
    ) -> PassCommitResult:
        """Record the outcome with the pass that consumed it (as
        ``commit_completions``), then COMMIT.

        Raises:
            NotFoundError / ConflictError: as ``commit_completions``; nothing of
                the pass was written and the transaction is still open: record
                the outcome alone with :meth:`complete`, or leave the block to
                roll back.
        """
        ...


@runtime_checkable
class TransactionalOperationStore(Protocol):
    """Transactional steps: an operation attempt whose own SQL runs in the
    transaction that records its outcome (exactly-once effects on the
    application's tables in the same database)."""

    def operation_transaction(
        self,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
        *,
        isolation: TransactionIsolation = "read_committed",
    ) -> AbstractAsyncContextManager[OperationTransaction]:
        """Open a transaction fenced by the operation's lease.

        The transaction begins by checking that the operation is active under
        ``lease_token`` (without locking it: an attempt frozen mid-step must
        not keep the reaper from handing it to another worker), then sets the
        database's default ``search_path`` for the rest of the transaction.
        The outcome verbs restore the store's own and fence again, in the
        committing statement: an attempt whose lease was taken meanwhile gets
        NotFoundError and its writes roll back with the transaction.

        Raises:
            NotFoundError: the operation is not active under ``lease_token``
                (nothing was run or written).
        """
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

    async def workflow_done_events(self) -> Subscription[uuid.UUID] | None:
        """Ids of executions that reached a terminal state, had a query answered
        or an update decided; :data:`DONE_RESET` after a reconnect (hints may
        have been missed: re-read). None when the store is poll-only.

        LISTEN is live when this returns; close the subscription to release
        its dedicated connection.

        Raises:
            StoreError: the listening connection cannot be opened.
        """
        ...


@runtime_checkable
class WorkflowClientStore(
    QueueProducer,
    TxQueueProducer[TTx_contra],
    EventProducer,
    TxEventProducer[TTx_contra],
    EventConsumer,
    WorkflowProducer,
    TxWorkflowProducer[TTx_contra],
    WorkflowAdmin,
    WorkflowInteractionStore,
    UncertainStore,
    LimitStore,
    Protocol[TTx_contra],
):
    """What :class:`azync_flow.Client` needs: executions, their queries and
    updates, uncertain operations, limits, event publishing and the
    subscriber registrations a publish fans out to, also in the caller's
    transaction (``TTx_contra``: the driver's connection type)."""
