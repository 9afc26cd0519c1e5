"""Runs leased operation jobs (``$op:<activity>@<version>``): one activity attempt each.

Per attempt::

    result = await activity(*args)                  # sync activities run in a thread
    success  -> store.complete_operation(ActivityCompleted)        (ack + history + wft)
    failure  -> policy.decide(...):
                RETRY          -> store.reschedule(delay)           (backoff, same job)
                DEAD / NON_RETRYABLE -> complete_operation(ActivityFailed, dead=True)

Non-idempotent activities (``idempotent=False``, issue 5): an attempt that
overruns its ``start_to_close`` is parked as uncertain (like one raising
``Uncertain``), never retried blindly; the operation's reconcile hook (if any)
is asked at once. A report arriving after the attempt was parked (its lease
expired meanwhile, scenario C20) resolves the operation if nobody decided yet
(``accept_late_report``); otherwise it is refused by the fence and kept as a
``late outcome ignored`` ledger event — the recorded outcome never changes.

A result that cannot be encoded (``PayloadEncodeError``, e.g. a lone surrogate)
or is over the size limit fails the step at once as non-retryable, recorded
with a sanitised message, so a bad value never leaves a run stuck (C26, C27).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

import msgspec

from azync_flow.errors import PayloadError, Uncertain, UnknownWorkflowError
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    OperationResolved,
    encode_event,
)
from azync_flow.replay.outcome import sanitize_text
from azync_flow.retry import RetryDecision, describe_error
from azync_flow.runtime._operations import OperationPayload, decode_operation
from azync_flow.runtime._transient import retry_transient
from azync_flow.runtime.uncertain import Reconciler, uncertain_event
from azync_flow.store.errors import is_not_found
from azync_flow.store.types import Job
from azync_flow.workflow import Registry

__all__ = ["ActivityInfo", "ActivityRunner", "current_activity"]

log = logging.getLogger("azync_flow.activity")

_current: contextvars.ContextVar[ActivityInfo | None] = contextvars.ContextVar(
    "azync_activity", default=None
)


class ActivityInfo:
    """What a running activity can learn about its attempt (``current_activity()``)."""

    def __init__(
        self, job: Job, op: OperationPayload, lease: Any, store: Any, token: uuid.UUID
    ) -> None:
        self.job = job
        self.workflow_id = job.run_id
        self.seq = op.seq
        self.attempt = job.attempt
        self.activity = op.activity
        self._lease = lease
        self._store = store
        self._token = token
        self._extend_by = op.heartbeat_timeout or op.start_to_close or timedelta(seconds=30)

    async def heartbeat(self) -> None:
        """Extend this attempt's lease (long activities call it periodically).

        Raises:
            NotFoundError / LeaseLost: the attempt no longer owns the job; stop.
        """
        if self._lease is not None:
            await self._lease.extend()
        else:
            await self._store.extend_lease(self.job.id, self._token, self._extend_by)


def current_activity() -> ActivityInfo | None:
    """The attempt running in this context, or None outside activities."""
    return _current.get()


class OperationStore(Protocol):
    async def complete_operation(self, *args: Any, **kwargs: Any) -> int: ...
    async def mark_uncertain(self, *args: Any, **kwargs: Any) -> int: ...
    async def accept_late_report(self, *args: Any, **kwargs: Any) -> Any: ...
    async def record_late_outcome(self, *args: Any, **kwargs: Any) -> Any: ...
    async def extend_lease(
        self, id: uuid.UUID, lease_token: uuid.UUID, lease: timedelta
    ) -> None: ...
    async def reschedule(
        self, id: uuid.UUID, lease_token: uuid.UUID, delay: timedelta, last_error: str
    ) -> None: ...


class ActivityRunner:
    """Executes operation jobs for the activities of ``registry``.

    Args:
        store: the store.
        registry: activity definitions (looked up by job kind).
        max_payload_bytes: results larger than this fail the step (non-retryable).
        reconciler: asks reconcile hooks of operations this runner parks
            (default: one over ``registry``).
    """

    def __init__(
        self,
        store: OperationStore,
        registry: Registry,
        *,
        max_payload_bytes: int | None = None,
        reconciler: Reconciler | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.max_payload_bytes = max_payload_bytes
        self.reconciler = reconciler or Reconciler(store, registry)  # type: ignore[arg-type]
        self.attempts = 0
        #: Fault-injection point for tests: called with (job, event type) right
        #: after an operation's outcome was committed.
        self.after_settle: Callable[[Job, str], Any] | None = None

    async def run(self, job: Job, lease: Any) -> None:
        """``JobRunner`` signature for ``Worker.add_loop``."""
        await self.run_operation(job, lease.token, lease)

    async def run_operation(self, job: Job, token: uuid.UUID, lease: Any = None) -> None:
        """Run one attempt of a leased operation job and settle it."""
        assert job.run_id is not None
        assert job.payload is not None
        op = decode_operation(job.payload)
        self.attempts += 1
        try:
            defn = self.registry.activity(job.kind)
        except UnknownWorkflowError as err:
            await self.store.reschedule(job.id, token, timedelta(seconds=5), describe_error(err))
            return
        info = ActivityInfo(job, op, lease, self.store, token)
        reset = _current.set(info)
        limit = op.start_to_close.total_seconds() if op.start_to_close is not None else None
        timer = asyncio.timeout(limit)
        try:
            try:
                async with timer:
                    result = await defn.run(bytes(op.input))
            except TimeoutError:
                if timer.expired() and not op.idempotent:
                    raise Uncertain(
                        f"start_to_close of {limit}s elapsed mid-call; "
                        "the call may or may not have taken effect"
                    ) from None
                raise
            if self.max_payload_bytes is not None and len(result) > self.max_payload_bytes:
                raise PayloadError(
                    f"result of activity {op.activity!r} is {len(result)} bytes, "
                    f"over the limit of {self.max_payload_bytes}"
                )
        except asyncio.CancelledError:
            # lease lost or shutdown: do not settle. A non-idempotent call cut off
            # mid-flight may have taken effect: park it instead of letting the
            # worker release it for a blind re-run.
            if not op.idempotent:
                await self._park_cancelled(job, token)
            raise
        except Uncertain as exc:
            await self._uncertain(job, token, exc)
            return
        except Exception as exc:
            await self._failed(job, token, op, exc)
            return
        finally:
            _current.reset(reset)
        event = ActivityCompleted(
            scheduled_seq=op.seq, result=msgspec.Raw(result), attempts=job.attempt
        )
        await self._settle(job, token, *encode_event(event), op=op, result=result)

    async def _failed(
        self, job: Job, token: uuid.UUID, op: OperationPayload, exc: Exception
    ) -> None:
        retry = op.retry
        if isinstance(exc, PayloadError):
            decision = RetryDecision.NON_RETRYABLE
        else:
            decision = retry.decide(exc, job.attempt, job.max_attempts)
        description = describe_error(exc)
        if decision is RetryDecision.RETRY:
            try:
                delay = retry.delay(job.attempt)
                await retry_transient(
                    lambda: self.store.reschedule(job.id, token, delay, description)
                )
            except Exception as err:
                if not is_not_found(err):
                    raise
                if not op.idempotent:  # parked meanwhile: keep the report, decide nothing
                    event = ActivityFailed(
                        scheduled_seq=op.seq,
                        error_type=type(exc).__name__,
                        message=sanitize_text(str(exc))[:8192],
                        attempts=job.attempt,
                    )
                    await self._late_ignored(
                        job, *encode_event(event), why="retryable failure reported late"
                    )
            return
        event = ActivityFailed(
            scheduled_seq=op.seq,
            error_type=type(exc).__name__,
            message=sanitize_text(str(exc))[:8192],
            attempts=job.attempt,
        )
        await self._settle(
            job, token, *encode_event(event), dead=True, last_error=description, op=op
        )

    async def _park_cancelled(self, job: Job, token: uuid.UUID) -> None:
        reason = "the attempt was cancelled mid-call (worker shutdown or lost lease)"
        try:
            event_type, payload = uncertain_event(job, reason)
            await self.store.mark_uncertain(
                job.id, token, reason, event_type=event_type, payload=payload
            )
        except Exception as err:  # lease already gone: the reaper decides
            log.info("could not park cancelled operation %s: %s", job.id, err)

    async def _uncertain(self, job: Job, token: uuid.UUID, exc: Uncertain) -> None:
        """Park the operation as uncertain (suspends the execution), never retry it;
        then ask its reconcile hook, if it has one."""
        reason = describe_error(exc)
        try:
            event_type, payload = uncertain_event(job, reason)
            await self.store.mark_uncertain(
                job.id, token, reason, event_type=event_type, payload=payload
            )
        except Exception as err:
            if not is_not_found(err):
                raise
            return
        if self.reconciler is not None and job.kind in self.reconciler.kinds():
            try:
                await self.reconciler.reconcile_id(job.id)
            except Exception:  # the leader's maintenance retries the hook later
                log.exception("inline reconcile of operation %s failed", job.id)

    async def _settle(
        self,
        job: Job,
        token: uuid.UUID,
        event_type: str,
        payload: bytes,
        *,
        dead: bool = False,
        last_error: str = "",
        op: OperationPayload | None = None,
        result: bytes | None = None,
    ) -> None:
        try:
            await retry_transient(
                lambda: self.store.complete_operation(
                    job.id, token, job.run_id, event_type, payload, dead=dead, last_error=last_error
                )
            )
        except Exception as err:
            if not is_not_found(err):
                raise
            if op is None or op.idempotent:  # stale report: another attempt owns the job now
                log.warning("stale completion of operation %s dropped: %s", job.id, err)
                return
            await self._late_report(job, token, op, event_type, payload, dead, last_error, result)
            return
        if self.after_settle is not None:
            self.after_settle(job, event_type)

    async def _late_report(
        self,
        job: Job,
        token: uuid.UUID,
        op: OperationPayload,
        event_type: str,
        payload: bytes,
        dead: bool,
        last_error: str,
        result: bytes | None,
    ) -> None:
        """A non-idempotent attempt reports after losing its lease (C20).

        Still uncertain under this attempt's token (nobody decided yet): the
        report IS the answer — resolve with it, atomically. Otherwise the fence
        refuses it and it is kept as a ledger event for a person to reconcile.
        """
        resolved = encode_event(
            OperationResolved(
                scheduled_seq=op.seq,
                decision="fail" if dead else "complete",
                decided_by=f"late report of attempt {job.attempt}",
                note="the attempt reported after its lease had expired",
            )
        )
        try:
            await retry_transient(
                lambda: self.store.accept_late_report(
                    job.id,
                    token,
                    event_type,
                    payload,
                    resolved_event=resolved,
                    dead=dead,
                    last_error=last_error,
                    result=result,
                )
            )
        except Exception as err:
            if not is_not_found(err):
                raise
            await self._late_ignored(job, event_type, payload, why=str(err))
            return
        log.warning("late report of operation %s accepted (nobody had decided)", job.id)
        if self.after_settle is not None:
            self.after_settle(job, event_type)

    async def _late_ignored(self, job: Job, event_type: str, payload: bytes, *, why: str) -> None:
        log.warning("late outcome of operation %s ignored: %s", job.id, why)
        await retry_transient(
            lambda: self.store.record_late_outcome(
                job.id, job.attempt, event_type, payload, why=why
            )
        )
