"""The queue's contract: jobs, enqueueing, leasing and settling them, the
housekeeping of their leases and timers, and the wake-ups that announce them.

Every table row that runs work (a queue job, an event delivery, a DAG task, a
workflow task or an activity operation) is a :class:`Job` of some
:class:`Source`; the settle verbs of :class:`JobSettler` serve them all. Each is
fenced by the lease token: when the token no longer owns an active row it
raises ``NotFoundError`` and changes nothing. Every schedule uses the backend
clock.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple, Protocol, runtime_checkable

import msgspec

from ._common import Subscription, TTx_contra

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "LIVE_JOB_STATES",
    "AttemptError",
    "DequeueParams",
    "EnqueueParams",
    "EventRecord",
    "Job",
    "JobSettler",
    "JobState",
    "LimitSpec",
    "LimitStore",
    "LimitUsage",
    "Notifier",
    "QueueConsumer",
    "QueueMaintenance",
    "QueueProducer",
    "ReapReport",
    "Source",
    "TxQueueProducer",
    "Wake",
]


class Source(enum.StrEnum):
    """Partition discriminator of the jobs table."""

    QUEUE = "queue"
    EVENT = "event"
    DAG = "dag"
    WORKFLOW = "workflow"


#: The task queue of a job, an execution or a worker that names none.
DEFAULT_TASK_QUEUE = "default"


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


class AttemptError(msgspec.Struct, kw_only=True):
    attempt: int
    error: str
    at: datetime


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
    #: Extension: the task queue the job is routed to; only workers serving it lease it.
    task_queue: str = DEFAULT_TASK_QUEUE
    #: Extension: higher first, aged by waiting (see ``QueueConsumer.dequeue_batch``).
    priority: int = 0
    #: Extension: the job's key for the per-key limits of its kind (``LimitStore``);
    #: None = none given (the job counts under the key ``""``).
    limit_key: str | None = None


class DequeueParams(msgspec.Struct, kw_only=True):
    """Arguments of ``dequeue_batch``.

    Attributes:
        task_queues: extension: lease only jobs routed to these task queues
            (ignored for event deliveries, which have none).
    """

    kind: str
    limit: int
    lease: timedelta
    default_max_attempts: int = 25
    override_default: bool = True
    task_queues: tuple[str, ...] = (DEFAULT_TASK_QUEUE,)


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
    #: Extension: the task queue the job is routed to.
    task_queue: str = DEFAULT_TASK_QUEUE
    #: Extension: why a worker that leased this job left it unrun ('' = none).
    blocked_reason: str = ""
    #: Extension: its priority (higher first, see ``QueueConsumer.dequeue_batch``).
    priority: int = 0
    #: Extension: its key for the per-key limits of its kind (None: not a limited job).
    limit_key: str | None = None


class LimitSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A limit definition, stored so every worker enforces the same one.

    Attributes:
        name: the limit's name (shared by every kind that declares it).
        type: ``"concurrency"`` (at most ``capacity`` jobs in flight: leased and
            not settled) or ``"rate"`` (at most ``capacity`` starts in any
            window of ``period``).
        capacity: the limit (1 to 10,000), per key when ``per_key``.
        period: a rate limit's window (None for a concurrency limit).
        per_key: counted separately for each job key (``limit_key``), else
            once for all jobs of the kinds that declare it.
    """

    name: str
    type: str
    capacity: int
    period: timedelta | None = None
    per_key: bool = False


class LimitUsage(msgspec.Struct, kw_only=True):
    """One limit as ``LimitStore.list_limits`` reports it.

    Attributes:
        spec: its stored definition.
        kinds: ``"<source>:<kind>"`` of every kind it applies to.
        task_queues: the task queues it applies to (everything in flight there).
        in_flight: concurrency: jobs holding a slot now; rate: starts within
            the last ``period`` (summed over keys).
        keys: keys that have slots (1 for a global limit once used).
        waiting: due pending jobs of its kinds and task queues, not yet leased.
        updated_at: when the definition last changed.
    """

    spec: LimitSpec
    kinds: list[str]
    task_queues: list[str] = msgspec.field(default_factory=list)
    in_flight: int
    keys: int
    waiting: int
    updated_at: datetime


class ReapReport(NamedTuple):
    """Jobs returned to pending, and jobs given up on (dead-lettered)."""

    reaped: int
    killed: int


@runtime_checkable
class QueueProducer(Protocol):
    """Puts queue jobs in (what a client enqueues with)."""

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


@runtime_checkable
class TxQueueProducer(Protocol[TTx_contra]):
    """Puts queue jobs in inside the caller's transaction ``tx`` (contract ``TxStore``)."""

    async def enqueue_tx(self, tx: TTx_contra, p: EnqueueParams) -> bool:
        """:meth:`QueueProducer.enqueue` in the caller's transaction; wakes fire on its commit."""
        ...

    async def enqueue_many_tx(self, tx: TTx_contra, ps: Sequence[EnqueueParams]) -> list[bool]:
        """:meth:`QueueProducer.enqueue_many` on the caller's transaction."""
        ...


@runtime_checkable
class JobSettler(Protocol):
    """Settles a leased job of any source, fenced by its lease token."""

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

    async def release_blocked(
        self,
        id: uuid.UUID,
        lease_token: uuid.UUID,
        reason: str,
        delay: timedelta = timedelta(0),
    ) -> None:
        """Extension: leave a leased job this worker cannot run for a worker that
        can: as :meth:`release` (pending, the attempt given back, nothing
        recorded), with ``reason`` kept as the job's ``blocked_reason`` (what
        ``describe`` shows while it waits; the next release replaces it). With
        a ``delay`` over zero the job is scheduled at now()+delay instead of
        pending, so the worker that left it does not lease it again at once.

        Raises:
            NotFoundError: the token no longer owns an active row (nothing changed).
        """
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

    async def release_stopped_attempt(self, id: uuid.UUID, lease_token: uuid.UUID) -> int:
        """The attempt of job ``id`` under ``lease_token`` has stopped (its
        worker knows: its report was refused, or it was cancelled after its
        lease was found gone): free the concurrency slots it still holds, and
        wake the workers waiting on them. A job cancelled, terminated or timed
        out while running keeps its slots held until its lease's end otherwise.
        Fenced: frees nothing while the job still runs under that token (unless
        its schedule-to-close deadline passed, so no report of it can land).
        Returns the slots freed."""
        ...


@runtime_checkable
class QueueConsumer(JobSettler, Protocol):
    """Leases due jobs of one ``(source, kind)`` and settles them (what a worker loop runs)."""

    async def dequeue_batch(self, source: Source, p: DequeueParams) -> list[Job]:
        """Lease up to ``p.limit`` due pending jobs of ``(source, p.kind)`` routed
        to one of ``p.task_queues`` for ``p.lease``: attempt incremented, fresh
        lease token, retry budget resolved durably. Event deliveries carry
        ``event`` (they have no task queue).

        Lease order (extension): by ``run_at`` moved earlier by the job's
        ``priority`` in minutes, then id. A higher priority goes first, and a
        job never waits behind a later job of higher priority for more than
        the difference of their priorities in minutes (aging: no starvation).
        Returned in that order."""
        ...


@runtime_checkable
class QueueMaintenance(Protocol):
    """Housekeeping of jobs: due timers, expired leases, spent keys and old rows."""

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

    async def vacuum_idempotency(self, source: Source) -> int:
        """Trim expired time-window idempotency keys."""
        ...

    async def vacuum_completed(self, source: Source, retention: timedelta) -> int:
        """Trim succeeded jobs completed before retention ago (<= 0 keeps all).

        DAG-owned (``dag_id``) and workflow-owned (``run_id``) jobs are exempt.
        """
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
class LimitStore(Protocol):
    """Extension: concurrency and rate limits enforced by the lease.

    A job of a kind with limits is leased only when one slot of each limit of
    its kind is free for its key (``limit_key``; a global limit ignores it),
    across every worker, exactly: a concurrency slot is held until the job's
    lease ends (settled, released, snoozed, or reaped after its worker died);
    a rate slot is used once per ``period``. Between keys the lease goes round
    robin, the key admitted longest ago first.
    """

    async def declare_limits(self, source: Source, kind: str, limits: Sequence[LimitSpec]) -> None:
        """Make ``limits`` the limits of ``(source, kind)`` (none: unlimited).

        Each definition is upserted by name (the last declaration wins);
        limits no longer listed stop applying to the kind. Live jobs of the
        kind that carry no key get the key ``""``.

        Raises:
            ValueError: a bad name, type, capacity or period; two limits of one name.
        """
        ...

    async def declare_task_queue_limit(self, task_queue: str, limit: LimitSpec | None) -> None:
        """Make ``limit`` the limit of everything in flight on ``task_queue``
        (None: unlimited).

        It counts every queue job and activity operation routed to the task
        queue, whatever its kind, on top of their kinds' own limits (a
        limit both name counts once); workflow tasks, queries and DAG tasks
        are not counted. The definition is upserted by name (the last
        declaration wins). Live queue jobs and activities on the task queue
        that carry no key get the key ``""``; those already leased when it is
        declared do not hold a slot.

        Raises:
            ValueError: a bad task queue name or limit; a limit that is not a
                concurrency limit, or is per key.
        """
        ...

    async def list_limits(self) -> list[LimitUsage]:
        """Every stored limit with its kinds, task queues, in-flight and
        waiting counts, by name."""
        ...

    async def vacuum_limit_slots(self, idle_for: timedelta) -> int:
        """Delete the slots of every key none of whose slots is held and none
        admitted anything for ``idle_for`` (backend clock): a key's slots go
        all together or not at all, and a key admitted again gets fresh
        slots, so capacity and fairness are unchanged. Keys an admission is
        using meanwhile are skipped, never waited on. Returns the slot rows
        deleted.

        Raises:
            ValueError: ``idle_for`` is negative.
        """
        ...
