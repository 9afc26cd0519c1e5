"""``reset_workflow``: a new run of an execution from a point of its history.

The plan (which seq to keep, which activities and timers the kept history
leaves open) is made by the caller from the history it read
(``azync_flow.replay.reset``); this verb carries it out in one transaction,
fenced by the history's next seq so a plan made from a history that moved on
writes nothing.
"""

from __future__ import annotations

__all__ = ["WorkflowResetMixin"]

import asyncio
import uuid
from collections.abc import Sequence

import asyncpg

from ...._text import clean_text
from ....errors import ConflictError, NotFoundError
from ...validate import check_text
from ...workflows import ResetResult, WorkflowState
from .core import WorkflowCoreMixin

#: Lock attempts before giving up (backoff 2 ms doubling to 100 ms: about 5 s).
_LOCK_ATTEMPTS = 55


class WorkflowResetMixin(WorkflowCoreMixin):
    async def reset_workflow(
        self,
        id: uuid.UUID,
        *,
        expected_next_seq: int,
        keep: int,
        new_run_id: uuid.UUID,
        reason: str,
        rerun_seqs: Sequence[int] = (),
        open_timer_seqs: Sequence[int] = (),
    ) -> ResetResult:
        """Implements ``WorkflowAdmin.reset_workflow`` (documented there)."""
        check_text(reason, "reset reason")
        reason = clean_text(reason)
        if not 0 <= keep < expected_next_seq:
            raise ValueError(
                f"keep must be within 0..{expected_next_seq - 1} (the history's last seq), "
                f"got {keep}"
            )
        keys = [f"{id}/{seq}" for seq in rerun_seqs]
        pause = 0.002
        for _ in range(_LOCK_ATTEMPTS):
            try:
                return await self._reset_once(
                    id, expected_next_seq, keep, new_run_id, reason, keys, list(open_timer_seqs)
                )
            except asyncpg.LockNotAvailableError:
                # a job of the run is held by a pass or an activity settling
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.1)
        raise ConflictError(
            f"workflow execution {id}: its jobs stayed locked by other transactions "
            f"through {_LOCK_ATTEMPTS} attempts; not reset, retry"
        )

    async def _reset_once(
        self,
        id: uuid.UUID,
        expected: int,
        keep: int,
        new_run_id: uuid.UUID,
        reason: str,
        keys: list[str],
        timers: list[int],
    ) -> ResetResult:
        try:
            async with self.transaction() as conn:
                row = await self._fetchrow("workflow_lock", id, conn=conn)
                if row is None:
                    raise NotFoundError(f"workflow execution {id} does not exist; cannot reset")
                previous = WorkflowState(row["state"])
                await self._fetch("workflow_terminate_lock_jobs", id, conn=conn)
                done = await self._fetchrow(
                    "workflow_reset",
                    self.channel,
                    id,
                    expected,
                    keep,
                    new_run_id,
                    reason,
                    keys,
                    timers,
                    conn=conn,
                )
                assert done is not None, "locked execution was not found by the reset"
                if not done["ok"]:
                    raise ConflictError(
                        f"workflow execution {id}: its history moved on (next seq "
                        f"{done['next_seq']}, planned from {expected}); not reset, plan again"
                    )
        except asyncpg.UniqueViolationError:
            raise ConflictError(
                f"workflow execution {id}: another live execution holds its idempotency "
                "key; not reset"
            ) from None
        return ResetResult(
            run_no=int(done["run_no"]),
            run_id=new_run_id,
            kept=keep,
            previous_state=previous,
            rerun_activities=int(done["rerun"]),
            redelivered_signals=int(done["redelivered"]),
        )
