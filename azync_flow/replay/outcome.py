"""Inputs and outputs of a replay pass (pure data; the runtime turns them into store calls)."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from azync_flow._text import clean_text, escape_surrogates
from azync_flow.errors import WorkflowCancelledError, WorkflowFailedError, error_message
from azync_flow.store.workflows import BufferedSignal, UpdateOutcome

__all__ = [
    "SCHEDULE_NOMINAL_AT",
    "BufferedSignal",
    "CancelChild",
    "CancelTimer",
    "Command",
    "PassOutcome",
    "PassStatus",
    "ScheduleActivity",
    "SignalChild",
    "StartChild",
    "StartTimer",
    "UnfitDecision",
    "WorkflowInfo",
    "safe_message",
]


@dataclass(frozen=True)
class WorkflowInfo:
    """Identity of the running execution, visible to workflow code as ``ctx.info``.

    Attributes:
        execution_id: the execution (workflow) id; also seeds ``ctx.random()``/``ctx.uuid4()``.
        name: workflow name.
        version: workflow version the execution was started with.
        attempt: attempt number of the current workflow task (informational only;
            it differs between replays, so do not branch on it).
        run_id: the current run (``continue_as_new`` starts a new one); None =
            the first run, whose run id is the execution id.
        parent_id: the parent execution of a child started by ``ctx.start_child``,
            else None.
        scheduled_time: the nominal time (UTC) of the schedule fire that started
            the execution, else None. Recorded with the start, so every replay
            (and every run of a continued-as-new chain) reads the same value.
        task_queue: the task queue of the execution (its activities and
            children default to it).
        priority: the execution's priority (its activities and children
            default to it).
    """

    execution_id: uuid.UUID
    name: str
    version: str = ""
    attempt: int = 1
    run_id: uuid.UUID | None = None
    parent_id: uuid.UUID | None = None
    scheduled_time: datetime | None = None
    task_queue: str = "default"
    priority: int = 0

    @classmethod
    def of(
        cls,
        execution_id: uuid.UUID,
        name: str,
        version: str,
        meta: Mapping[str, str],
        *,
        attempt: int = 1,
        run_id: uuid.UUID | None = None,
        parent_id: uuid.UUID | None = None,
        task_queue: str = "default",
        priority: int = 0,
    ) -> WorkflowInfo:
        """The info of an execution from its stored fields (``meta`` as started)."""
        return cls(
            execution_id,
            name,
            version,
            attempt,
            run_id=run_id,
            parent_id=parent_id,
            scheduled_time=_nominal_time(meta),
            task_queue=task_queue or "default",
            priority=priority,
        )

    @property
    def current_run_id(self) -> uuid.UUID:
        """The id of the current run (the execution id for the first run)."""
        return self.run_id or self.execution_id


#: The start meta key under which a schedule records the nominal time it fired for.
SCHEDULE_NOMINAL_AT = "schedule_nominal_at"


def _nominal_time(meta: Mapping[str, str]) -> datetime | None:
    text = meta.get(SCHEDULE_NOMINAL_AT)
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:  # meta set by hand: not a schedule's
        return None


@dataclass(frozen=True)
class ScheduleActivity:
    """Schedule an operation job for the ActivityScheduled event at ``seq``.

    ``input`` is the JSON array of positional arguments; ``options`` is the
    :class:`~azync_flow.workflow.ActivityOptions` in effect (or None);
    ``result_type`` the activity's recordable result type (a ``ResultType``,
    or None when it cannot be checked).
    """

    seq: int
    name: str
    version: str
    input: bytes
    options: Any = None
    result_type: Any = None


@dataclass(frozen=True)
class UnfitDecision:
    """A decided result in history that does not fit the activity's result type.

    The call at ``seq`` stays unresolved; the runtime parks its operation as
    uncertain again so a new decision can be made (docs/uncertain.md).

    Attributes:
        seq: the ActivityScheduled seq of the call.
        activity: the activity's name.
        result: the decided result as recorded (JSON bytes, or a codec envelope).
        reason: why it does not fit (names the expected type and the value).
        result_type: the activity's result type in this code (a ``ResultType``),
            recorded on the operation for the next decision's check.
    """

    seq: int
    activity: str
    result: bytes
    reason: str
    result_type: Any


@dataclass(frozen=True)
class StartTimer:
    """Insert a durable timer ``seq`` firing ``fire_after`` after the commit (backend clock)."""

    seq: int
    fire_after: timedelta


@dataclass(frozen=True)
class CancelTimer:
    """The timer ``timer_seq`` is no longer needed (mark it fired without a pass)."""

    seq: int
    timer_seq: int


@dataclass(frozen=True)
class StartChild:
    """Create child execution ``workflow_id`` (recorded as ChildStarted at ``seq``).

    ``input`` is the child's encoded input; ``parent_close_policy`` is
    ``terminate``, ``request_cancel`` or ``abandon``; ``options`` is the
    :class:`~azync_flow.workflow.ChildOptions` of the call (or None: the
    defaults). Options route and bound the child; replay does not compare them.
    """

    seq: int
    workflow_id: uuid.UUID
    name: str
    version: str
    input: bytes
    parent_close_policy: str
    options: Any = None


@dataclass(frozen=True)
class SignalChild:
    """Buffer signal ``name`` for child ``workflow_id`` (ChildSignaled at ``seq``),
    deduplicated by ``message_id``."""

    seq: int
    workflow_id: uuid.UUID
    name: str
    payload: bytes
    message_id: str


@dataclass(frozen=True)
class CancelChild:
    """Request cancellation of child ``workflow_id`` (ChildCancelRequested at ``seq``)."""

    seq: int
    workflow_id: uuid.UUID


Command = ScheduleActivity | StartTimer | CancelTimer | StartChild | SignalChild | CancelChild


class PassStatus(enum.StrEnum):
    BLOCKED = "blocked"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUED_AS_NEW = "continued_as_new"
    NONDETERMINISM = "nondeterminism"


@dataclass
class PassOutcome:
    """What one pass decided.

    Attributes:
        status: blocked (waiting on activities/timers/signals), completed, failed,
            cancelled, or nondeterminism (suspend the execution; nothing to write).
        new_events: ``(seq, type, payload)`` to append, consecutive from the
            pass's first new seq, in order. Empty on nondeterminism.
        commands: ScheduleActivity / StartTimer / CancelTimer, in seq order.
        consumed_signals: ``(signal_id, seq of its SignalReceived event)``.
        fired_timers: timer seqs to mark fired (every due timer passed in, plus
            cancelled ones).
        result: JSON bytes of the workflow result when completed.
        error: ``WorkflowFailedError`` when failed, ``NonDeterminismError`` when
            nondeterminism, ``WorkflowCancelledError`` when cancelled.
        next_seq: the execution's next seq after these events are appended.
        unconsumed_signals: buffered signals still waiting for a matching wait.
        events_replayed: history events this pass fed to the instance (all of
            them on a full replay; only the new ones on a cached instance).
        awaited_signals: names the workflow's ``wait_signal`` calls are
            blocked on when the pass ends, sorted (empty when it waits on none).
        continued: with status continued_as_new, ``(new run id, new input bytes)``.
        live_children: children started by this run whose outcome has not been
            delivered (the parent-close policy applies to them if the run ends).
        update_results: updates this pass rejected, completed or failed.
        unfit_decisions: decided results in history that do not fit their
            activity's result type; those calls wait for a new decision.
    """

    status: PassStatus
    new_events: list[tuple[int, str, bytes]] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    consumed_signals: list[tuple[int, int]] = field(default_factory=list)
    fired_timers: list[int] = field(default_factory=list)
    result: bytes | None = None
    error: BaseException | None = None
    next_seq: int = 1
    unconsumed_signals: int = 0
    events_replayed: int = 0
    awaited_signals: list[str] = field(default_factory=list)
    continued: tuple[uuid.UUID, bytes] | None = None
    live_children: int = 0
    update_results: list[UpdateOutcome] = field(default_factory=list)
    unfit_decisions: list[UnfitDecision] = field(default_factory=list)

    @property
    def failure_reason(self) -> str:
        """``error`` as text safe for a Postgres ``text`` column (NUL and lone
        surrogates escaped)."""
        error = self.error
        if error is None:
            return ""
        # The stored reason is the cause alone: the client wraps it in
        # WorkflowFailedError / WorkflowCancelledError again (said once).
        if isinstance(error, WorkflowFailedError):
            text = f"{error.error_type}: {error.message}" if error.error_type else error.message
            return clean_text(text)
        if isinstance(error, WorkflowCancelledError):
            return clean_text(
                error.reason or "requested by the client; the code ended with CancelledError"
            )
        return clean_text(str(error))

    @property
    def activities(self) -> list[ScheduleActivity]:
        return [c for c in self.commands if isinstance(c, ScheduleActivity)]

    @property
    def timers(self) -> list[StartTimer]:
        return [c for c in self.commands if isinstance(c, StartTimer)]

    @property
    def cancelled_timers(self) -> list[int]:
        return [c.timer_seq for c in self.commands if isinstance(c, CancelTimer)]

    @property
    def children(self) -> list[StartChild]:
        return [c for c in self.commands if isinstance(c, StartChild)]

    @property
    def child_signals(self) -> list[SignalChild]:
        return [c for c in self.commands if isinstance(c, SignalChild)]

    @property
    def child_cancels(self) -> list[CancelChild]:
        return [c for c in self.commands if isinstance(c, CancelChild)]


def safe_message(exc: BaseException) -> str:
    """``str(exc)`` made encodable (lone surrogates escaped); NUL is kept (JSON escapes it).

    It is recorded beside the type's name, so an azync_flow error's ``[code]``
    tag is left out (the type names it once).
    """
    try:
        message = error_message(exc)
    except Exception:  # a broken __str__ must not break recording the failure
        return f"<unprintable {type(exc).__name__}>"
    return escape_surrogates(message)
