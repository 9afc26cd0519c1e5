"""The operator's contract across domains: the schema (migrations), jobs of
every source (listing, retrying, deleting), their counters, and change hints
for admin surfaces.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

import msgspec

from ._common import Subscription
from .queue import AttemptError, Job, JobState, Source

__all__ = [
    "CONSOLE_QUERY_PREFIX",
    "BacklogEntry",
    "BacklogReader",
    "Change",
    "ChangeEntity",
    "ChangeNotifier",
    "Closable",
    "ConsoleReads",
    "DailyCount",
    "Depths",
    "JobAdmin",
    "JobFilter",
    "Migrator",
    "NukeReport",
    "StatsMaintenance",
    "StoreClock",
]


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


class BacklogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """Jobs of one ``(source, kind)`` waiting in one state, for gauges.

    Attributes:
        source: the job source.
        kind: the job kind (an event delivery's: its subscriber; an
            operation's: ``$op:<activity>@<version>``).
        state: ``pending`` (due and waiting for a worker) or ``uncertain``
            (an operation waiting for a decision).
        count: how many jobs.
        oldest_age: how long the oldest has waited: since it became due
            (pending) or since it turned uncertain; backend clock, >= 0.
    """

    source: Source
    kind: str
    state: JobState
    count: int
    oldest_age: timedelta


class DailyCount(msgspec.Struct, kw_only=True):
    date: datetime
    enqueued: int = 0
    processed: int = 0
    failed: int = 0
    reaped: int = 0


class NukeReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`JobAdmin.nuke_all` deleted, per kind of row.

    Attributes:
        jobs: job rows of the source, every state (their attempt history went
            with them).
        stats: counter rows of the source: folded daily rows plus delta rows
            not folded yet.
        keys: idempotency keys of the source (TTL-window keys included).
    """

    jobs: int = 0
    stats: int = 0
    keys: int = 0


class ChangeEntity(enum.StrEnum):
    JOB = "job"
    DAG = "dag"
    EVENT = "event"
    WORKFLOW = "workflow"
    RESET = "reset"


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


@runtime_checkable
class Migrator(Protocol):
    """Contract ``Migrator``: the schema the store works on."""

    async def migrate(self) -> list[int]:
        """Bring the schema up to date; returns the migration versions applied."""
        ...

    async def check_schema(self) -> None:
        """Refuse to run on a schema that lacks tables or migrations this version
        needs (a worker calls it once at start, so an unmigrated schema is a clear
        error at once instead of statements retried forever).

        Raises:
            SchemaNotMigratedError: the schema has no tables of the product, or
                bundled migrations are not applied to it (names them).
            StoreUnavailableError: the database cannot be reached.
        """
        ...

    def target(self) -> str:
        """Where the store points, for logs: the database without any password,
        and the schema."""
        ...


@runtime_checkable
class StoreClock(Protocol):
    """The time the store's statements see."""

    async def current_time(self) -> datetime:
        """The store's current time (UTC): the clock override when one is set
        (tests skipping time), else the backend's ``now()``."""
        ...


@runtime_checkable
class Closable(Protocol):
    """Releases the driver's resources."""

    async def close(self) -> None:
        """Stop the stream and release its connection. Idempotent."""
        ...


@runtime_checkable
class BacklogReader(Protocol):
    """The waiting work of every source, for gauges (the worker's metrics, a console)."""

    async def backlog(self) -> list[BacklogEntry]:
        """Every source's waiting work in one snapshot: per ``(source, kind)``
        the jobs due and waiting for a worker (state pending, due time passed)
        and the operations waiting for a decision (state uncertain), with the
        age of the oldest. Kinds with nothing waiting are absent. It reads only
        the waiting rows (partial indexes), not the retained history.

        Returns:
            One :class:`BacklogEntry` per ``(source, kind, state)`` with work
            waiting, in no particular order.
        """
        ...


@runtime_checkable
class StatsMaintenance(Protocol):
    """Folding and trimming of the daily counters (run by the leader)."""

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

    async def vacuum_stats(self, source: Source, retention: timedelta) -> int:
        """Trim the daily counters (folded or not) of days older than retention
        (<= 0 keeps all)."""
        ...


@runtime_checkable
class JobAdmin(Protocol):
    """What an operator reads and does on the jobs of a source."""

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

    async def delete_all_jobs(self, source: Source, kind: str, state: JobState) -> int:
        """Delete every job of ``(source, kind)`` in ``state`` (a purge).

        Jobs owned by a workflow execution or a DAG run are exempt whatever
        their state: their run decides their outcome and removes them.

        Args:
            source: whose jobs.
            kind: only this kind; ``''`` targets every kind of the source.
            state: the state the deleted jobs are in. A job in flight cannot
                be purged: ``active`` (a worker holds its lease; its outcome
                would be lost) and ``uncertain`` (an outcome waits for a
                decision) are refused.

        Returns:
            The number of jobs deleted (0 when none matched).

        Raises:
            ValueError: ``state`` is ``active`` or ``uncertain``, or ``kind``
                is not a valid name (NUL, over 255 characters); nothing deleted.
        """
        ...

    async def vacuum_dead(self, source: Source, kind: str, older_than: timedelta) -> int:
        """Delete dead jobs of ``(source, kind)`` enqueued before ``older_than`` ago.

        DAG- and workflow-owned jobs are exempt (their run removes them).
        """
        ...

    async def nuke_all(self, source: Source | str) -> NukeReport:
        """Contract ``NukeAll``: a development reset of one source, in one transaction.

        Deletes every job of the source whatever its state or owner (with its
        attempt history; limit slots its active jobs held are freed), every
        counter row of the source (folded daily rows and unfolded deltas) and
        every idempotency key of the source. Other sources are untouched, and
        so are the event ledger (events and subscriber registrations; only
        the delivery jobs of ``Source.EVENT`` go), workflow executions with
        their histories, DAG runs and schedules.

        Args:
            source: the source to reset (a :class:`Source` or its value,
                ``"queue"``, ``"event"``, ``"dag"``, ``"workflow"``).

        Returns:
            The rows deleted per kind (:class:`NukeReport`); all zero when the
            source had nothing.

        Raises:
            ValueError: ``source`` is not a known source; nothing deleted.
        """
        ...


@runtime_checkable
class ChangeNotifier(Protocol):
    """Contract ``ChangeNotifier``: change hints for admin surfaces."""

    async def changes(self) -> Subscription[Change] | None:
        """A stream of change hints whose first item is a ``ChangeEntity.RESET``
        sent once the push channel is live; a further RESET announces a gap.
        None when the backend is poll-only."""
        ...


#: Prefix of the named queries :meth:`ConsoleReads.console_rows` runs.
CONSOLE_QUERY_PREFIX = "console_"


@runtime_checkable
class ConsoleReads(Protocol):
    """Read-only queries of the operations console (``azync-flow ui``): views
    that no other verb has (filtered execution pages, an execution's
    operations with their attempts, timers, children, event deliveries)."""

    async def console_rows(self, query: str, *args: Any) -> list[Mapping[str, Any]]:
        """Run the driver's named read query ``query`` in a READ ONLY transaction.

        Args:
            query: a query name starting with ``console_`` (the driver's
                ``queries/console.sql`` lists them with their parameters).
            *args: its parameters after the clock (``$2`` on).

        Returns:
            The rows, each a mapping of column name to value.

        Raises:
            ValueError: ``query`` is not a ``console_`` query of the driver.
            StoreError: the database refused or cannot be reached (a write
                inside the query fails: the transaction is read only).
        """
        ...
