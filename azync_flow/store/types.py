"""Value types of the storage contract (``driver-contract.go.txt``) as msgspec Structs.

Conventions: durations are ``timedelta``; times are UTC-aware ``datetime``
(``None`` where the contract uses a zero time); ids are ``uuid.UUID``
(``None`` where the contract uses ``uuid.Nil``); raw payloads are ``bytes``
holding JSON exactly as the caller gave it.
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

import msgspec

__all__ = [
    "KIND_SIGNAL",
    "KIND_SLEEP",
    "LIVE_JOB_STATES",
    "AttemptError",
    "BufferedSignal",
    "Change",
    "ChangeEntity",
    "ChildSignalParams",
    "ChildStartParams",
    "Config",
    "DAGDep",
    "DAGFailure",
    "DAGFilter",
    "DAGParams",
    "DAGSignalParams",
    "DAGState",
    "DAGTask",
    "DAGView",
    "DailyCount",
    "Depths",
    "DequeueParams",
    "EnqueueParams",
    "EventAdminRow",
    "EventFilter",
    "EventRecord",
    "HistoryEvent",
    "Job",
    "JobFilter",
    "JobState",
    "LeasedTask",
    "NukeReport",
    "OnFailurePolicy",
    "OperationLease",
    "OperationSettle",
    "OperationState",
    "OpsStats",
    "Outcome",
    "PassCommitResult",
    "PassWrite",
    "PublishParams",
    "QueryAnswer",
    "QueryClaim",
    "QueryRequest",
    "ReapReport",
    "ReapedTask",
    "ReplayFilter",
    "ResolvedOperation",
    "ScheduleChangeRecord",
    "ScheduleMissedRecord",
    "ScheduleOperationParams",
    "ScheduleRecord",
    "ScheduleRunRecord",
    "SettledDAG",
    "SignalParams",
    "Source",
    "StalledScan",
    "StalledWorkflow",
    "StartCommitResult",
    "Subscriber",
    "SubscriberView",
    "TaskResult",
    "TerminatedExecution",
    "UncertainDecision",
    "UncertainOperation",
    "UpdateOutcome",
    "Wake",
    "WorkflowExecutionView",
    "WorkflowRunView",
    "WorkflowStartParams",
    "WorkflowState",
    "WorkflowTaskState",
    "default_channel",
]


class Source(enum.StrEnum):
    """Partition discriminator of the jobs table."""

    QUEUE = "queue"
    EVENT = "event"
    DAG = "dag"
    WORKFLOW = "workflow"


class JobState(enum.StrEnum):
    """Lifecycle state of a job row (queue job, delivery, DAG task, operation)."""

    PENDING = "pending"
    SCHEDULED = "scheduled"
    ACTIVE = "active"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    PAUSED = "paused"
    SKIPPED = "skipped"
    BLOCKED = "blocked"  # DAG task waiting on dependencies
    WAITING = "waiting"  # DAG signal task waiting for its signal
    CANCELLED = "cancelled"
    UNCERTAIN = "uncertain"  # operation whose outcome is unknown


#: States in which a job still holds its live idempotency key.
LIVE_JOB_STATES = frozenset(
    {
        JobState.PENDING,
        JobState.SCHEDULED,
        JobState.ACTIVE,
        JobState.PAUSED,
        JobState.BLOCKED,
        JobState.WAITING,
        JobState.UNCERTAIN,
    }
)


class DAGState(enum.StrEnum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPENSATING = "compensating"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class WorkflowState(enum.StrEnum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: ended by an operator's ``terminate``: no workflow code ran to end it
    TERMINATED = "terminated"


class OnFailurePolicy(enum.StrEnum):
    CANCEL = "cancel"
    SUSPEND = "suspend"


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


class ChangeEntity(enum.StrEnum):
    JOB = "job"
    DAG = "dag"
    EVENT = "event"
    WORKFLOW = "workflow"
    RESET = "reset"


#: Internal DAG task kinds, run by the scheduler rather than a handler.
KIND_SLEEP = "$sleep"
KIND_SIGNAL = "$signal"


def default_channel(schema: str) -> str:
    """The NOTIFY channel of a schema when ``Config.notify_channel`` is empty.

    ``azync_wake_<schema>``, so stores on different schemas of one database
    never wake each other; a schema name too long for a 63-byte identifier is
    replaced by a stable hash of it.
    """
    channel = f"azync_wake_{schema}"
    if len(channel) <= 63:
        return channel
    return f"azync_wake_{hashlib.sha256(schema.encode()).hexdigest()[:32]}"


class Config(msgspec.Struct, kw_only=True):
    """Driver configuration.

    Attributes:
        schema: Postgres schema to isolate the tables in; empty means ``public``.
            Validated as an identifier and quoted.
        notify_channel: LISTEN/NOTIFY channel; empty means ``azync_wake_<schema>``
            (one channel per schema, so other schemas' traffic never wakes
            this store's workers).
        migrations_table: version-tracking table; empty means ``azync_migrations``.
        poll_only: disable push wake-ups, forcing the polling path.
        min_pool_size / max_pool_size: asyncpg pool bounds.
    """

    schema: str = ""
    notify_channel: str = ""
    migrations_table: str = ""
    poll_only: bool = False
    min_pool_size: int = 2
    max_pool_size: int = 10


class AttemptError(msgspec.Struct, kw_only=True):
    attempt: int
    error: str
    at: datetime


class Change(msgspec.Struct, kw_only=True):
    entity: ChangeEntity
    source: Source | None = None
    id: uuid.UUID | None = None
    dag_id: uuid.UUID | None = None
    kind: str = ""
    task_key: str = ""
    state: str = ""
    at: datetime | None = None
    bulk: bool = False
    count: int = 0


class Wake(msgspec.Struct, frozen=True, kw_only=True):
    source: Source
    kind: str


class EnqueueParams(msgspec.Struct, kw_only=True):
    """Arguments of ``enqueue`` (contract ``EnqueueParams``).

    ``run_at`` is an absolute UTC schedule; when ``None`` the job runs at
    backend ``now() + delay``. ``snooze_budget`` (an extension of the Go
    contract, which sets it only for DAG tasks) bounds the job's snooze loop:
    the first ``snooze`` stamps its deadline.
    """

    id: uuid.UUID
    kind: str
    payload: bytes
    meta: dict[str, str] = msgspec.field(default_factory=dict)
    run_at: datetime | None = None
    delay: timedelta = timedelta(0)
    max_attempts: int = 0
    max_attempts_explicit: bool = False
    idempotency_key: str = ""
    idempotency_ttl: timedelta = timedelta(0)
    #: Extension: bounds the job's snooze loop (see ``Job.snooze_budget``); zero = unbounded.
    snooze_budget: timedelta = timedelta(0)


class DequeueParams(msgspec.Struct, kw_only=True):
    kind: str
    limit: int
    lease: timedelta
    default_max_attempts: int = 25
    override_default: bool = True


class EventRecord(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    type: str
    aggregate_type: str = ""
    aggregate_id: str = ""
    version: int = 0
    occurred_at: datetime | None = None
    payload: bytes = b"null"
    meta: dict[str, str] = msgspec.field(default_factory=dict)


class Job(msgspec.Struct, kw_only=True):
    """One row of the jobs table (contract ``Job``)."""

    id: uuid.UUID
    source: Source
    kind: str
    state: JobState
    attempt: int = 0
    max_attempts: int = 0
    reap_count: int = 0
    payload: bytes | None = None
    meta: dict[str, str] = msgspec.field(default_factory=dict)
    run_at: datetime | None = None
    lease_until: datetime | None = None
    lease_token: uuid.UUID | None = None
    last_error: str = ""
    event_id: uuid.UUID | None = None
    replay: bool = False
    event: EventRecord | None = None
    dag_id: uuid.UUID | None = None
    run_id: uuid.UUID | None = None
    task_key: str = ""
    result: bytes | None = None
    signal_name: str = ""
    compensation_kind: str = ""
    ignore_dead_deps: bool = False
    snooze_budget: timedelta = timedelta(0)
    deadline_at: datetime | None = None
    enqueued_at: datetime | None = None
    failed_at: datetime | None = None
    completed_at: datetime | None = None
    started_at: datetime | None = None


class JobFilter(msgspec.Struct, kw_only=True):
    kind: str = ""
    state: JobState | None = None


class Depths(msgspec.Struct, kw_only=True):
    pending: int = 0
    scheduled: int = 0
    active: int = 0
    dead: int = 0
    paused: int = 0
    succeeded: int = 0
    oldest_pending_age: timedelta = timedelta(0)


class DailyCount(msgspec.Struct, kw_only=True):
    date: datetime
    enqueued: int = 0
    processed: int = 0
    failed: int = 0
    reaped: int = 0


class NukeReport(msgspec.Struct, kw_only=True):
    jobs: int = 0
    stats: int = 0
    keys: int = 0


class PublishParams(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    type: str
    payload: bytes
    aggregate_type: str = ""
    aggregate_id: str = ""
    version: int = 0
    occurred_at: datetime | None = None
    meta: dict[str, str] = msgspec.field(default_factory=dict)


class Subscriber(msgspec.Struct, kw_only=True):
    name: str
    event_type: str
    max_attempts: int = 0
    #: deliveries run one key at a time, in publish order (``ordering="key"``)
    ordered: bool = False


class SubscriberView(msgspec.Struct, kw_only=True):
    event_type: str
    subscriber: str
    max_attempts: int
    ordered: bool
    created_at: datetime
    updated_at: datetime


class EventFilter(msgspec.Struct, kw_only=True):
    type: str = ""
    undispatched: bool | None = None
    since: datetime | None = None
    until: datetime | None = None


class EventAdminRow(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    type: str
    aggregate_type: str
    aggregate_id: str
    version: int
    occurred_at: datetime
    dispatched_at: datetime | None
    meta: dict[str, str]
    payload: bytes
    deliveries: int


class OpsStats(msgspec.Struct, kw_only=True):
    undispatched: int = 0
    total_24h: int = 0
    types_24h: int = 0
    subscribers: int = 0


class ReplayFilter(msgspec.Struct, kw_only=True):
    subscriber: str = ""
    event_type: str = ""
    event_id: uuid.UUID | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 0


# --- DAGs -------------------------------------------------------------------


class DAGDep(msgspec.Struct, frozen=True, kw_only=True):
    task_key: str
    depends_on_key: str


class DAGTask(msgspec.Struct, kw_only=True):
    """One static task of a DAG (contract ``DAGTask``)."""

    key: str
    kind: str
    payload: bytes = b"null"
    max_attempts: int = 0
    compensation_kind: str = ""
    compensation_payload: bytes | None = None
    signal_name: str = ""
    sleep_for: timedelta = timedelta(0)
    ignore_dead_deps: bool = False
    deadline: timedelta = timedelta(0)


class DAGParams(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    name: str
    tasks: list[DAGTask]
    deps: list[DAGDep] = msgspec.field(default_factory=list)
    on_failure: OnFailurePolicy = OnFailurePolicy.CANCEL
    idempotency_key: str = ""
    meta: dict[str, str] = msgspec.field(default_factory=dict)


class DAGSignalParams(msgspec.Struct, kw_only=True):
    dag_id: uuid.UUID
    name: str
    payload: bytes = b"null"
    message_id: str = ""


class DAGFailure(msgspec.Struct, kw_only=True):
    dag_id: uuid.UUID
    policy: OnFailurePolicy
    dead_tasks: list[str]


class DAGFilter(msgspec.Struct, kw_only=True):
    name: str = ""
    state: DAGState | None = None


class DAGView(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    name: str
    state: DAGState
    on_failure: OnFailurePolicy
    idempotency_key: str
    failure_reason: str
    meta: dict[str, str]
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None = None


class TaskResult(msgspec.Struct, kw_only=True):
    result: bytes | None = None
    skipped: bool = False


# --- Workflow-as-code ---------------------------------------------------------


class WorkflowStartParams(msgspec.Struct, kw_only=True):
    id: uuid.UUID
    name: str
    input: bytes
    version: str = ""
    business_idempotency_key: str = ""
    task_queue: str = ""
    meta: dict[str, str] = msgspec.field(default_factory=dict)


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
        state: ``"continued_as_new"`` for an earlier run; the execution's
            state for the current (or final) run (``running``, ``succeeded`` ...).
    """

    run_no: int
    run_id: uuid.UUID
    input: bytes
    started_at: datetime
    ended_at: datetime | None
    events: int
    current: bool = False
    state: str = "continued_as_new"


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
    workflow_id: uuid.UUID
    kind: str
    payload: bytes
    execution_key: str
    meta: dict[str, str] = msgspec.field(default_factory=dict)
    run_at: datetime | None = None
    max_attempts: int = 0


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
        cursor: ``(updated_at, id)`` of the last candidate examined, the
            ``after`` of the next batch (None: none examined; keep the old one).
    """

    stalled: list[StalledWorkflow]
    scanned: int
    cursor: tuple[datetime, uuid.UUID] | None = None


# --- the hot path of the workflow runtime (lease, load and commit of passes) ---------

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
    """

    seq: int
    id: uuid.UUID
    name: str
    version: str
    input: bytes
    parent_close_policy: str = "terminate"
    trace_context: dict[str, str] = msgspec.field(default_factory=dict)


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
    """

    job: Job
    state: WorkflowTaskState
    after_seq: int


# --- values the DAG scheduler and the uncertain-operation verbs return ----------


class ReapedTask(msgspec.Struct, kw_only=True, frozen=True):
    """A DAG task whose lease expired, as the ``dag_reap_expired_tasks`` verb left it.

    Attributes:
        dag_id: the run.
        task_key: the task.
        attempt: the attempt whose lease expired.
        dead: True when it was dead-lettered (reaped too often), else pending again.
        meta: the task's meta (with the run's W3C trace carrier).
        kind: the task's handler kind.
        started_at: when the lost attempt was leased.
        dag_name: the run's DAG name.
    """

    dag_id: uuid.UUID
    task_key: str
    attempt: int
    dead: bool
    meta: dict[str, str]
    kind: str = ""
    started_at: datetime | None = None
    dag_name: str = ""


class SettledDAG(msgspec.Struct, kw_only=True, frozen=True):
    """A DAG run that ``complete_dags`` just made terminal.

    Attributes:
        id: the run.
        name: the DAG name.
        state: its terminal state.
        reason: its failure reason ('' when it succeeded).
        created_at: when it started.
        trace_context: the W3C carrier recorded when it started.
    """

    id: uuid.UUID
    name: str
    state: DAGState
    reason: str = ""
    created_at: datetime
    trace_context: dict[str, str] = msgspec.field(default_factory=dict)


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


class ReapReport(NamedTuple):
    """Jobs returned to pending, and jobs given up on (dead-lettered)."""

    reaped: int
    killed: int


class ScheduleRecord(msgspec.Struct, kw_only=True):
    """A stored schedule (``spec``, ``action`` and ``policy`` are the client's JSON).

    Attributes:
        id: the schedule id.
        spec: encoded ``ScheduleSpec``.
        action: encoded action (start a workflow, a DAG, enqueue a job).
        policy: encoded ``SchedulePolicy``.
        note: why it was paused (operators' text).
        paused: no fire while True.
        cursor_at: the last nominal instant handled; only later ones fire.
        next_fire_at: when the next fire is due (None: no more fires).
        created_at: when it was created (store clock).
        updated_at: last change (store clock).
        started_count: nominal times that started a run.
        skipped_count: nominal times skipped by the overlap policy.
        missed_count: nominal times missed (catch-up window, pause, edit).
    """

    id: str
    spec: bytes
    action: bytes
    policy: bytes
    note: str
    paused: bool
    cursor_at: datetime
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    started_count: int = 0
    skipped_count: int = 0
    missed_count: int = 0


class ScheduleRunRecord(msgspec.Struct, kw_only=True):
    """What a schedule did for one nominal instant.

    Attributes:
        schedule_id: the schedule.
        nominal_at: the nominal instant (UTC), the identity of the fire.
        fire_at: when it was due (nominal plus jitter).
        run_id: the workflow execution, DAG run or job started for it (derived
            from the schedule id and ``nominal_at``).
        outcome: ``started``, ``skipped`` (overlap), ``missed`` (a buffered
            start later than the catch-up window), ``buffered`` (waiting for
            the run before it) or ``requested`` (trigger, backfill).
        created_at: when it was recorded (store clock).
        updated_at: last change (a buffered run started).
    """

    schedule_id: str
    nominal_at: datetime
    fire_at: datetime
    run_id: uuid.UUID
    outcome: str
    created_at: datetime
    updated_at: datetime
    overlap: str | None = None


class ScheduleMissedRecord(msgspec.Struct, kw_only=True):
    """A range of nominal times of a schedule that did not run.

    Attributes:
        schedule_id: the schedule.
        first_nominal_at: the first missed nominal instant (UTC).
        last_nominal_at: the last one (inclusive).
        count: how many nominal times the range holds.
        count_exact: False when ``count`` is a lower bound (a cron range
            longer than the scheduler counts).
        reason: ``catchup`` (older than the catch-up window), ``paused``
            (passed while paused) or ``update`` (before an edit took effect).
        recorded_at: when it was recorded (store clock).
    """

    schedule_id: str
    first_nominal_at: datetime
    last_nominal_at: datetime
    count: int
    count_exact: bool
    reason: str
    recorded_at: datetime


class ScheduleChangeRecord(msgspec.Struct, kw_only=True):
    """One edit of a schedule (``update``, ``pause``, ``unpause``).

    Attributes:
        schedule_id: the schedule.
        at: when (store clock).
        verb: ``update``, ``pause`` or ``unpause``.
        old_spec, new_spec, old_policy, new_policy, old_action, new_action:
            the encoded values before and after (None for pause/unpause).
        note: the operator's note.
    """

    schedule_id: str
    at: datetime
    verb: str
    old_spec: bytes | None = None
    new_spec: bytes | None = None
    old_policy: bytes | None = None
    new_policy: bytes | None = None
    old_action: bytes | None = None
    new_action: bytes | None = None
    note: str = ""
