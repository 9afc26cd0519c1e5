"""How far a time skip may go: the next moment at which anything becomes due.

That is the earliest of what the store's ``next_due_at`` reports (jobs due
later: retry backoffs, snoozes, delayed jobs, DAG sleep tasks; workflow timers
and signal-wait timeouts; the next fire of every unpaused schedule) and of the
deadlines the maintenance enforces: each live execution's execution or run
deadline (``timeout_at``) and each activity call's schedule-to-start and
schedule-to-close deadline. A skip that jumped past a deadline would let the
code run on past it (a timer firing after the execution should have ended), so
every skip stops at the first one and the worker enforces it there.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg

from azync_flow.store import Store
from azync_flow.store.admin import JobFilter
from azync_flow.store.queue import Job, JobState, Source
from azync_flow.store.workflows import WorkflowState

__all__ = ["next_due"]

#: Rows read per page while looking for deadlines.
_PAGE = 500
#: Where an operation's timeouts are kept in its meta, in seconds.
_START_S, _CLOSE_S = "schedule_to_start_s", "schedule_to_close_s"
#: Operation states in which each of its deadlines can still fire.
_BEFORE_START = (JobState.PENDING, JobState.SCHEDULED)
_UNSETTLED = (JobState.PENDING, JobState.SCHEDULED, JobState.ACTIVE, JobState.PAUSED)


async def next_due(store: Store[asyncpg.Connection], now: datetime) -> datetime | None:
    """The earliest moment after ``now`` at which work becomes due or a deadline
    passes; None when nothing waits on time."""
    moments = [await store.next_due_at()]
    moments += [d async for d in _execution_deadlines(store)]
    moments += [d async for d in _operation_deadlines(store)]
    later = [m for m in moments if m is not None and m > now]
    return min(later, default=None)


async def _execution_deadlines(store: Store[asyncpg.Connection]) -> AsyncIterator[datetime]:
    """The deadline (the earlier of the execution's and the run's) of every
    live execution that has one."""
    for state in (WorkflowState.RUNNING, WorkflowState.SUSPENDED):
        before: tuple[datetime, uuid.UUID] | None = None
        while True:
            page = await store.list_workflow_executions(state=state, limit=_PAGE, before=before)
            for view in page:
                if view.timeout_at is not None:
                    yield view.timeout_at
            if len(page) < _PAGE:
                break
            before = (page[-1].created_at, page[-1].id)


async def _operation_deadlines(store: Store[asyncpg.Connection]) -> AsyncIterator[datetime]:
    """The schedule-to-start deadline of every activity call not yet leased and
    the schedule-to-close deadline of every unsettled one (both measured from
    when the call was scheduled)."""
    for state in _UNSETTLED:
        offset = 0
        while True:
            jobs, _ = await store.list_jobs(Source.WORKFLOW, JobFilter(state=state), offset, _PAGE)
            for job in jobs:
                for deadline in _deadlines_of(job):
                    yield deadline
            if len(jobs) < _PAGE:
                break
            offset += len(jobs)


def _deadlines_of(job: Job) -> list[datetime]:
    if job.enqueued_at is None or not (_START_S in job.meta or _CLOSE_S in job.meta):
        return []
    found = []
    if _START_S in job.meta and job.attempt == 0 and job.state in _BEFORE_START:
        found.append(job.enqueued_at + timedelta(seconds=float(job.meta[_START_S])))
    if _CLOSE_S in job.meta:
        found.append(job.enqueued_at + timedelta(seconds=float(job.meta[_CLOSE_S])))
    return found
