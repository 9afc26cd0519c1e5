"""Runtime verbs of the workflow store (not in the contract): lease, load and
commit a replay pass, and complete an operation — each one transaction.

A pass commit is fenced twice: the workflow task must still be active under
the caller's lease token (else NotFoundError) and the execution's ``next_seq``
must equal the seq the pass replayed up to (else ConflictError). The loser of
a duplicate pass therefore writes nothing.
"""

from __future__ import annotations

__all__ = [
    "WorkflowRuntimeMixin",
    "one_statement",
    "task_state_from_row",
]

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

import asyncpg

from ...._text import clean_text
from ...errors import ConflictError, NotFoundError
from ...queue import Job, JobState, Source
from ...workflows import (
    BufferedSignal,
    HistoryEvent,
    Outcome,
    PassCommitResult,
    PassWrite,
    ScheduleOperationParams,
    WorkflowExecutionView,
    WorkflowState,
    WorkflowTaskState,
)
from .._base import decode_meta, encode_meta, job_from_row, stale_lease
from .children import WorkflowChildrenMixin
from .core import (
    ENQUEUED,
    FAILED,
    LIVE_WORKFLOW_STATES,
    PROCESSED,
    WORKFLOW_TASK,
    execution_from_row,
)
from .interaction import WorkflowInteractionMixin


class WorkflowRuntimeMixin(WorkflowChildrenMixin, WorkflowInteractionMixin):
    async def dequeue_workflow_tasks(
        self, limit: int, lease: timedelta, kind: str = WORKFLOW_TASK, *, first_passes: bool = True
    ) -> list[Job]:
        """Lease up to ``limit`` due workflow tasks: tasks of executions in flight
        first, then (with ``first_passes``) first passes, each oldest first.

        Takes pending tasks and scheduled ones whose ``run_at`` has come (no
        separate promotion needed for timers), and never a task of an
        execution that already has an active workflow task, so passes of one
        execution never overlap. ``FOR UPDATE SKIP LOCKED``; attempt
        incremented and a fresh lease token minted, lease = backend now + ``lease``.
        """
        if limit <= 0:
            return []
        rows = await self._fetch("workflow_task_dequeue", kind, limit, lease, first_passes)
        jobs = [job_from_row(r) for r in rows]
        jobs.sort(key=lambda j: (j.run_at, j.id))
        return jobs

    async def load_workflow_task(self, run_id: uuid.UUID, after_seq: int = 0) -> WorkflowTaskState:
        """Implements ``WorkflowRuntimeStore.load_workflow_task`` (documented there)."""
        row = await self._fetchrow("workflow_task_load", run_id, after_seq)
        if row is None:
            raise NotFoundError(f"workflow execution {run_id} does not exist")
        return task_state_from_row(row, execution_from_row(row))

    async def commit_workflow_task(
        self,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
        expected_next_seq: int,
        events: Sequence[tuple[str, bytes]] = (),
        operations: Sequence[ScheduleOperationParams] = (),
        timers: Sequence[tuple[int, timedelta]] = (),
        consumed_signals: Sequence[tuple[int, int]] = (),
        fired_timers: Sequence[int] = (),
        outcome: Outcome | None = None,
        next_task_at: datetime | Literal["now"] | None = None,
        keep_lease: timedelta | None = None,
        awaited_signals: Sequence[str] | None = None,
    ) -> int:
        """:meth:`commit_pass` with the pass given field by field.

        Returns:
            The execution's new ``next_seq``.
        """
        write = PassWrite(
            expected_next_seq=expected_next_seq,
            events=list(events),
            operations=list(operations),
            timers=list(timers),
            consumed_signals=list(consumed_signals),
            fired_timers=list(fired_timers),
            outcome=outcome,
            awaited_signals=None if awaited_signals is None else list(awaited_signals),
        )
        result = await self.commit_pass(
            job_id, lease_token, run_id, write, next_task_at=next_task_at, keep_lease=keep_lease
        )
        return result.next_seq

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
        """Commit one replay pass atomically and ack its workflow task.

        Appends ``write.events`` at ``write.expected_next_seq``.. in order,
        inserts the operations (deduped by execution key among non-terminal
        ones; those named by ``write.local`` leased to the caller) and timers
        ((seq, fire after) on the backend clock), marks consumed signals
        consumed and fired timers fired, applies the outcome and acks the
        task. When the execution stays running, the next workflow task is
        scheduled at the earliest of ``next_task_at`` ("now" = backend now)
        and the earliest unfired timer, if either exists (merged with an
        already-runnable task by least(run_at)).

        With ``keep_lease`` and no terminal outcome the commit is a checkpoint:
        the task is not acked but stays active under the same token with its
        lease renewed to backend now + ``keep_lease``, and no next task is
        scheduled — the pass goes on and commits again at the new seq.

        ``write.awaited_signals`` (the signal names the pass left the workflow
        blocked on) replaces the execution's recorded set; None keeps it. It
        tells a signal-waiting execution from a stalled one
        (``list_stalled_workflows``).

        Returns:
            The new ``next_seq``, the operations leased to the caller, the clock.

        Raises:
            NotFoundError: the task is no longer active under ``lease_token``
                (reaped, re-leased or settled), or is not a task of ``run_id``.
            ConflictError: ``next_seq`` moved past ``expected_next_seq`` (another
                pass or a completion won), the execution is terminal, or a
                signal was already consumed. Nothing is written in any case.
            ValueError: an update outcome's state is not ``rejected``,
                ``completed`` or ``failed``; nothing written.
        """
        if keep_lease is None and next_task_at is None:
            jobs = [(job_id, lease_token)]
            done = None
            if one_statement(write):
                done = await self._commit_one(run_id, jobs, True, write)
            elif finishes_in_one_statement(write):
                done = await self._finish_one(run_id, jobs, True, write)
            if done is not None:
                return done
        async with self._wtx() as conn:
            ex = await self._fence(conn, job_id, lease_token, run_id, task=True)
            _check_seq(run_id, ex, write.expected_next_seq)
            # The state after the outcome is known up front: only "no outcome"
            # keeps a running execution running.
            stays_running = write.outcome is None and ex["state"] == WorkflowState.RUNNING
            if keep_lease is not None and stays_running:
                result = await self._commit_body(conn, run_id, ex, write, ack=None, schedule=False)
                await self._must(
                    "job_extend_lease", job_id, lease_token, keep_lease, what="lease", conn=conn
                )
                return result
            return await self._commit_body(
                conn, run_id, ex, write, ack=(job_id, lease_token), next_task_at=next_task_at
            )

    async def _commit_one(
        self,
        run_id: uuid.UUID,
        jobs: Sequence[tuple[uuid.UUID, uuid.UUID]],
        task: bool,
        write: PassWrite,
        before: Sequence[tuple[str, bytes]] = (),
        signals_wake: bool = False,
        conn: asyncpg.Connection | None = None,
    ) -> PassCommitResult | None:
        """A blocked pass (see :func:`one_statement`) carried by ``jobs`` (its
        workflow task, or operations whose outcomes are ``before``; none for a
        first pass inside its start's transaction, ``conn``) as ONE statement
        (``workflow_pass_commit_one``): the same writes as :meth:`_commit_body`,
        one round trip.

        Returns:
            The result, or None when the execution is suspended (the caller
            commits through :meth:`_commit_body`, which knows that case).

        Raises:
            NotFoundError / ConflictError: as :meth:`commit_pass` (nothing written).
        """
        events = [*before, *write.events]
        ops = write.operations
        local = write.local
        rows = await self._fetch(
            "workflow_pass_commit_one",
            run_id,
            [j for j, _ in jobs],
            [t for _, t in jobs],
            task,
            write.expected_next_seq,
            [t for t, _ in events],
            [p for _, p in events],
            [o.kind for o in ops],
            [o.payload for o in ops],
            [encode_meta(o.meta) for o in ops],
            [o.execution_key for o in ops],
            [o.max_attempts for o in ops],
            None if local is None else local.keys,
            None if local is None else local.lease,
            25 if local is None else local.default_max_attempts,
            self.channel,
            signals_wake,
            write.awaited_signals,
            conn=conn,
        )
        if not _one_statement_committed(run_id, rows, jobs, task, write):
            return None
        return PassCommitResult(
            next_seq=write.expected_next_seq + len(events),
            leased=_leased_jobs(run_id, ops, rows) if ops else [],
            now=rows[0]["at"],
        )

    async def _finish_one(
        self,
        run_id: uuid.UUID,
        jobs: Sequence[tuple[uuid.UUID, uuid.UUID]],
        task: bool,
        write: PassWrite,
        before: Sequence[tuple[str, bytes]] = (),
        conn: asyncpg.Connection | None = None,
    ) -> PassCommitResult | None:
        """A pass that appends events and ends its execution (see
        :func:`finishes_in_one_statement`) as ONE statement
        (``workflow_pass_finish_one``): the writes of :meth:`_commit_body` with
        that outcome, one round trip. Arguments and errors as :meth:`_commit_one`.
        """
        assert write.outcome is not None
        kind, value = write.outcome[0], write.outcome[1]
        state = _TERMINAL_OUTCOMES[kind]
        events = [*before, *write.events]
        rows = await self._fetch(
            "workflow_pass_finish_one",
            run_id,
            [j for j, _ in jobs],
            [t for _, t in jobs],
            task,
            write.expected_next_seq,
            [t for t, _ in events],
            [p for _, p in events],
            write.awaited_signals,
            state.value,
            value if state == WorkflowState.SUCCEEDED else None,
            "" if state == WorkflowState.SUCCEEDED else clean_text(str(value)),
            self.channel,
            conn=conn,
        )
        if not _one_statement_committed(run_id, rows, jobs, task, write):
            return None
        return PassCommitResult(
            next_seq=write.expected_next_seq + len(events), leased=[], now=rows[0]["at"]
        )

    async def _commit_body(
        self,
        conn: asyncpg.Connection,
        run_id: uuid.UUID,
        ex: asyncpg.Record,
        write: PassWrite,
        *,
        ack: tuple[uuid.UUID, uuid.UUID] | None,
        before: Sequence[tuple[str, bytes]] = (),
        next_task_at: datetime | Literal["now"] | None = None,
        schedule: bool = True,
        signals_wake: bool = False,
    ) -> PassCommitResult:
        """The writes of a fenced pass (the execution row is locked and its seq
        checked): ``before`` + the pass's events with the ``ack`` of the job
        that carried the pass, operations, timers, signals, the outcome, and
        the next workflow task as the last statement (``signals_wake``: now
        when a buffered signal is unconsumed). Every pass commit, on any path,
        applies its outcome here."""
        first = write.expected_next_seq
        events = [*before, *write.events] if before else write.events
        await self._write_pass(
            conn, run_id, first, events, ack, awaited_signals=write.awaited_signals
        )
        leased: list[Job] = []
        if write.operations:
            rows = await self._schedule_ops(conn, run_id, write.operations, write.local)
            leased = _leased_jobs(run_id, write.operations, rows)
        appended = 0
        if write.children or write.child_signals or write.child_cancels:
            appended = await self._pass_family_writes(conn, run_id, write)
            if appended:
                next_task_at = "now"
        await self._write_timers(conn, run_id, write.timers, write.fired_timers)
        await self._consume_signals(conn, run_id, write.consumed_signals)
        await self._record_update_outcomes(conn, run_id, write.updates)
        state = await self._apply_outcome(conn, run_id, ex["state"], write.outcome)
        if write.outcome is not None and write.outcome[0] == "continue":
            next_task_at = "now"  # the new run's first pass
        if schedule and state == WorkflowState.RUNNING:
            # Next task + this transaction's stats in one (last) statement.
            if next_task_at == "now":
                await self._schedule_last(conn, run_id, None, timers_only=False)
            else:
                await self._schedule_last(
                    conn, run_id, next_task_at, timers_only=True, signals_wake=signals_wake
                )
        return PassCommitResult(
            next_seq=first + len(events) + appended, leased=leased, now=ex["at"]
        )

    async def abandon_workflow_task(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> bool:
        """Give up a leased workflow task (after a ConflictError).

        Acks it when another runnable workflow task of the execution exists,
        else releases it to pending (giving back its attempt).

        Returns:
            True when released, False when acked.

        Raises:
            NotFoundError: the task is no longer active under ``lease_token``.
        """
        async with self._wtx() as conn:
            job = await self._lock_task(conn, job_id, lease_token, None)
            await self._fetchrow("workflow_lock", job["run_id"], conn=conn)
            if await self._fetchrow("workflow_job_runnable_task", job["run_id"], conn=conn):
                await self._settle_job(conn, job_id, lease_token)
                return False
            await self._must("job_release", job_id, lease_token, what="release", conn=conn)
            return True

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
        """Settle an operation and record its outcome in history, atomically.

        Acks (or, with ``dead``, dead-letters with ``last_error``) the
        operation job, appends ``(event_type, payload)`` at the execution's
        next seq and schedules a workflow task (when running). For a
        terminal execution only the job is settled and 0 is returned.

        Returns:
            The seq of the appended event (0 when none was appended).

        Raises:
            NotFoundError: the job is not an active operation of ``run_id``
                under ``lease_token`` (stale report); nothing is written.
        """
        if not dead:
            # The common path: one statement, one implicit transaction.
            row = await self._fetchrow(
                "workflow_op_complete",
                job_id,
                lease_token,
                run_id,
                event_type,
                payload,
                self.channel,
            )
            if row is None:
                async with self.pool.acquire() as conn:  # say why (nothing was written)
                    await self._fence(conn, job_id, lease_token, run_id, task=False)
                raise NotFoundError(stale_lease(job_id, "operation"))
            if not row["acked"]:
                raise AssertionError(f"fenced operation {job_id} was not acked")
            return 0 if row["seq"] is None else int(row["seq"])
        async with self._wtx() as conn:
            ex = await self._fence(conn, job_id, lease_token, run_id, task=False)
            live = ex["state"] in LIVE_WORKFLOW_STATES
            if dead or not live:
                if dead:
                    last_error = clean_text(last_error)
                await self._settle_job(conn, job_id, lease_token, dead=dead, last_error=last_error)
                if not live:
                    return 0
                seq = int(ex["next_seq"])
                await self._write_pass(conn, run_id, seq, [(event_type, payload)])
            else:
                seq = int(ex["next_seq"])
                # Event + ack of the (fenced, locked) operation in one statement.
                await self._write_pass(
                    conn, run_id, seq, [(event_type, payload)], (job_id, lease_token)
                )
            if ex["state"] == WorkflowState.RUNNING:
                await self._schedule_last(conn, run_id, None, timers_only=False)
            return seq

    async def _settle_op(
        self,
        conn: asyncpg.Connection,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
        event_type: str,
        payload: bytes,
        dead: bool,
        last_error: str,
    ) -> int:
        """Settle a locked active operation and record its outcome (see complete_operation)."""
        if dead:
            last_error = clean_text(last_error)
            await self._settle_job(conn, job_id, lease_token, dead=True, last_error=last_error)
        else:
            await self._settle_job(conn, job_id, lease_token)
        ex = await self._fetchrow("workflow_lock", run_id, conn=conn)
        if ex is None or ex["state"] not in LIVE_WORKFLOW_STATES:
            return 0
        seq = await self._fetchval(
            "workflow_history_append", run_id, event_type, payload, conn=conn
        )
        if ex["state"] == WorkflowState.RUNNING:
            await self._schedule_task(conn, run_id, WORKFLOW_TASK, None)
        return int(seq)

    # --- helpers ------------------------------------------------------------------

    async def _lock_task(
        self,
        conn: asyncpg.Connection,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID | None,
    ) -> asyncpg.Record:
        job = await self._fetchrow("workflow_job_lock", job_id, lease_token, conn=conn)
        if job is None or job["task_key"] != WORKFLOW_TASK:
            raise NotFoundError(stale_lease(job_id, "workflow task"))
        if run_id is not None and job["run_id"] != run_id:
            raise NotFoundError(f"job {job_id} is a workflow task of {job['run_id']}, not {run_id}")
        return job

    async def _finish_locked(
        self,
        conn: asyncpg.Connection,
        run_id: uuid.UUID,
        state: WorkflowState,
        result: bytes | None,
        reason: str,
    ) -> None:
        """The shared terminal transition (:meth:`_finish`: retire, record
        undelivered signals, notify) inside a fenced pass commit."""
        await self._finish(conn, run_id, state, result, reason)

    async def _schedule_last(
        self,
        conn: asyncpg.Connection,
        run_id: uuid.UUID,
        run_at: datetime | None,
        *,
        timers_only: bool,
        signals_wake: bool = False,
    ) -> None:
        """Schedule the execution's workflow task and write the transaction's stats
        deltas in ONE statement; must be the last statement of the :meth:`_wtx`.

        ``timers_only`` False: at ``run_at`` (None = now), like ``_schedule_task``;
        True: at least(``run_at``, earliest unfired timer), nothing when both are
        None. The :meth:`_wtx` end-of-transaction bump is
        skipped (see ``workflow_task_schedule_stats``).
        """
        stats: dict[str, list[int]] = self.__dict__["_wf_tx_stats"][id(conn)]
        kinds = sorted(stats)
        await self._fetchrow(
            "workflow_task_schedule_stats",
            run_id,
            WORKFLOW_TASK,
            run_at,
            self.channel,
            timers_only,
            kinds,
            [stats[k][ENQUEUED] for k in kinds],
            [stats[k][PROCESSED] for k in kinds],
            [stats[k][FAILED] for k in kinds],
            signals_wake,
            conn=conn,
        )
        stats.clear()

    async def _fence(
        self,
        conn: asyncpg.Connection,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        run_id: uuid.UUID,
        *,
        task: bool,
    ) -> asyncpg.Record:
        """Lock the active job under ``lease_token``, then its execution row, in one
        statement. Returns the job's kind/run and the execution's state/next_seq.

        Raises NotFoundError when the job is not an active workflow task
        (``task``) / operation of ``run_id`` under the token.
        """
        row = await self._fetchrow("workflow_fence", job_id, lease_token, conn=conn)
        what = "workflow task" if task else "operation"
        if row is None or (row["task_key"] == WORKFLOW_TASK) != task:
            raise NotFoundError(stale_lease(job_id, what))
        if row["run_id"] != run_id:
            raise NotFoundError(f"job {job_id} is a {what} of {row['run_id']}, not {run_id}")
        return row

    async def _write_pass(
        self,
        conn: asyncpg.Connection,
        run_id: uuid.UUID,
        first: int,
        events: Sequence[tuple[str, bytes]],
        ack: tuple[uuid.UUID, uuid.UUID] | None = None,
        *,
        awaited_signals: Sequence[str] | None = None,
    ) -> None:
        """Append ``events`` at ``first``.. and, with ``ack`` = (job id, lease token),
        ack that job (already fenced and locked by :meth:`_fence`), one statement;
        ``awaited_signals`` (None = unchanged) is recorded on the execution."""
        row = await self._fetchrow(
            "workflow_pass_write_ack",
            run_id,
            first,
            [t for t, _ in events],
            [p for _, p in events],
            None if ack is None else ack[0],
            None if ack is None else ack[1],
            None if awaited_signals is None else list(awaited_signals),
            conn=conn,
        )
        if ack is not None:
            if row is None or row["acked_kind"] is None:
                raise NotFoundError(stale_lease(ack[0], "job"))
            self._count(conn, row["acked_kind"], PROCESSED)

    async def _write_timers(
        self,
        conn: asyncpg.Connection,
        run_id: uuid.UUID,
        timers: Sequence[tuple[int, timedelta]],
        fired: Sequence[int],
    ) -> None:
        if timers:
            await self._fetch(
                "workflow_timers_insert",
                run_id,
                [s for s, _ in timers],
                [d for _, d in timers],
                conn=conn,
            )
        if fired:
            await self._fetch("workflow_timers_fire", run_id, list(fired), conn=conn)

    async def _consume_signals(
        self, conn: asyncpg.Connection, run_id: uuid.UUID, consumed: Sequence[tuple[int, int]]
    ) -> None:
        if not consumed:
            return
        rows = await self._fetch(
            "workflow_signals_consume",
            run_id,
            [i for i, _ in consumed],
            [s for _, s in consumed],
            conn=conn,
        )
        if len(rows) != len({i for i, _ in consumed}):
            missing = sorted({i for i, _ in consumed} - {r["id"] for r in rows})
            raise ConflictError(
                f"signal(s) {missing} of workflow execution {run_id} are unknown or already "
                "consumed; the pass was not committed"
            )

    async def _apply_outcome(
        self, conn: asyncpg.Connection, run_id: uuid.UUID, state: str, outcome: Outcome | None
    ) -> str:
        if outcome is None:
            return state
        kind, value = outcome[0], outcome[1]
        if kind == "complete":
            assert isinstance(value, bytes)
            await self._finish_locked(conn, run_id, WorkflowState.SUCCEEDED, value, "")
            return WorkflowState.SUCCEEDED
        if kind in ("fail", "cancelled"):
            target = WorkflowState.FAILED if kind == "fail" else WorkflowState.CANCELLED
            await self._finish_locked(conn, run_id, target, None, str(value))
            return target
        if kind == "continue":
            assert len(outcome) == 4
            _, new_input, new_run, cancel_seen = outcome
            await self._continue_as_new(conn, run_id, new_input, new_run, cancel_seen)
            return state
        if kind == "suspend":
            if state == WorkflowState.RUNNING:
                seq = outcome[2] if len(outcome) == 3 else None
                await self._suspend(conn, run_id, str(value), seq)
            return WorkflowState.SUSPENDED
        raise ValueError(f"unknown pass outcome {kind!r}")


def _check_seq(run_id: uuid.UUID, ex: asyncpg.Record, expected: int) -> None:
    if ex["next_seq"] != expected:
        raise ConflictError(
            f"workflow execution {run_id} is at seq {ex['next_seq']}, the pass expected "
            f"{expected} (another pass or a completion won); nothing was written"
        )
    if ex["state"] not in LIVE_WORKFLOW_STATES:
        raise ConflictError(
            f"workflow execution {run_id} is {ex['state']} (finished); the pass was not committed"
        )


def _leased_jobs(
    run_id: uuid.UUID, ops: Sequence[ScheduleOperationParams], rows: Sequence[asyncpg.Record]
) -> list[Job]:
    """The operations inserted leased (active with a token), as runnable jobs."""
    jobs: list[Job] = []
    for op, row in zip(ops, rows, strict=True):
        if row["inserted"] and row["lease_token"] is not None:
            jobs.append(
                Job(
                    id=row["id"],
                    source=Source.WORKFLOW,
                    kind=op.kind,
                    state=JobState.ACTIVE,
                    attempt=row["attempt"],
                    max_attempts=row["max_attempts"],
                    payload=op.payload,
                    meta=dict(op.meta),
                    run_at=row["run_at"],
                    lease_until=row["lease_until"],
                    lease_token=row["lease_token"],
                    run_id=run_id,
                    task_key=op.execution_key,
                    enqueued_at=row["enqueued_at"],
                    started_at=row["started_at"],
                )
            )
    return jobs


def task_state_from_row(
    row: asyncpg.Record, execution: WorkflowExecutionView, prefix: str = ""
) -> WorkflowTaskState:
    """A :class:`WorkflowTaskState` from a load row (``workflow_task_load`` columns;
    the execution's own columns named with ``prefix``)."""
    run_id = execution.id
    h_seq = row["h_seq"] or []
    s_id = row["s_id"] or []
    return WorkflowTaskState(
        execution=execution,
        next_seq=row[prefix + "next_seq"],
        cancel_requested=row[prefix + "cancel_requested"],
        suspend_reason=row[prefix + "suspend_reason"],
        trace_context=decode_meta(row[prefix + "trace_context"]),
        history=[
            HistoryEvent(
                workflow_id=run_id, seq=seq, type=type_, payload=bytes(payload), created_at=at
            )
            for seq, type_, payload, at in zip(
                h_seq, row["h_type"], row["h_payload"], row["h_created"], strict=True
            )
        ]
        if h_seq
        else [],
        signals=[
            BufferedSignal(i, name, bytes(payload), message_id)
            for i, name, message_id, payload in zip(
                s_id, row["s_name"], row["s_message_id"], row["s_payload"], strict=True
            )
        ]
        if s_id
        else [],
        due_timers=list(row["due_timer_seqs"]),
        now=row["load_now"],
    )


#: The terminal outcomes of a pass and the state each ends the execution in.
_TERMINAL_OUTCOMES = {
    "complete": WorkflowState.SUCCEEDED,
    "fail": WorkflowState.FAILED,
    "cancelled": WorkflowState.CANCELLED,
}


def finishes_in_one_statement(write: PassWrite) -> bool:
    """True when the pass only appends events and ends the execution (complete,
    fail or cancelled): :meth:`WorkflowRuntimeMixin._finish_one` commits it."""
    return (
        write.outcome is not None
        and write.outcome[0] in _TERMINAL_OUTCOMES
        and not write.operations
        and not write.timers
        and not write.fired_timers
        and not write.consumed_signals
        and not write.children
        and not write.child_signals
        and not write.child_cancels
        and not write.updates
    )


def _one_statement_committed(
    run_id: uuid.UUID,
    rows: Sequence[asyncpg.Record],
    jobs: Sequence[tuple[uuid.UUID, uuid.UUID]],
    task: bool,
    write: PassWrite,
) -> bool:
    """Whether a one-statement pass commit wrote; False only for a workflow task
    of a suspended execution (the transaction path knows that case).

    Raises:
        NotFoundError: the execution is missing, or a job lost its fence.
        ConflictError: next_seq moved or the execution is not running.
    """
    if not rows:
        raise NotFoundError(f"workflow execution {run_id} does not exist")
    head = rows[0]
    if head["ok"]:
        return True
    if head["fenced"] != len({j for j, _ in jobs}):
        raise NotFoundError(stale_lease(jobs[0][0], "workflow task" if task else "operation"))
    _check_seq(run_id, head, write.expected_next_seq)
    if task:
        return False  # suspended: the transaction path writes the pass
    raise ConflictError(
        f"workflow execution {run_id} is {head['state']}; the pass was not committed"
    )


def one_statement(write: PassWrite) -> bool:
    """True when the pass can commit as one statement: it only appends events and
    schedules due operations (no timers started or fired, no signal consumed, no
    update outcome, no outcome — a terminal or suspending outcome always goes through the
    transaction's one outcome step, ``_apply_outcome``)."""
    return (
        write.outcome is None
        and not write.timers
        and not write.fired_timers
        and not write.consumed_signals
        and not write.children
        and not write.child_signals
        and not write.child_cancels
        and not write.updates
        and all(o.run_at is None for o in write.operations)
    )
