"""Runtime verbs of the workflow store (not in the contract): lease, load and
commit a replay pass, and complete an operation — each one transaction.

A pass commit is fenced twice: the workflow task must still be active under
the caller's lease token (else NotFoundError) and the execution's ``next_seq``
must equal the seq the pass replayed up to (else ConflictError). The loser of
a duplicate pass therefore writes nothing.

Every pass commit, whichever verb carries it (:meth:`~WorkflowRuntimeMixin.commit_pass`,
``commit_completions``, ``start_workflow_with_pass``) and whatever the pass
writes, is the one statement ``workflow_pass_commit``
(:meth:`WorkflowRuntimeMixin._commit`); the verbs differ only in the jobs that
carried the pass and how they are settled.
"""

from __future__ import annotations

__all__ = [
    "WorkflowRuntimeMixin",
    "task_state_from_row",
]

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

import asyncpg

from ...._text import clean_text
from ....errors import ConflictError, NotFoundError
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
from .._base import decode_meta, encode_meta, stale_lease
from .._wake import split_wakes
from .children import WorkflowChildrenMixin
from .core import (
    ENQUEUED,
    FAILED,
    LIVE_WORKFLOW_STATES,
    PROCESSED,
    WORKFLOW_TASK,
    child_route,
    execution_from_row,
    op_meta,
    op_route,
)
from .interaction import WorkflowInteractionMixin, check_update_outcomes


class WorkflowRuntimeMixin(WorkflowChildrenMixin, WorkflowInteractionMixin):
    async def load_workflow_task(self, run_id: uuid.UUID, after_seq: int = 0) -> WorkflowTaskState:
        """Implements ``WorkflowRuntimeStore.load_workflow_task`` (documented there)."""
        row = await self._fetchrow("workflow_task_load", run_id, after_seq)
        if row is None:
            raise NotFoundError(f"workflow execution {run_id} does not exist")
        return task_state_from_row(row, execution_from_row(row))

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
        return await self._commit(
            run_id,
            [(job_id, lease_token)],
            True,
            write,
            next_task_at=next_task_at,
            keep_lease=keep_lease,
        )

    async def _commit(
        self,
        run_id: uuid.UUID,
        jobs: Sequence[tuple[uuid.UUID, uuid.UUID]],
        task: bool,
        write: PassWrite,
        *,
        before: Sequence[tuple[str, bytes]] = (),
        errors: Sequence[str | None] = (),
        signals_wake: bool = False,
        next_task_at: datetime | Literal["now"] | None = None,
        keep_lease: timedelta | None = None,
        conn: asyncpg.Connection | None = None,
    ) -> PassCommitResult:
        """Every pass commit, on every path, as ONE statement
        (``workflow_pass_commit``): fence the ``jobs`` that carried the pass (its
        workflow task when ``task``, else operations whose outcomes are
        ``before``; none for a first pass inside its start's transaction,
        ``conn``), settle them (ack, or dead-letter where ``errors`` gives an
        error), append ``before`` + the pass's events and write everything else
        the pass decided, then schedule the next workflow task (``signals_wake``:
        now when a buffered signal is unconsumed; ``next_task_at`` as
        :meth:`commit_pass`; none for a ``keep_lease`` checkpoint).

        Raises:
            NotFoundError / ConflictError: as :meth:`commit_pass` (nothing written).
        """
        events = [*before, *write.events]
        ops, local, kids = write.operations, write.local, write.children
        sigs, ups = write.child_signals, write.updates
        outcome = _outcome_args(write.outcome, write.cancel_known)
        check_update_outcomes(ups)
        row = await self._fetchrow(
            "workflow_pass_commit",
            self.channel,
            run_id,
            write.run_id or run_id,
            [j for j, _ in jobs],
            [t for _, t in jobs],
            task,
            list(errors) or [None] * len(jobs),
            write.expected_next_seq,
            [t for t, _ in events],
            [p for _, p in events],
            write.awaited_signals,
            [o.kind for o in ops],
            [o.payload for o in ops],
            [op_meta(o) for o in ops],
            [o.execution_key for o in ops],
            [o.run_at for o in ops],
            [o.max_attempts for o in ops],
            None if local is None else local.keys,
            None if local is None else local.lease,
            25 if local is None else local.default_max_attempts,
            [s for s, _ in write.timers],
            [d for _, d in write.timers],
            list(write.fired_timers),
            [i for i, _ in write.consumed_signals],
            [s for _, s in write.consumed_signals],
            [u.update_id for u in ups],
            [u.name for u in ups],
            [u.state for u in ups],
            [u.result for u in ups],
            [u.error_type for u in ups],
            [u.message for u in ups],
            [c.seq for c in kids],
            [c.id for c in kids],
            [c.name for c in kids],
            [c.version for c in kids],
            [c.input for c in kids],
            [c.parent_close_policy for c in kids],
            [encode_meta(c.trace_context) for c in kids],
            [s.workflow_id for s in sigs],
            [s.name for s in sigs],
            [s.payload for s in sigs],
            [s.message_id for s in sigs],
            list(write.child_cancels),
            *outcome,
            None if next_task_at == "now" else next_task_at,
            next_task_at == "now",
            signals_wake,
            keep_lease,
            [op_route(o) for o in ops],
            [child_route(c) for c in kids],
            conn=conn,
        )
        _check_committed(run_id, row, jobs, task, write)
        assert row is not None
        await self._wake_after(split_wakes(row["wakes"]), conn)
        return PassCommitResult(
            next_seq=int(row["next_seq"]), leased=_leased_jobs(run_id, ops, row), now=row["at"]
        )

    async def abandon_workflow_task(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> bool:
        """Give up a leased workflow task (after a ConflictError).

        Acks it when another runnable workflow task of the execution exists,
        and wakes the workflow-task loops for that one once committed (its own
        wake-up came while leases skipped the execution for this active task),
        else releases it to pending (giving back its attempt).

        Returns:
            True when released, False when acked.

        Raises:
            NotFoundError: the task is no longer active under ``lease_token``.
        """
        async with self._wtx() as conn:
            job = await self._fence(conn, job_id, lease_token, None, task=True)
            if await self._fetchrow("workflow_job_runnable_task", job["run_id"], conn=conn):
                await self._settle_job(conn, job_id, lease_token)
                await self._wake_after([f"workflow:{job['kind']}"], conn)
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
        run_id: uuid.UUID | None,
        *,
        task: bool,
    ) -> asyncpg.Record:
        """Lock the active job under ``lease_token``, then its execution row, in one
        statement. Returns the job's kind/run and the execution's state/next_seq.

        Raises NotFoundError when the job is not an active workflow task
        (``task``) / operation under the token, or not one of ``run_id`` (None:
        any execution's).
        """
        row = await self._fetchrow("workflow_fence", job_id, lease_token, conn=conn)
        what = "workflow task" if task else "operation"
        if row is None or (row["task_key"] == WORKFLOW_TASK) != task:
            raise NotFoundError(stale_lease(job_id, what))
        if run_id is not None and row["run_id"] != run_id:
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


def _outcome_args(
    outcome: Outcome | None, cancel_known: bool
) -> tuple[str | None, bytes | None, str | None, int | None, uuid.UUID | None, bool]:
    """``p_outcome``, ``p_result``, ``p_reason``, ``p_suspend_seq``, ``p_new_run``
    and ``p_cancel_seen`` of ``workflow_pass_commit`` for a pass outcome
    (``p_cancel_seen``: whether the new run inherits no cancel request, for
    continue-as-new; whether the pass knows of the request, otherwise).

    Raises:
        ValueError: an unknown outcome kind.
    """
    if outcome is None:
        return None, None, None, None, None, cancel_known
    kind, value = outcome[0], outcome[1]
    if kind == "complete":
        assert isinstance(value, bytes)
        return kind, value, "", None, None, cancel_known
    if kind in ("fail", "cancelled"):
        return kind, None, clean_text(str(value)), None, None, cancel_known
    if kind == "suspend":
        seq = outcome[2] if len(outcome) == 3 else None
        return kind, None, clean_text(str(value)), seq, None, cancel_known
    if kind == "continue":
        assert len(outcome) == 4
        _, new_input, new_run, cancel_seen = outcome
        return kind, new_input, None, None, new_run, cancel_seen
    raise ValueError(f"unknown pass outcome {kind!r}")


def _check_committed(
    run_id: uuid.UUID,
    row: asyncpg.Record | None,
    jobs: Sequence[tuple[uuid.UUID, uuid.UUID]],
    task: bool,
    write: PassWrite,
) -> None:
    """Say why a ``workflow_pass_commit`` wrote nothing.

    Raises:
        NotFoundError: the execution is missing, or a job lost its fence.
        ConflictError: next_seq moved, the execution is not running (nor, for a
            pass of a workflow task, suspended), a signal to consume is
            unknown or already consumed, or a cancel the pass does not know of
            was requested.
    """
    if row is None:
        raise NotFoundError(f"workflow execution {run_id} does not exist")
    if row["ok"]:
        return
    if row["fenced"] != len(jobs):
        raise NotFoundError(stale_lease(jobs[0][0], "workflow task" if task else "operation"))
    _check_seq(run_id, row, write.expected_next_seq)
    if row["missing"]:
        raise ConflictError(
            f"signal(s) {list(row['missing'])} of workflow execution {run_id} are unknown or "
            "already consumed; the pass was not committed"
        )
    if row["state"] == "running" or (task and row["state"] == "suspended"):  # still live
        raise ConflictError(
            f"a cancel of workflow execution {run_id} was requested during the pass; the pass "
            "was not committed (it runs again with the request)"
        )
    raise ConflictError(
        f"workflow execution {run_id} is {row['state']}; the pass was not committed"
    )


def _leased_jobs(
    run_id: uuid.UUID, ops: Sequence[ScheduleOperationParams], row: asyncpg.Record
) -> list[Job]:
    """The operations inserted leased (active with a token), as runnable jobs."""
    if not row["leased_keys"]:
        return []
    by_key = {o.execution_key: o for o in ops}
    return [
        Job(
            id=id_,
            source=Source.WORKFLOW,
            kind=by_key[key].kind,
            state=JobState.ACTIVE,
            attempt=attempt,
            max_attempts=max_attempts,
            payload=by_key[key].payload,
            meta=dict(by_key[key].meta),
            run_at=at,
            lease_until=until,
            lease_token=token,
            run_id=run_id,
            task_key=key,
            enqueued_at=at,
            started_at=at,
        )
        for key, id_, attempt, max_attempts, token, until, at in zip(
            row["leased_keys"],
            row["leased_ids"],
            row["leased_attempts"],
            row["leased_max_attempts"],
            row["leased_tokens"],
            row["leased_until"],
            row["leased_at"],
            strict=True,
        )
    ]
