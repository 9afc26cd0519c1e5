"""Admin verbs of the PostgreSQL driver (contract :mod:`azync_flow.store.admin`):
jobs of one source at a time (reads, retry, pause, delete), the daily
counters, vacuum, and change hints for admin surfaces.

Change hints: per-row change notification would put a NOTIFY on every settle,
and NOTIFY serialises committing transactions on a global lock — too costly
for the hot path. Instead a :class:`ChangeSubscription` rides on the wake
channel and on Postgres' cumulative table statistics:

* the first item is a ``ChangeEntity.RESET``, sent once LISTEN is live;
* every wake (a job of ``(source, kind)`` became pending) is forwarded as a
  partition hint ``Change(entity=JOB, source=..., kind=..., state="pending")``
  with no id;
* once a second the listener compares the insert/update/delete counters of
  the jobs, DAG, event and workflow tables of the schema; when they moved, it
  sends a RESET ("refetch"), as it does after every reconnect.

So every committed change is announced by a hint or a RESET, never silently
lost, at the price of coarse hints: a consumer refetches on RESET. Latency is
about one second plus Postgres' statistics flush delay (up to ~10 s for an
idle backend).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from ...errors import ConflictError, NotFoundError
from ..admin import (
    CONSOLE_QUERY_PREFIX,
    BacklogEntry,
    Change,
    ChangeEntity,
    DailyCount,
    Depths,
    JobFilter,
    NukeReport,
)
from ..queue import AttemptError, Job, JobState, Source
from ..validate import check_name
from ._base import PgBase, job_from_row
from ._listen import ListenSubscription, open_subscription, parse_wake
from ._queries import QUERIES

__all__ = [
    "CHANGE_POLL_INTERVAL",
    "DAILY_WINDOW_DAYS",
    "IN_FLIGHT_STATES",
    "VACUUM_BATCH",
    "AdminMixin",
    "ChangeMixin",
    "ChangeSubscription",
]

#: Length of the daily throughput window of :meth:`AdminMixin.stats` and ``all_daily``.
DAILY_WINDOW_DAYS = 30
#: Rows deleted per statement by :meth:`AdminMixin.vacuum_completed`.
VACUUM_BATCH = 5_000

_ZERO = timedelta(0)

#: States :meth:`AdminMixin.delete_all_jobs` refuses: a worker holds the job
#: (its settle would find nothing) or its outcome waits for a decision.
IN_FLIGHT_STATES = frozenset({JobState.ACTIVE, JobState.UNCERTAIN})


class AdminMixin(PgBase):
    # --- reads ------------------------------------------------------------------

    async def current_time(self) -> datetime:
        """Implements ``StoreClock.current_time`` (documented there)."""
        now: datetime = await self._fetchval("current_time")
        return now

    async def console_rows(self, query: str, *args: Any) -> list[Mapping[str, Any]]:
        """Contract ``ConsoleReads``: a ``console_`` named query, READ ONLY."""
        if not query.startswith(CONSOLE_QUERY_PREFIX) or query not in QUERIES:
            raise ValueError(f"{query!r} is not a console query")
        async with self.pool.acquire() as conn, conn.transaction(readonly=True):
            rows: list[Mapping[str, Any]] = await conn.fetch(QUERIES[query], self.now(), *args)
        return rows

    async def list_kinds(self, source: Source) -> list[str]:
        """Distinct kinds of the source, from jobs and stat history, sorted."""
        return [r["kind"] for r in await self._fetch("job_list_kinds", source.value)]

    async def kind_depths(self, source: Source) -> dict[str, Depths]:
        """Per-kind instantaneous state counters of the source.

        ``oldest_pending_age`` is measured against the backend clock.
        """
        rows = await self._fetch("job_kind_depths", source.value, "")
        return {r["kind"]: _depths(r) for r in rows}

    async def backlog(self) -> list[BacklogEntry]:
        """Waiting work of every source (see :meth:`JobAdmin.backlog`)."""
        rows = await self._fetch("job_backlog")
        return [
            BacklogEntry(
                source=Source(r["source"]),
                kind=r["kind"],
                state=JobState(r["state"]),
                count=int(r["count"]),
                oldest_age=r["oldest_age"],
            )
            for r in rows
        ]

    async def stats(self, source: Source, kind: str) -> tuple[Depths, list[DailyCount]]:
        """One kind's depths and its daily window (:data:`DAILY_WINDOW_DAYS` days
        ending today, UTC, oldest first, idle days as zeros).

        Daily counters: ``enqueued``; ``processed`` = acked + skipped;
        ``failed`` = dead-lettered (by ``dead``, a snooze deadline or the
        reaper); ``reaped`` = expired leases reclaimed.
        """
        row = await self._fetchrow("job_kind_depths", source.value, kind)
        depths = _depths(row) if row is not None else Depths()
        return depths, await self._daily(source, kind)

    async def all_daily(self, source: Source) -> list[DailyCount]:
        """The daily window summed across every kind of the source, oldest first."""
        return await self._daily(source, "")

    async def _daily(self, source: Source, kind: str) -> list[DailyCount]:
        rows = await self._fetch("stats_daily", source.value, kind, DAILY_WINDOW_DAYS)
        return [
            DailyCount(
                date=_midnight(r["day"]),
                enqueued=r["enqueued"],
                processed=r["processed"],
                failed=r["failed"],
                reaped=r["reaped"],
            )
            for r in rows
        ]

    async def list_jobs(
        self, source: Source, filter: JobFilter, offset: int, limit: int
    ) -> tuple[list[Job], int]:
        """A page of the source's jobs matching ``filter`` and the total count.

        Ordering: pending/dead by enqueued_at asc; scheduled/paused by run_at
        asc; active by lease_until asc; succeeded by completed_at desc; no
        state filter by enqueued_at desc (newest first); other states by
        enqueued_at asc; ties by id.
        """
        state = filter.state.value if filter.state is not None else ""
        rows = await self._fetch(
            "job_list", source.value, filter.kind, state, max(offset, 0), max(limit, 0)
        )
        total = int(rows[0]["total"]) if rows else 0
        return [job_from_row(r) for r in rows if r["id"] is not None], total

    async def get_job(self, source: Source, id: uuid.UUID) -> Job:
        """One job of the source.

        Raises:
            NotFoundError: no job of the source has this id.
        """
        row = await self._fetchrow("job_get", source.value, id)
        if row is None:
            raise NotFoundError(f"no {source} job {id}")
        return job_from_row(row)

    # --- operator verbs -------------------------------------------------------------

    async def _refuse_owned(self, source: Source, id: uuid.UUID, verb: str) -> None:
        """Raise ConflictError when the job belongs to a workflow execution or a
        DAG run: its retries and removal go through that run, never the job verbs."""
        row = await self._fetchrow("job_get", source.value, id)
        if row is None:
            return
        if row["run_id"] is not None:
            raise ConflictError(
                f"job {id} cannot be {verb}: it belongs to workflow execution "
                f"{row['run_id']}, which decides its outcome (an activity's failure is "
                "already in its history); act on the execution instead "
                "(`azync-flow workflows resume|cancel|terminate`, or start a new one)"
            )
        if row["dag_id"] is not None:
            raise ConflictError(
                f"job {id} cannot be {verb}: it is a task of DAG run {row['dag_id']}; "
                f"act on the run instead (`azync-flow dags retry|cancel {row['dag_id']}`)"
            )

    async def job_attempts(self, source: Source, id: uuid.UUID) -> list[AttemptError]:
        """A job's failure history (reschedule, dead, deadline, reap kill), oldest first.

        An unknown id returns an empty list.
        """
        rows = await self._fetch("job_attempts", source.value, id)
        return [AttemptError(attempt=r["attempt"], error=r["error"], at=r["at"]) for r in rows]

    async def retry_job(self, source: Source, id: uuid.UUID) -> None:
        """Reset a dead job to pending now with a fresh budget (attempt, reap_count
        and the snooze deadline cleared) and wake workers.

        Raises:
            NotFoundError: the job is missing or not dead.
            ConflictError: its idempotency key is now held by another live job, or
                the job belongs to a workflow execution or a DAG run (retried
                through that run: ``workflows resume``, ``dags retry``); nothing changed.
        """
        try:
            row = await self._fetchrow("job_retry", source.value, id, self.channel)
        except asyncpg.UniqueViolationError as exc:
            raise ConflictError(
                f"job {id} cannot be retried: a live job holds its idempotency key"
            ) from exc
        if row is None:
            await self._refuse_owned(source, id, "retried")
            raise NotFoundError(f"no dead {source} job {id}")

    async def retry_all_dead(self, source: Source, kind: str) -> int:
        """Reset every dead job of ``(source, kind)`` (``''`` = all kinds) to pending.

        A dead job whose idempotency key is held by a live job (or by another
        dead job revived in the same call) stays dead, and so do jobs owned by
        a workflow execution or a DAG run. Returns the count.
        """
        row = await self._fetchrow("job_retry_all_dead", source.value, kind, self.channel)
        assert row is not None
        return int(row["retried"])

    async def run_now(self, source: Source, id: uuid.UUID) -> None:
        """``JobAdmin.run_now``: expedite a scheduled job."""
        await self._must(
            "job_run_now", source.value, id, self.channel, what=f"no scheduled {source} job {id}"
        )

    async def archive_job(self, source: Source, id: uuid.UUID) -> None:
        """``JobAdmin.archive_job``: force a pending or scheduled job to dead."""
        if await self._fetchrow("job_archive", source.value, id) is None:
            await self._refuse_owned(source, id, "archived")
            raise NotFoundError(f"no pending or scheduled {source} job {id}")

    async def pause_job(self, source: Source, id: uuid.UUID) -> None:
        """``JobAdmin.pause_job``: hold a pending or scheduled job out of the ready set (paused)."""
        await self._must(
            "job_pause", source.value, id, what=f"no pending or scheduled {source} job {id}"
        )

    async def resume_job(self, source: Source, id: uuid.UUID) -> None:
        """Implements ``JobAdmin.resume_job`` (documented there)."""
        await self._must(
            "job_resume", source.value, id, self.channel, what=f"no paused {source} job {id}"
        )

    async def delete_job(self, source: Source, id: uuid.UUID, state: JobState) -> None:
        """``JobAdmin.delete_job``: delete one job of the source in ``state``."""
        if await self._fetchrow("job_delete", source.value, id, state.value) is None:
            await self._refuse_owned(source, id, "deleted")
            raise NotFoundError(f"no {state} {source} job {id}")

    async def delete_all_jobs(self, source: Source, kind: str, state: JobState) -> int:
        """Implements ``JobAdmin.delete_all_jobs`` (documented there)."""
        check_name(kind, "kind", empty_ok=True)
        if state in IN_FLIGHT_STATES:
            raise ValueError(
                f"jobs in state {state} cannot be purged: they are in flight "
                f"(purge one of: {', '.join(s for s in JobState if s not in IN_FLIGHT_STATES)})"
            )
        return int(await self._fetchval("job_delete_all", source.value, kind, state.value))

    async def vacuum_dead(self, source: Source, kind: str, older_than: timedelta) -> int:
        """Implements ``JobAdmin.vacuum_dead`` (documented there)."""
        return int(await self._fetchval("job_vacuum_dead", source.value, kind, older_than))

    async def nuke_all(self, source: Source | str) -> NukeReport:
        """Implements ``JobAdmin.nuke_all`` (documented there)."""
        try:
            known = Source(source)
        except ValueError:
            choices = ", ".join(s.value for s in Source)
            raise ValueError(f"unknown source {source!r}: one of {choices}") from None
        row = await self._fetchrow("job_nuke_all", known.value)
        assert row is not None
        return NukeReport(jobs=row["jobs"], stats=row["stats"], keys=row["keys"])

    # --- retention ------------------------------------------------------------------

    async def vacuum_stats(self, source: Source, retention: timedelta) -> int:
        """Delete the counters (folded rows and pending deltas) of days older than
        ``retention``; <= 0 keeps all. Returns the rows deleted."""
        if retention <= _ZERO:
            return 0
        return int(await self._fetchval("stats_vacuum", source.value, retention))

    async def fold_stats(self, limit: int) -> int:
        """Implements ``StatsMaintenance.fold_stats`` (documented there)."""
        if limit <= 0:
            raise ValueError(f"fold_stats limit must be positive, got {limit}")
        return int(await self._fetchval("stats_fold", limit))

    async def next_due_at(self) -> datetime | None:
        """The earliest moment after the store's clock at which work becomes due.

        Counts scheduled and future pending jobs of every source (retry
        backoffs, snoozes, delayed jobs, future workflow tasks, DAG sleep
        tasks), unfired workflow timers and the next fire of every unpaused
        schedule; not lease expiries. Time skipping
        (``azync_flow.testing``) moves a movable clock exactly there.

        Returns:
            A UTC-aware datetime, or None when nothing waits on time.
        """
        due: datetime | None = await self._fetchval("next_due_at")
        return due

    async def vacuum_idempotency(self, source: Source) -> int:
        """Delete expired time-window idempotency keys of the source."""
        return int(await self._fetchval("idempotency_vacuum", source.value))

    async def vacuum_completed(self, source: Source, retention: timedelta) -> int:
        """Delete succeeded (and skipped) jobs completed before ``retention`` ago.

        ``retention <= 0`` keeps them forever. DAG-owned (``dag_id``) and
        workflow-owned (``run_id``) jobs are exempt: they are removed only with
        their run. Skipped jobs are included on purpose (the contract names only
        succeeded ones, but nothing else would ever remove a skipped queue job).
        Deletes in batches of :data:`VACUUM_BATCH` rows so no statement holds
        locks for long.
        """
        if retention <= _ZERO:
            return 0
        removed = 0
        while True:
            n = int(
                await self._fetchval("job_vacuum_completed", source.value, retention, VACUUM_BATCH)
            )
            removed += n
            if n < VACUUM_BATCH:
                return removed


def _depths(r: asyncpg.Record) -> Depths:
    return Depths(
        pending=r["pending"],
        scheduled=r["scheduled"],
        active=r["active"],
        dead=r["dead"],
        paused=r["paused"],
        succeeded=r["succeeded"],
        oldest_pending_age=r["oldest_pending_age"] if r["pending"] else _ZERO,
    )


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


#: How often the statistics counters are compared (seconds).
CHANGE_POLL_INTERVAL = 1.0


class ChangeSubscription(ListenSubscription[Change]):
    """The stream of ``ChangeNotifier.changes``; see the module docstring."""

    tick_interval = CHANGE_POLL_INTERVAL
    _task_name = "azync-change-listener"

    def __init__(self, store: PgBase) -> None:
        super().__init__(store)
        self._seen: int | None = None

    def _decode(self, payload: str) -> Change | None:
        wake = parse_wake(payload)
        if wake is None:
            return None
        return Change(
            entity=ChangeEntity.JOB, source=Source(wake.source), kind=wake.kind, state="pending"
        )

    async def _after_connect(self, conn: asyncpg.Connection, *, reconnected: bool) -> None:
        self._seen = await self._counters(conn)
        self._put(await self._reset(conn))

    async def _tick(self, conn: asyncpg.Connection) -> None:
        seen = await self._counters(conn)
        if seen != self._seen:
            self._seen = seen
            self._put(await self._reset(conn))

    async def _counters(self, conn: asyncpg.Connection) -> int:
        value = await conn.fetchval(
            QUERIES["change_counters"],
            self._store.now(),
            self._store.schema,
            timeout=self.tick_interval * 5,
        )
        return int(value)

    async def _reset(self, conn: asyncpg.Connection) -> Change:
        at = await conn.fetchval("SELECT coalesce($1::timestamptz, now())", self._store.now())
        return Change(entity=ChangeEntity.RESET, at=at)


class ChangeMixin(PgBase):
    async def changes(self) -> ChangeSubscription | None:
        """Contract ``ChangeNotifier.Changes``: change hints, first a RESET.

        Returns None when the store is poll-only. Close the subscription to
        release its dedicated connection.

        Raises:
            StoreError: the listening connection cannot be opened.
        """
        return await open_subscription(self, ChangeSubscription)
