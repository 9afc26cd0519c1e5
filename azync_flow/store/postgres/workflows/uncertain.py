"""Uncertain operations: an operation whose outcome is unknown is
parked, never blindly retried, until code or a person decides.

Event type names and payload bytes are chosen by the caller (the runtime);
the store stays opaque to them.
"""

from __future__ import annotations

__all__ = [
    "LATE_OUTCOME_EVENT",
    "LEASE_EXPIRED_REASON",
    "UncertainMixin",
]

import uuid
from collections.abc import Callable

import asyncpg

from ...._text import clean_text
from ....errors import ConflictError, NotFoundError
from ...events import PublishParams
from ...queue import Job, JobState
from ...workflows import ResolvedOperation, UncertainDecision, UncertainOperation, WorkflowState
from .._base import decode_meta, job_from_row
from .core import LIVE_WORKFLOW_STATES, WORKFLOW_TASK, WorkflowCoreMixin

#: Ledger event type of a late report refused by the fence.
LATE_OUTCOME_EVENT = "azync.operation.late_outcome_ignored"

#: Reason the reaper records for an expired non-idempotent operation.
LEASE_EXPIRED_REASON = (
    "lease expired while the operation was running; it may or may not have taken effect"
)

_RESOLVED_STATE = {
    UncertainDecision.COMPLETE: "succeeded",
    UncertainDecision.FAIL: "dead",
    UncertainDecision.RETRY: "pending",
}


class UncertainMixin(WorkflowCoreMixin):
    async def mark_uncertain(
        self,
        operation_job_id: uuid.UUID,
        lease_token: uuid.UUID,
        reason: str,
        *,
        event_type: str,
        payload: bytes,
    ) -> int:
        """Contract ``MarkUncertain``: park an active operation as uncertain.

        In one transaction, fenced by ``lease_token``: the job moves to
        'uncertain' (uncertain_reason/uncertain_since stamped, the attempt
        recorded), a running execution is suspended with a reason naming the
        operation, and ``(event_type, payload)`` (the runtime's
        OperationUncertain event) is appended to its history. For a terminal
        execution only the job is parked and 0 is returned.

        Returns:
            The seq of the appended event (0 when none).

        Raises:
            NotFoundError: the job is not an active operation under
                ``lease_token``; nothing is written.
        """
        async with self._wtx() as conn:
            return await self._mark(
                conn, operation_job_id, lease_token, reason, event_type, payload
            )

    async def reap_uncertain_operations(
        self,
        encode: Callable[[Job, str], tuple[str, bytes]],
        *,
        reason: str = LEASE_EXPIRED_REASON,
        limit: int = 100,
    ) -> list[uuid.UUID]:
        """Implements ``WorkflowMaintenance.reap_uncertain_operations`` (documented there)."""
        ids = [r["id"] for r in await self._fetch("workflow_op_expired_nonidempotent", limit)]
        marked: list[uuid.UUID] = []
        for job_id in ids:
            async with self._wtx() as conn:
                row = await self._fetchrow("workflow_op_lock_expired", job_id, conn=conn)
                if row is None:
                    continue  # settled, re-leased or taken by another reaper meanwhile
                event_type, payload = encode(job_from_row(row), reason)
                await self._mark(conn, job_id, row["lease_token"], reason, event_type, payload)
                await self._lost(conn, row, None)  # the mark keeps the attempt's line
                marked.append(job_id)
        return marked

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
        """Contract ``ResolveUncertain``: apply an audited decision, in one transaction.

        - ``complete``: the operation succeeds with ``result``; ``outcome_event``
          (ActivityCompleted-like) is appended.
        - ``fail``: the operation goes dead with ``error``; ``outcome_event``
          (ActivityFailed-like) is appended.
        - ``retry``: the operation returns to pending (the uncertain attempt
          stays recorded); no ``outcome_event``.

        The decision, ``decided_by``, ``note`` and time are kept on the job,
        ``resolved_event`` (OperationResolved) is appended before the outcome,
        the lease token is cleared (a late report of the old attempt is
        fenced out), and when no other operation of the execution is
        uncertain a suspended execution is resumed and its workflow task
        scheduled.

        Raises:
            ValueError: unknown decision, or events not matching it.
            NotFoundError: no such operation, or it is not uncertain (and was
                never resolved); nothing changed.
            ConflictError: it was already resolved (possibly by a concurrent
                resolver), or ``expected_attempt`` is given and the operation
                is uncertain at another attempt (a later episode); nothing changed.
        """
        dec = _check_decision(decision, result, error, outcome_event)
        async with self._wtx() as conn:
            op = _check_resolvable(
                operation_job_id,
                await self._fetchrow("workflow_op_lock", operation_job_id, conn=conn),
            )
            if expected_attempt is not None and op["attempt"] != expected_attempt:
                raise ConflictError(
                    f"operation {operation_job_id} is uncertain at attempt {op['attempt']}, "
                    f"not {expected_attempt} (decided and re-run meanwhile); nothing changed"
                )
            await self._fetchrow(
                "workflow_op_resolve",
                operation_job_id,
                _RESOLVED_STATE[dec],
                dec.value,
                clean_text(decided_by),
                clean_text(note or ""),
                result if dec == UncertainDecision.COMPLETE else None,
                clean_text(error or ""),
                conn=conn,
            )
            if dec == UncertainDecision.RETRY:
                await self._fetch(
                    "workflow_wake", self.channel, f"workflow:{op['kind']}", conn=conn
                )
            ex = await self._must("workflow_lock", op["run_id"], what="execution", conn=conn)
            if ex["state"] in LIVE_WORKFLOW_STATES:
                await self._record_resolution(conn, op["run_id"], ex, resolved_event, outcome_event)
            return ResolvedOperation(op["run_id"], ex["name"])

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
    ) -> ResolvedOperation:
        """Resolve an uncertain operation from a late report of the very attempt
        that turned uncertain (a late report in another form), in one transaction.

        The attempt's worker knows the outcome, so its report decides:
        ``complete`` (or ``fail`` with ``dead``) recorded with
        ``decided_by="late report of attempt N"``, then ``resolved_event`` and
        ``(event_type, payload)`` appended, the execution resumed and its
        workflow task scheduled — exactly as :meth:`resolve_uncertain`. Once any
        decision was made the token is cleared and the report is refused.

        Raises:
            NotFoundError: the operation is not uncertain under ``lease_token``
                (already resolved, or a different attempt); nothing changed.
        """
        async with self._wtx() as conn:
            op = await self._fetchrow(
                "workflow_op_lock_uncertain_attempt", operation_job_id, lease_token, conn=conn
            )
            if op is None:
                raise NotFoundError(
                    f"operation {operation_job_id} is not uncertain under this lease token "
                    "(resolved already, or another attempt); the late report was not applied"
                )
            dec = UncertainDecision.FAIL if dead else UncertainDecision.COMPLETE
            await self._fetchrow(
                "workflow_op_resolve",
                operation_job_id,
                _RESOLVED_STATE[dec],
                dec.value,
                f"late report of attempt {op['attempt']}",
                "",
                result,
                clean_text(last_error),
                conn=conn,
            )
            ex = await self._must("workflow_lock", op["run_id"], what="execution", conn=conn)
            if ex["state"] in LIVE_WORKFLOW_STATES:
                await self._record_resolution(
                    conn, op["run_id"], ex, resolved_event, (event_type, payload)
                )
            return ResolvedOperation(op["run_id"], ex["name"])

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
        """Park again as uncertain an operation whose complete decision's result
        does not fit the activity's result type (found when replay decodes it),
        so a new decision can be made, in one transaction.

        Fenced by the decided result: only an operation of ``workflow_id`` at
        ``execution_key`` still in state 'succeeded' by a complete decision whose
        recorded result is exactly ``result`` (a newer decision wins). The job
        moves to 'uncertain' (reason, ``uncertain_since``, attempt row
        ``uncertain: <reason>``; the attempt is not counted again), its payload
        becomes ``payload(old payload)`` (the runtime records the current result
        type there), ``(event_type, event)`` (an OperationUncertain event) is
        appended and a running execution is suspended with a reason naming the
        operation — as :meth:`mark_uncertain` does.

        Args:
            workflow_id: the execution.
            execution_key: the operation's ``<workflow_id>/<seq>``.
            result: the decided result as recorded (bytes of its ActivityCompleted).
            reason: why it does not fit (recorded as the uncertain reason).
            payload: maps the recorded operation payload to the one to keep.
            event_type / event: the history event to append.

        Returns:
            The seq of the appended event; 0 when nothing was parked (decided
            anew, not a complete decision, no such operation) or the execution
            is finished (then the operation is parked and nothing appended).
        """
        reason = clean_text(reason)
        async with self._wtx() as conn:
            row = await self._fetchrow(
                "workflow_op_lock_decided", workflow_id, execution_key, result, conn=conn
            )
            if row is None:
                return 0
            kept = payload(b"" if row["payload"] is None else bytes(row["payload"]))
            op = await self._fetchrow(
                "workflow_op_repark_decided", row["id"], reason, kept, conn=conn
            )
            return await self._suspend_on(conn, op, reason, event_type, event)

    async def attempt_settlement(
        self, operation_job_id: uuid.UUID, lease_token: uuid.UUID
    ) -> tuple[JobState, str] | None:
        """Where the attempt holding ``lease_token`` left operation
        ``operation_job_id``: its state and last error while the row still
        carries that token and is no longer active (the attempt's own settle
        or reschedule committed, or the reaper parked or dead-lettered it under
        that token), None when it is active, another attempt leased it, or a
        decision cleared the token. A read; nothing is locked or written.
        """
        row = await self._fetchrow("workflow_op_attempt_settlement", operation_job_id, lease_token)
        if row is None:
            return None
        return JobState(row["state"]), str(row["last_error"])

    async def list_uncertain_operations(
        self, limit: int = 100, workflow_id: uuid.UUID | None = None
    ) -> list[UncertainOperation]:
        """Implements ``UncertainStore.list_uncertain_operations`` (documented there)."""
        rows = await self._fetch("workflow_op_list_uncertain", limit, workflow_id)
        return [_uncertain_from_row(r) for r in rows]

    async def get_operation(self, operation_job_id: uuid.UUID) -> UncertainOperation:
        """One operation (any state) in the listing's shape; ``since``/``reason``
        are those of its last uncertain episode (None/"" if it never was).

        Raises:
            NotFoundError: no workflow operation has this id.
        """
        row = await self._fetchrow("uncertain_op_get", operation_job_id)
        if row is None:
            raise NotFoundError(f"operation {operation_job_id} does not exist")
        return _uncertain_from_row(row)

    async def list_unreconciled_operations(
        self, kinds: list[str], limit: int = 100
    ) -> list[UncertainOperation]:
        """Implements ``UncertainStore.list_unreconciled_operations`` (documented there)."""
        rows = await self._fetch("uncertain_list_unreconciled", list(kinds), limit)
        return [_uncertain_from_row(r) for r in rows]

    async def record_reconcile_verdict(
        self, operation_job_id: uuid.UUID, attempt: int, verdict: str
    ) -> bool:
        """Record that the reconcile hook left the operation undecided (``verdict``:
        "unknown ..." or "error ..."), so it waits for a person and the hook is not
        called again for this uncertain attempt.

        Fenced: written only while the operation is still uncertain at
        ``attempt``, and at most once per attempt (a racing second call is a no-op).

        Returns:
            True when this call recorded the verdict.
        """
        async with self.transaction() as conn:
            if (
                await self._fetchrow("uncertain_lock_episode", operation_job_id, attempt, conn=conn)
                is None
            ):
                return False
            row = await self._fetchrow(
                "uncertain_record_verdict",
                operation_job_id,
                attempt,
                clean_text(verdict)[:8192],
                conn=conn,
            )
            return row is not None

    async def record_late_outcome(
        self,
        operation_job_id: uuid.UUID,
        attempt: int,
        event_type: str,
        payload: bytes,
        *,
        why: str,
    ) -> uuid.UUID:
        """Keep a refused late report: an attempt row on the
        operation and a :data:`LATE_OUTCOME_EVENT` ledger event carrying the
        report's payload, in one transaction. Nothing else changes.

        Returns:
            The ledger event id.
        """
        event_id = uuid.uuid4()
        async with self.transaction() as conn:
            op = await self._fetchrow("uncertain_op_get", operation_job_id, conn=conn)
            run_id = "" if op is None else str(op["run_id"])
            text = clean_text(f"{event_type} of attempt {attempt} ({why})")
            if op is not None:
                await self._fetchrow(
                    "uncertain_record_late_outcome", operation_job_id, attempt, text, conn=conn
                )
            await self.publish_tx(  # type: ignore[attr-defined]
                conn,
                PublishParams(
                    id=event_id,
                    type=LATE_OUTCOME_EVENT,
                    payload=payload,
                    aggregate_type="workflow",
                    aggregate_id=run_id,
                    meta={
                        "operation": str(operation_job_id),
                        "attempt": str(attempt),
                        "event_type": event_type,
                        "kind": "" if op is None else op["kind"],
                        "execution_key": "" if op is None else op["task_key"],
                        "why": clean_text(why)[:500],
                    },
                ),
            )
        return event_id

    # --- helpers ------------------------------------------------------------------

    async def _mark(
        self,
        conn: asyncpg.Connection,
        job_id: uuid.UUID,
        lease_token: uuid.UUID,
        reason: str,
        event_type: str,
        payload: bytes,
    ) -> int:
        reason = clean_text(reason)
        op = await self._fetchrow(
            "workflow_op_mark_uncertain", job_id, lease_token, reason, conn=conn
        )
        if op is None:
            raise NotFoundError(
                f"job {job_id} is not an active operation under this lease token (settled, "
                "reaped or re-leased); not marked uncertain"
            )
        return await self._suspend_on(conn, op, reason, event_type, payload)

    async def _suspend_on(
        self,
        conn: asyncpg.Connection,
        op: asyncpg.Record,
        reason: str,
        event_type: str,
        payload: bytes,
    ) -> int:
        """After ``op`` was parked: append its OperationUncertain event and
        suspend a running execution naming it; 0 for a finished execution."""
        job_id = op["id"]
        ex = await self._fetchrow("workflow_lock", op["run_id"], conn=conn)
        if ex is None or ex["state"] not in LIVE_WORKFLOW_STATES:
            return 0
        seq = int(
            await self._fetchval(
                "workflow_history_append", op["run_id"], event_type, payload, conn=conn
            )
        )
        if ex["state"] == WorkflowState.RUNNING:
            why = _uncertain_why(op["kind"], op["task_key"], job_id, reason)
            await self._suspend(conn, op["run_id"], why, seq, job_id)
        return seq

    async def _record_resolution(
        self,
        conn: asyncpg.Connection,
        run_id: uuid.UUID,
        ex: asyncpg.Record,
        resolved_event: tuple[str, bytes],
        outcome_event: tuple[str, bytes] | None,
    ) -> None:
        for event in (resolved_event, outcome_event):
            if event is not None:
                await self._fetchval("workflow_history_append", run_id, *event, conn=conn)
        waiting = await self._fetch("workflow_uncertain_ops", run_id, conn=conn)
        if waiting:  # another operation still waits for a decision: the suspension names it
            nxt = waiting[0]
            why = _uncertain_why(nxt["kind"], nxt["task_key"], nxt["id"], nxt["uncertain_reason"])
            await self._fetchrow(
                "workflow_suspend_retarget", run_id, clean_text(why), nxt["id"], conn=conn
            )
            return
        if ex["state"] == WorkflowState.SUSPENDED:
            await self._fetchrow("workflow_resume", run_id, conn=conn)
        await self._schedule_task(conn, run_id, WORKFLOW_TASK, None)


def _uncertain_why(kind: str, task_key: str, job_id: uuid.UUID, reason: str) -> str:
    """The suspend reason of an execution waiting on an uncertain operation."""
    return f"operation {kind} ({task_key}, job {job_id}) is uncertain: {reason}"


def _check_decision(
    decision: str,
    result: bytes | None,
    error: str | None,
    outcome_event: tuple[str, bytes] | None,
) -> UncertainDecision:
    try:
        dec = UncertainDecision(decision)
    except ValueError:
        raise ValueError(
            f"unknown decision {decision!r}; use one of {[d.value for d in UncertainDecision]}"
        ) from None
    if dec == UncertainDecision.RETRY and outcome_event is not None:
        raise ValueError("a retry decision appends no outcome event; pass outcome_event=None")
    if dec != UncertainDecision.RETRY and outcome_event is None:
        raise ValueError(f"a {dec.value} decision needs its outcome_event (type, payload)")
    if dec == UncertainDecision.COMPLETE and result is None:
        raise ValueError("a complete decision needs the operation's result bytes")
    if dec == UncertainDecision.FAIL and not error:
        raise ValueError("a fail decision needs an error message")
    return dec


def _check_resolvable(job_id: uuid.UUID, op: asyncpg.Record | None) -> asyncpg.Record:
    if op is None:
        raise NotFoundError(f"operation {job_id} does not exist; nothing changed")
    if op["state"] == "uncertain":
        return op
    if op["decision"]:
        raise ConflictError(
            f"operation {job_id} was already resolved '{op['decision']}' by "
            f"{op['decision_by'] or 'an unnamed resolver'} at {op['decided_at']} "
            f"(now {op['state']}); nothing changed"
        )
    raise NotFoundError(f"operation {job_id} is {op['state']}, not uncertain; nothing changed")


def _uncertain_from_row(r: asyncpg.Record) -> UncertainOperation:
    meta = decode_meta(r["meta"])
    kind = r["kind"]
    activity = meta.get("activity") or kind.removeprefix("$op:").split("@", 1)[0]
    return UncertainOperation(
        job_id=r["id"],
        workflow_id=r["run_id"],
        workflow_name=r["workflow_name"],
        kind=kind,
        activity=activity,
        execution_key=r["task_key"],
        input=b"" if r["payload"] is None else bytes(r["payload"]),
        attempt=r["attempt"],
        since=r["uncertain_since"],
        reason=r["uncertain_reason"],
        state=r.get("state") or "uncertain",
        meta=meta,
    )
