"""The DAG contract (``DAGStore`` of the driver contract): static DAGs with
sagas, started whole, their tasks run as jobs of source ``dag``, moved on by
the leader's scheduler tick.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import msgspec

from ._common import TransactionIsolation, TTx_contra
from .admin import StoreClock
from .queue import DEFAULT_TASK_QUEUE, Job, JobSettler, JobState

__all__ = [
    "KIND_SIGNAL",
    "KIND_SLEEP",
    "DAGAdmin",
    "DAGClientStore",
    "DAGConsumer",
    "DAGDep",
    "DAGFailure",
    "DAGFilter",
    "DAGMaintenance",
    "DAGParams",
    "DAGProducer",
    "DAGResults",
    "DAGSignalParams",
    "DAGState",
    "DAGTask",
    "DAGTaskTransaction",
    "DAGView",
    "OnFailurePolicy",
    "ReapedTask",
    "SettledDAG",
    "TaskResult",
    "TransactionalDAGConsumer",
    "TxDAGProducer",
]


#: Internal DAG task kinds, run by the scheduler rather than a handler.
KIND_SLEEP = "$sleep"


KIND_SIGNAL = "$signal"


class DAGState(enum.StrEnum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPENSATING = "compensating"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class OnFailurePolicy(enum.StrEnum):
    CANCEL = "cancel"
    SUSPEND = "suspend"


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
    #: Extension: the task queue the task (and its compensation) is routed to.
    task_queue: str = DEFAULT_TASK_QUEUE


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


@runtime_checkable
class DAGProducer(Protocol):
    """Starts DAG runs and signals them."""

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

    async def find_dag_by_key(self, name: str, idempotency_key: str) -> uuid.UUID:
        """The live DAG holding the key; NotFoundError when none."""
        ...


@runtime_checkable
class TxDAGProducer(Protocol[TTx_contra]):
    """Starts DAG runs inside the caller's transaction ``tx`` (contract ``TxDAGStore``)."""

    async def create_dag_tx(
        self, tx: TTx_contra, p: DAGParams, *, trace_context: Mapping[str, str] | None = None
    ) -> tuple[bool, uuid.UUID | None]:
        """:meth:`DAGProducer.create_dag` inside the caller's transaction."""
        ...


@runtime_checkable
class DAGResults(Protocol):
    """Reads the settled outcomes of tasks."""

    async def task_results(self, dag_id: uuid.UUID, keys: Sequence[str]) -> dict[str, TaskResult]:
        """Settled outcomes of succeeded and skipped tasks (empty keys: all)."""
        ...


class DAGTaskTransaction(Protocol):
    """The open transaction of one attempt of a transactional DAG task: the
    handler's statements run on :attr:`connection`; :meth:`ack` settles the
    task with its result on the same connection and COMMITs. Leaving the
    ``dag_task_transaction`` block without it rolls everything back."""

    @property
    def connection(self) -> Any:
        """The driver connection (asyncpg) inside the transaction, with the
        database's default ``search_path`` (the application's)."""
        ...

    async def ack(self, result: bytes | None) -> None:
        """Ack the task with ``result`` (as ``ack_task_result``), then COMMIT.

        Raises:
            NotFoundError: the task is no longer active under the token; the
                transaction rolls back.
        """
        ...


@runtime_checkable
class TransactionalDAGConsumer(Protocol):
    """Transactional DAG tasks: the handler's SQL commits with the task's ack."""

    def dag_task_transaction(
        self,
        id: uuid.UUID,
        lease_token: uuid.UUID,
        *,
        isolation: TransactionIsolation = "read_committed",
    ) -> AbstractAsyncContextManager[DAGTaskTransaction]:
        """Open a transaction for leased task ``id``: it checks the task is active
        under ``lease_token`` (without locking it) and sets the database's
        default ``search_path`` for the handler's statements;
        :meth:`DAGTaskTransaction.ack` restores the store's and fences again.

        Raises:
            NotFoundError: the task is not active under ``lease_token``.
        """
        ...


@runtime_checkable
class DAGConsumer(JobSettler, DAGResults, Protocol):
    """What a DAG task runner leases and settles tasks with."""

    async def ack_task_result(
        self, id: uuid.UUID, lease_token: uuid.UUID, result: bytes | None
    ) -> None:
        """Ack an active task and persist ``result`` (None = no result) atomically.

        Raises:
            NotFoundError: the lease token no longer owns an active row.
        """
        ...

    async def dag_dequeue(
        self,
        kinds: Sequence[str],
        limit: int,
        lease: timedelta,
        default_max_attempts: int = 25,
        task_queues: Sequence[str] = (DEFAULT_TASK_QUEUE,),
    ) -> list[Job]:
        """Lease up to ``limit`` due pending tasks of any of ``kinds`` routed to
        one of ``task_queues`` for ``lease``, in ``(run_at, id)`` order: attempt
        incremented, fresh lease token, a task without a retry budget given
        ``default_max_attempts``. An empty ``kinds`` or a ``limit`` <= 0 leases
        nothing."""
        ...

    async def dag_notify_tick(self) -> None:
        """Wake the DAG scheduler at once (a task settled; its dependants may run)."""
        ...


@runtime_checkable
class DAGMaintenance(StoreClock, Protocol):
    """The scheduler tick's steps (run by the leader)."""

    async def promote_unblocked(self, *, since: datetime | None = None) -> int:
        """Move blocked tasks whose dependencies are satisfied to their runnable state
        (``since``: only those whose dependencies settled after it; None: all)."""
        ...

    async def deliver_buffered_signals(self) -> int:
        """Hand buffered signals to tasks that became deliverable."""
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

    async def dag_reap_expired_tasks(self, max_reaps: int = 5) -> list[ReapedTask]:
        """Reclaim expired task leases and say which: back to pending with
        ``reap_count + 1``, or dead once ``reap_count`` reaches ``max_reaps``."""
        ...


@runtime_checkable
class DAGAdmin(Protocol):
    """What an operator reads and does on DAG runs."""

    async def dag_trace_context(self, id: uuid.UUID) -> dict[str, str]:
        """The W3C carrier recorded when the run started (``{}`` without one).

        Raises:
            NotFoundError: the DAG does not exist.
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

    async def pause_dag(self, id: uuid.UUID, reason: str) -> None:
        """Freeze a running DAG; NotFoundError for any other state."""
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
class DAGClientStore(
    DAGProducer, TxDAGProducer[TTx_contra], DAGResults, DAGAdmin, Protocol[TTx_contra]
):
    """What :class:`azync_flow.dag.DAGClient` needs: the DAG verbs, also in the
    caller's transaction (``TTx_contra``: the driver's connection type)."""
