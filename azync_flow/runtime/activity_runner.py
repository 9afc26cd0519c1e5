"""Runs leased operation jobs (``$op:<activity>@<version>``): one activity attempt each.

Per attempt::

    result = await activity(*args)                  # sync activities run in a thread
    success  -> store.complete_operation(ActivityCompleted)        (ack + history + wft)
    failure  -> policy.decide(...):
                RETRY          -> store.reschedule(delay)           (backoff, same job)
                DEAD / NON_RETRYABLE -> complete_operation(ActivityFailed, dead=True)

Non-idempotent activities (``idempotent=False``): an attempt that
overruns its ``start_to_close`` is parked as uncertain (like one raising
``Uncertain``), never retried blindly; the operation's reconcile hook (if any)
is asked at once. A report arriving after the attempt was parked (its lease
expired meanwhile) resolves the operation if nobody decided yet
(``accept_late_report``); otherwise it is refused by the fence and kept as a
``late outcome ignored`` ledger event — the recorded outcome never changes.
A report refused only because its own first try committed (the reply was lost
with the connection) is recognised as settled, not late.

Once the call has returned or raised, its report (success, failure or
``Uncertain``) is shielded from the attempt's cancellation (a lost lease, the
worker stopping): it runs to its end, in one place (``_report``), and the
attempt ends cancelled after it.

A result that cannot be encoded (``PayloadEncodeError``, e.g. a lone surrogate)
or is over the size limit fails the step at once as non-retryable, recorded
with a sanitised message, so a bad value never leaves a run stuck.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import uuid
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import msgspec

from azync_flow._decisions import resolution_events
from azync_flow._operations import OperationPayload, decode_operation
from azync_flow._publish import EventStore, publish_once
from azync_flow._text import clean_text
from azync_flow._transient import retry_transient
from azync_flow._workflow.attempt import ActivityInfo, activity_context
from azync_flow._workflow.definitions import Registry
from azync_flow._workflow.transactional import TransactionDefinition
from azync_flow.errors import (
    LeaseLost,
    PayloadCodecError,
    PayloadError,
    TransactionMisuseError,
    Uncertain,
    UnknownWorkflowError,
    error_message,
    is_not_found,
)
from azync_flow.payload_codec import UNDECODABLE_RETRY
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    encode_event,
)
from azync_flow.retry import RetryDecision, describe_error
from azync_flow.runtime.transactional_step import run_transactional
from azync_flow.runtime.uncertain import Reconciler, uncertain_event
from azync_flow.store.queue import Job, JobSettler, JobState
from azync_flow.store.workflows import (
    OperationSettle,
    OperationStore,
    TransactionalOperationStore,
)
from azync_flow.telemetry import AttemptKind, AttemptOutcome, AttemptSpan, RunEvent, RunTracer
from azync_flow.worker import lease_gone

if TYPE_CHECKING:
    from azync_flow.runtime.folded_completion import CompletionFolder

__all__ = ["ActivityRunner", "log_suspended"]

log = logging.getLogger("azync_flow.activity")
T = TypeVar("T")
WORKER = f"{socket.gethostname()}:{os.getpid()}"


class _LeasedAttempt(ActivityInfo):
    """``current_activity()`` of an attempt this runner runs on a leased job."""

    def __init__(
        self, job: Job, op: OperationPayload, lease: Any, store: ActivityStore, token: uuid.UUID
    ) -> None:
        super().__init__(job, op.seq, op.activity)
        self._lease = lease
        self._store = store
        self._token = token
        self._heartbeat_timeout = op.heartbeat_timeout
        self._extend_by = op.heartbeat_timeout or op.start_to_close or timedelta(seconds=30)
        self._published = 0

    async def publish(
        self,
        event_type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        meta: dict[str, str] | None = None,
    ) -> uuid.UUID:
        self._published += 1
        return await publish_once(
            self._store, self.job.id, self._published, event_type, payload, key=key, meta=meta
        )

    async def heartbeat(self) -> None:
        if self._lease is not None:
            # the activity's own heartbeat timeout, else the loop's lease
            await self._lease.extend(self._heartbeat_timeout)
        else:
            await self._store.extend_lease(self.job.id, self._token, self._extend_by)


def _cancel_reason(op: OperationPayload, lease: Any) -> str:
    if op.heartbeat_timeout is not None and _lease_lost(lease):
        return (
            f"no heartbeat within heartbeat_timeout={op.heartbeat_timeout.total_seconds():g}s; "
            "the attempt was presumed lost mid-call"
        )
    return "the attempt was cancelled mid-call (worker shutdown or lost lease)"


def _lease_lost(lease: Any) -> bool:
    """True when the worker's lease handle says the job was taken from this attempt."""
    return bool(getattr(lease, "lost", False))


def log_suspended(job: Job, reason: str) -> None:
    """Log (WARNING) that ``job``'s execution is suspended on it, and why."""
    log.warning(
        "workflow %s suspended: operation %s (%s, attempt %d) is uncertain: %s; it waits "
        "for its reconcile hook or an operator (azync-flow uncertain list|resolve)",
        job.run_id,
        job.id,
        job.kind,
        job.attempt,
        reason,
    )


@runtime_checkable
class ActivityStore(OperationStore, TransactionalOperationStore, JobSettler, EventStore, Protocol):
    """The roles an activity attempt uses: settle its operation (in the step's
    own transaction for a ``@transaction`` step), renew its lease, and publish
    events (``current_activity().publish``)."""


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
        store: ActivityStore,
        registry: Registry,
        *,
        max_payload_bytes: int | None = None,
        reconciler: Reconciler | None = None,
        tracer: RunTracer | None = None,
    ) -> None:
        self.store = store
        self._undecodable_warned: set[str] = set()
        self.tracer = tracer or RunTracer()
        self.registry = registry
        self.max_payload_bytes = max_payload_bytes
        #: Reconcile hooks (inline after parking; the leader's maintenance runs
        #: ``reconciler.run_once``). None: park only, never call hooks.
        self.reconciler: Reconciler | None = reconciler or Reconciler(
            store,  # type: ignore[arg-type]
            registry,
            tracer=self.tracer,
        )
        self.attempts = 0
        #: Reports dropped because another attempt or a decision owned the operation.
        self.late_ignored = 0
        #: Fault-injection point for tests: called with (job, event type) right
        #: after an operation's outcome was committed.
        self.after_settle: Callable[[Job, str], Any] | None = None
        #: Fault-injection point for tests: called with (job, event type) once the
        #: attempt has ended, before its outcome is committed (may be async).
        self.before_settle: Callable[[Job, str], Any] | None = None
        #: Fault-injection point for tests: called with (job, report) at the start
        #: of each report of an attempt (``succeeded``, ``failed``, ``uncertain``),
        #: inside its shield (may be async).
        self.before_report: Callable[[Job, str], Any] | None = None
        #: Records an outcome together with the next pass of its execution when
        #: this worker caches it (None: always alone, ``complete_operation``).
        self.folder: CompletionFolder | None = None

    async def run(self, job: Job, lease: Any) -> None:
        """``JobRunner`` signature for ``Worker.add_loop``."""
        await self.run_operation(job, lease.token, lease)

    async def run_operation(self, job: Job, token: uuid.UUID, lease: Any = None) -> None:
        """Run one attempt of a leased operation job and settle it.

        The attempt is one ``activity <name>`` span (child of the run span,
        from the trace context in the job's meta) with its outcome:
        succeeded, retried (with the delay), dead or uncertain. The activity
        runs inside it, so its own spans nest under the attempt. An attempt
        whose lease was lost and whose outcome the store refused exports no
        span: the reaper closes it (ERROR ``lease expired``).
        """
        assert job.run_id is not None
        assert job.payload is not None
        op = decode_operation(job.payload)
        self.attempts += 1
        unsettled, cancelled = True, False
        try:
            async with self.tracer.attempt_span(
                AttemptKind.ACTIVITY,
                op.activity,
                carrier=job.meta,
                run_id=job.run_id,
                attempt=job.attempt,
                workflow_name=job.meta.get("workflow_name"),
                seq=op.seq,
            ) as span:
                try:
                    await self._attempt(job, token, op, lease, span)
                except asyncio.CancelledError:
                    cancelled = True
                    raise
                finally:
                    unsettled = span.outcome is None
                    # Taken over (lease lost or lapsed) with no outcome of ours accepted:
                    # the reaper records this attempt; a second span would show it
                    # twice, or end after the run span once the worker was frozen.
                    if unsettled and lease_gone(lease):
                        span.abandon()
        finally:
            if self.folder is not None:
                await self.folder.attempt_ended(job.id)  # a run span waits for this one
            # (a job leased in a pass's commit does not say whether it is limited)
            if unsettled and (not cancelled or self._stops_when_cancelled(job)):
                await self._release_stopped(job, token)

    def _stops_when_cancelled(self, job: Job) -> bool:
        """Whether a cancelled attempt of ``job`` has stopped once its task
        ended: an async activity has; a sync one's thread runs on (its slots
        wait for the lease's end)."""
        try:
            defn = self.registry.activity(job.kind)
        except UnknownWorkflowError:
            return True  # it never ran
        return bool(getattr(defn, "is_async", False))

    async def _release_stopped(self, job: Job, token: uuid.UUID) -> None:
        """This attempt stopped without its outcome accepted (report refused,
        cancelled after its lease was found gone): free the limit slots it
        still holds now rather than at its lease's end (fenced by the store:
        nothing while the job still runs under ``token``)."""
        try:
            freed = await self.store.release_stopped_attempt(job.id, token)
        except Exception as err:  # the slots free at the lease's end anyway
            log.warning("could not free the limit slots of stopped attempt %s: %r", job.id, err)
            return
        if freed:
            log.info("attempt %d of %s stopped: %d limit slot(s) freed", job.attempt, job.id, freed)

    async def _attempt(
        self, job: Job, token: uuid.UUID, op: OperationPayload, lease: Any, span: AttemptSpan
    ) -> None:
        try:
            defn = self.registry.activity(job.kind)
        except UnknownWorkflowError as err:
            # Not registered on this worker (a loop only leases registered kinds,
            # so this is a version skew): leave it, attempt given back, for a
            # worker that has it.
            span.record_failure(err)
            await self.store.release_blocked(
                job.id, token, f"a worker leased it without registering it: {describe_error(err)}"
            )
            span.set_outcome(AttemptOutcome.RELEASED)
            return
        info = _LeasedAttempt(job, op, lease, self.store, token)
        if not await self._require_heartbeats(job, token, op, lease):
            return
        if isinstance(defn, TransactionDefinition):
            await run_transactional(
                self, job, token, op, defn, lease, span, info, self._report_failure
            )
            return
        limit = op.start_to_close.total_seconds() if op.start_to_close is not None else None
        timer = asyncio.timeout(limit)
        with activity_context(info):
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
                    if timer.expired():
                        overrun = TimeoutError(
                            f"activity {op.activity} exceeded start_to_close={limit:g}s "
                            f"(attempt {job.attempt})"
                        )
                        overrun.azync_timeout = "start_to_close"  # type: ignore[attr-defined]
                        raise overrun from None
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
                if not op.idempotent and await self._park_cancelled(
                    job, token, _cancel_reason(op, lease)
                ):
                    span.set_outcome(AttemptOutcome.UNCERTAIN)
                raise
            except Uncertain as exc:
                span.record_failure(exc)
                if await self._report(job, "uncertain", self._mark_uncertain(job, token, exc)):
                    span.set_outcome(AttemptOutcome.UNCERTAIN)
                    await self._reconcile_inline(job)
                return
            except Exception as exc:
                span.record_failure(exc)
                await self._report_failure(job, token, op, exc, span, lease)
                return
        event = ActivityCompleted(
            scheduled_seq=op.seq, result=msgspec.Raw(result), attempts=job.attempt
        )
        settle = self._settle(job, token, *encode_event(event), op=op, result=result, lease=lease)
        if await self._report(job, "succeeded", settle):
            span.set_outcome(AttemptOutcome.SUCCEEDED)

    async def _report(self, job: Job, report: str, write: Coroutine[Any, Any, T]) -> T:
        """Run one report of an ended attempt (``write``: its success, failure
        or Uncertain) to its end, even when the attempt is cancelled meanwhile.

        The attempt's outcome is real once the call returned or raised, so a
        cancellation arriving now (its lease was lost, the worker stops) must
        not cut the report off: the report goes on (landing as a late report
        if the lease is gone) and the attempt ends, cancelled, once it is done.
        A second cancellation while it finishes gives up on it.

        Returns:
            What ``write`` returns.

        Raises:
            CancelledError: the attempt was cancelled (after the report ended).
        """
        task = asyncio.ensure_future(self._reporting(job, report, write))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            try:
                await task
            except Exception:
                log.exception("%s report of operation %s failed", report, job.id)
            raise

    async def _reporting(self, job: Job, report: str, write: Coroutine[Any, Any, T]) -> T:
        if self.before_report is not None:
            hooked = self.before_report(job, report)
            if inspect.isawaitable(hooked):
                await hooked
        return await write

    async def _report_failure(
        self,
        job: Job,
        token: uuid.UUID,
        op: OperationPayload,
        exc: Exception,
        span: AttemptSpan,
        lease: Any = None,
    ) -> None:
        """Report a failed attempt (retry, dead or left for another worker), shielded."""
        await self._report(job, "failed", self._failed(job, token, op, exc, span, lease))

    async def _leave_undecodable(
        self,
        job: Job,
        token: uuid.UUID,
        op: OperationPayload,
        exc: PayloadCodecError,
        span: AttemptSpan,
    ) -> None:
        """Leave an attempt whose payload this worker cannot decode (a codec or
        key it lacks) for a worker that can: the attempt given back, the reason
        kept, leased again after ``UNDECODABLE_RETRY``; one WARNING per activity."""
        why = f"a worker ({WORKER}) cannot decode its payload: {describe_error(exc)}"
        span.record_failure(exc)
        try:
            await self.store.release_blocked(job.id, token, why, UNDECODABLE_RETRY)
        except Exception as lost:  # settled meanwhile (e.g. terminate)
            if not is_not_found(lost):
                raise
        span.set_outcome(AttemptOutcome.RELEASED)
        if op.activity not in self._undecodable_warned:
            self._undecodable_warned.add(op.activity)
            log.warning(
                "activity %s: this worker cannot decode its payload (%s); it leaves such "
                "attempts for a worker that has the codec and key (docs/codecs.md)",
                op.activity,
                describe_error(exc),
            )

    async def _failed(
        self,
        job: Job,
        token: uuid.UUID,
        op: OperationPayload,
        exc: Exception,
        span: AttemptSpan,
        lease: Any = None,
    ) -> None:
        if isinstance(exc, PayloadCodecError):
            await self._leave_undecodable(job, token, op, exc, span)
            return
        retry = op.retry
        if isinstance(exc, PayloadError | TransactionMisuseError):
            decision = RetryDecision.NON_RETRYABLE
        else:
            decision = retry.decide(exc, job.attempt, job.max_attempts)
        description = describe_error(exc)
        if decision is RetryDecision.RETRY:
            try:
                delay = retry.delay(job.attempt)
                log.info(
                    "activity %s of workflow %s: attempt %d failed, retrying in %.2fs: %s",
                    op.activity,
                    job.run_id,
                    job.attempt,
                    delay.total_seconds(),
                    description,
                )
                await retry_transient(
                    lambda: self.store.reschedule(job.id, token, delay, description)
                )
            except Exception as err:
                if not is_not_found(err):
                    raise
                if await self._settled_by_this_attempt(job, token, JobState.SCHEDULED, description):
                    span.set_outcome(AttemptOutcome.RETRIED, retry_delay=delay)
                    return
                if not op.idempotent:  # parked meanwhile: keep the report, decide nothing
                    event = ActivityFailed(
                        scheduled_seq=op.seq,
                        error_type=type(exc).__name__,
                        message=clean_text(error_message(exc))[:8192],
                        attempts=job.attempt,
                    )
                    await self._late_ignored(
                        job, op, *encode_event(event), why="retryable failure reported late"
                    )
                return
            span.set_outcome(AttemptOutcome.RETRIED, retry_delay=delay)
            return
        event = ActivityFailed(
            scheduled_seq=op.seq,
            error_type=type(exc).__name__,
            message=clean_text(error_message(exc))[:8192],
            attempts=job.attempt,
            timeout=getattr(exc, "azync_timeout", ""),
        )
        if await self._settle(
            job,
            token,
            *encode_event(event),
            dead=True,
            last_error=description,
            op=op,
            lease=lease,
        ):
            span.set_outcome(AttemptOutcome.DEAD)

    async def _require_heartbeats(
        self, job: Job, token: uuid.UUID, op: OperationPayload, lease: Any
    ) -> bool:
        """Enforce ``heartbeat_timeout``: the one place an attempt's lease becomes
        heartbeat-only. Returns False when the lease is already gone.

        With a worker lease handle, background renewal stops covering the
        attempt (``LeaseHandle.renew_only_by_heartbeats``); a caller without
        one (``lease`` None) renews nothing in the background, so shortening
        the lease to the timeout is all it takes. Either way an attempt silent
        for longer than the timeout loses its lease to the reaper.
        """
        timeout = op.heartbeat_timeout
        if timeout is None:
            return True
        try:
            if lease is not None:
                await lease.renew_only_by_heartbeats(timeout)
            else:
                await self.store.extend_lease(job.id, token, timeout)
        except Exception as err:
            if isinstance(err, LeaseLost) or is_not_found(err):
                return False
            raise
        return True

    async def _park_cancelled(self, job: Job, token: uuid.UUID, reason: str) -> bool:
        """Park a cut-off non-idempotent attempt; False when its lease was already gone."""
        try:
            event_type, payload = uncertain_event(job, reason)
            await self.store.mark_uncertain(
                job.id, token, reason, event_type=event_type, payload=payload
            )
        except Exception as err:  # lease already gone: the reaper decides
            log.info("could not park cancelled operation %s: %s", job.id, err)
            return False
        log_suspended(job, reason)
        return True

    async def _mark_uncertain(self, job: Job, token: uuid.UUID, exc: Uncertain) -> bool:
        """Park the operation as uncertain (suspends the execution), never retry it.
        Returns False when the lease was lost."""
        reason = describe_error(exc)
        try:
            event_type, payload = uncertain_event(job, reason)
            await self.store.mark_uncertain(
                job.id, token, reason, event_type=event_type, payload=payload
            )
        except Exception as err:
            if not is_not_found(err):
                raise
            return False
        log_suspended(job, reason)
        return True

    async def _reconcile_inline(self, job: Job) -> None:
        """Ask the reconcile hook of a just-parked operation, if it has one (the
        leader's maintenance asks again when this fails)."""
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
        lease: Any = None,
    ) -> bool:
        """Record the attempt's outcome. Returns False when the report came too late.

        A late report is never applied twice: when the attempt
        was parked uncertain (its worker was presumed dead) and no decision was
        made yet, the attempt's real outcome resolves it, atomically
        (``store.accept_late_report``); when the operation was re-leased, reaped
        or already resolved, the report is dropped and logged as "late outcome
        ignored" (``late_ignored`` counts them) and, for a non-idempotent
        operation, kept as a ledger event for a person (``record_late_outcome``).
        """
        run_id = job.run_id
        assert run_id is not None
        if self.before_settle is not None:
            hooked = self.before_settle(job, event_type)
            if inspect.isawaitable(hooked):
                await hooked
        folded = False
        if self.folder is not None:
            settle = OperationSettle(
                job_id=job.id,
                lease_token=token,
                event_type=event_type,
                payload=payload,
                dead=dead,
                last_error=last_error,
            )
            folded = await self.folder.settle(job, settle, lease)
        try:
            if not folded:
                await retry_transient(
                    lambda: self.store.complete_operation(
                        job.id,
                        token,
                        run_id,
                        event_type,
                        payload,
                        dead=dead,
                        last_error=last_error,
                    )
                )
        except Exception as err:
            if not is_not_found(err):
                raise
            want = JobState.DEAD if dead else JobState.SUCCEEDED
            if await self._settled_by_this_attempt(job, token, want, last_error):
                return True
            return await self._late_report(
                job, token, op, event_type, payload, dead, last_error, result
            )
        if self.after_settle is not None:
            self.after_settle(job, event_type)
        return True

    async def _settled_by_this_attempt(
        self, job: Job, token: uuid.UUID, state: JobState, last_error: str
    ) -> bool:
        """True when a refused report had in fact committed: the connection
        dropped after its COMMIT, before the reply, and the repeat met the fence.

        The operation still carries this attempt's lease token and sits in the
        state the report leads to (with its error, for a failure), which no
        other attempt or decision leaves behind: a new lease changes the token,
        a decision clears it, the reaper parks a lost attempt as uncertain and
        dead-letters one with its own "lease expired" error.
        """
        found = await retry_transient(lambda: self.store.attempt_settlement(job.id, token))
        if found is None:
            return False
        got_state, got_error = found
        if got_state is not state:
            return False
        if state is not JobState.SUCCEEDED and got_error != clean_text(last_error):
            return False
        log.info(
            "attempt %d of operation %s: the reply to its report was lost after the "
            "commit; its outcome (%s) is recorded",
            job.attempt,
            job.id,
            state,
        )
        return True

    async def _late_report(
        self,
        job: Job,
        token: uuid.UUID,
        op: OperationPayload | None,
        event_type: str,
        payload: bytes,
        dead: bool,
        last_error: str,
        result: bytes | None,
    ) -> bool:
        if op is None:
            op = decode_operation(job.payload or b"{}")
        resolved, _ = resolution_events(
            op.seq,
            "fail" if dead else "complete",
            result=b"null" if dead else (result if result is not None else b"null"),
            error=last_error,
            decided_by=f"late report of attempt {job.attempt}",
            note="the attempt reported after its lease had expired",
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
                    result=None if dead else result,
                )
            )
        except Exception as err:
            if not is_not_found(err):
                raise
            await self._late_ignored(job, op, event_type, payload, why=str(err))
            return False
        self.tracer.run_event(
            job.meta,
            RunEvent.UNCERTAIN_RESOLVED,
            run_id=job.run_id or job.id,
            subject=op.activity,
            attributes={"azync.resolution": "fail" if dead else "complete", "azync.seq": op.seq},
        )
        log.warning(
            "late report of attempt %d resolved uncertain operation %s (%s) as %s",
            job.attempt,
            job.id,
            op.activity,
            "failed" if dead else "completed",
        )
        if self.after_settle is not None:
            self.after_settle(job, event_type)
        return True

    async def _late_ignored(
        self, job: Job, op: OperationPayload, event_type: str, payload: bytes, *, why: str
    ) -> None:
        """Drop a report another attempt or a decision owns; a non-idempotent
        operation's report is kept as a ``late_outcome_ignored`` ledger event."""
        self.late_ignored += 1
        log.warning(
            "late outcome ignored: attempt %d of operation %s (%s) reported %s after "
            "its lease was lost; another attempt or a decision owns it (%s)",
            job.attempt,
            job.id,
            op.activity,
            event_type,
            why,
        )
        if not op.idempotent:
            await retry_transient(
                lambda: self.store.record_late_outcome(
                    job.id, job.attempt, event_type, payload, why=why
                )
            )
