"""One attempt of a transactional step (``@transaction``): the step's SQL and
its recorded outcome in ONE transaction of the store's connection.

Per attempt::

    async with store.operation_transaction(job, token, run) as tx:  # BEGIN + lease lock
        result = await step(tx.connection, *args)                   # the user's SQL
        folder.settle_in(tx, ...)  or  tx.complete(...)             # outcome + COMMIT

The commit is the one a plain activity's report makes (folded with the next
pass when this worker caches the execution), so a transactional step costs no
extra commit. A serialization failure or deadlock anywhere in the transaction
(the COMMIT included) runs the whole step again at once, without spending an
attempt; any other exception leaves the block (rolled back) and follows the
retry policy. A crash before the COMMIT loses the connection and with it the
step's writes; the lease expires and the step runs again.

The step may not end the transaction or close the connection itself: its
``close()``/``terminate()`` raise :class:`~azync_flow.errors.TransactionMisuseError`
where they are called, and a transaction found ended (``COMMIT`` or
``ROLLBACK``) when the step returns or raises fails the attempt with that
error, for good, before anything is recorded on the connection.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from azync_flow._operations import OperationPayload
from azync_flow._transient import MAX_CONFLICT_RERUNS, is_transient, retry_transient
from azync_flow._workflow.attempt import ActivityInfo, activity_context
from azync_flow._workflow.transactional import TransactionDefinition
from azync_flow.errors import (
    PayloadError,
    StoreUnavailableError,
    TransactionMisuseError,
    is_not_found,
)
from azync_flow.replay.events import ActivityCompleted, encode_event
from azync_flow.store.queue import Job, JobState
from azync_flow.store.workflows import (
    OperationSettle,
    OperationStore,
    OperationTransaction,
    TransactionalOperationStore,
)
from azync_flow.telemetry import AttemptOutcome, AttemptSpan

if TYPE_CHECKING:
    from azync_flow.runtime.folded_completion import CompletionFolder

__all__ = ["StepRunner", "run_transactional"]

log = logging.getLogger("azync_flow.activity")


class _StepStore(OperationStore, TransactionalOperationStore, Protocol):
    """The store roles a transactional attempt uses."""


class StepRunner(Protocol):
    """What a transactional attempt uses of its activity runner."""

    @property
    def store(self) -> _StepStore: ...

    @property
    def folder(self) -> CompletionFolder | None: ...

    @property
    def max_payload_bytes(self) -> int | None: ...

    @property
    def before_settle(self) -> Callable[[Job, str], Any] | None: ...

    @property
    def after_settle(self) -> Callable[[Job, str], Any] | None: ...


#: Records a failed attempt per the retry policy (``ActivityRunner._failed``).
FailAttempt = Callable[
    [Job, uuid.UUID, OperationPayload, Exception, AttemptSpan, Any], Awaitable[None]
]


async def run_transactional(
    runner: StepRunner,
    job: Job,
    token: uuid.UUID,
    op: OperationPayload,
    defn: TransactionDefinition[Any, Any],
    lease: Any,
    span: AttemptSpan,
    info: ActivityInfo,
    fail: FailAttempt,
) -> None:
    """Run one attempt of a transactional step and record its outcome (see module doc)."""
    reruns = 0
    while True:
        try:
            failure = await _once(runner, job, token, op, defn, lease, info)
        except StoreUnavailableError:
            # The connection died, maybe during the COMMIT: the transaction
            # either committed whole or not at all; the operation row says which.
            if await _committed(runner, job, token):
                span.set_outcome(AttemptOutcome.SUCCEEDED)
                return
            if reruns >= MAX_CONFLICT_RERUNS:
                raise
            reruns = await _pause(reruns, job, None)
            continue
        except Exception as err:
            if is_transient(err) and reruns < MAX_CONFLICT_RERUNS:  # e.g. at COMMIT
                reruns = await _pause(reruns, job, err)
                continue
            if is_not_found(err):  # lease lost: nothing written; the reaper decides
                log.info("transactional step %s: lease lost, rolled back: %s", job.id, err)
                return
            raise
        if failure is None:
            span.set_outcome(AttemptOutcome.SUCCEEDED)
            return
        if is_transient(failure) and reruns < MAX_CONFLICT_RERUNS:
            reruns = await _pause(reruns, job, failure)
            continue
        span.record_failure(failure)
        await fail(job, token, op, failure, span, lease)
        return


async def _once(
    runner: StepRunner,
    job: Job,
    token: uuid.UUID,
    op: OperationPayload,
    defn: TransactionDefinition[Any, Any],
    lease: Any,
    info: ActivityInfo,
) -> Exception | None:
    """One transaction: run the step, then record its outcome and COMMIT.

    Returns:
        None once committed, or the step's error (its transaction rolled back).

    Raises:
        NotFoundError: the lease is gone (rolled back).
    """
    assert job.run_id is not None
    limit = op.start_to_close.total_seconds() if op.start_to_close is not None else None
    async with runner.store.operation_transaction(
        job.id, token, job.run_id, isolation=defn.isolation
    ) as tx:
        result = await _run_step(runner, defn, op, tx, info, limit, job)
        if isinstance(result, Exception):
            return result  # leaving the block without a settlement rolls back
        await _record(runner, job, token, op, tx, lease, result)
    return None


async def _run_step(
    runner: StepRunner,
    defn: TransactionDefinition[Any, Any],
    op: OperationPayload,
    tx: OperationTransaction,
    info: ActivityInfo,
    limit: float | None,
    job: Job,
) -> bytes | Exception:
    """Call the step on the transaction's connection: its encoded result, or its
    error (a :class:`TransactionMisuseError` first, when the step ended the
    transaction or tried to close the connection)."""
    timer = asyncio.timeout(limit)
    conn = _StepConnection(tx.connection, defn.name)
    try:
        with activity_context(info):
            async with timer:
                result = await defn.run_in(conn, bytes(op.input))
    except TimeoutError as err:
        if timer.expired():
            return conn.misuse() or TimeoutError(
                f"activity {op.activity} exceeded start_to_close={limit:g}s "
                f"(attempt {job.attempt}); its transaction was rolled back"
            )
        return conn.misuse() or err
    except Exception as err:
        return conn.misuse() or err
    misuse = conn.misuse()
    if misuse is not None:
        return misuse
    if runner.max_payload_bytes is not None and len(result) > runner.max_payload_bytes:
        return PayloadError(
            f"result of activity {op.activity!r} is {len(result)} bytes, "
            f"over the limit of {runner.max_payload_bytes}"
        )
    return result


class _StepConnection:
    """The connection a step is given: the transaction's own, except that
    ``close()`` and ``terminate()`` are refused (they would take the store's
    connection, and the step's transaction, away), and that it can tell
    whether the step ended the transaction itself."""

    __slots__ = ("_closing", "_conn", "_step")

    def __init__(self, conn: Any, step: str) -> None:
        self._conn = conn
        self._step = step
        self._closing = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __repr__(self) -> str:
        return f"<connection of transactional step {self._step!r}: {self._conn!r}>"

    def _refuse(self) -> TransactionMisuseError:
        self._closing = True
        return TransactionMisuseError(self._step, "closed the connection")

    async def close(self, **_: Any) -> None:
        raise self._refuse()

    def terminate(self) -> None:
        raise self._refuse()

    def misuse(self) -> TransactionMisuseError | None:
        """The step's misuse of its connection, if any: a refused close, or the
        transaction ended (a connection that was lost is not the step's doing:
        the caller's ``StoreUnavailableError`` path handles it)."""
        if self._closing:
            return self._refuse()
        if not self._conn.is_closed() and not self._conn.is_in_transaction():
            return TransactionMisuseError(
                self._step, "ended its transaction (COMMIT or ROLLBACK) on the connection"
            )
        return None


async def _record(
    runner: StepRunner,
    job: Job,
    token: uuid.UUID,
    op: OperationPayload,
    tx: OperationTransaction,
    lease: Any,
    result: bytes,
) -> None:
    """Record the outcome on ``tx`` (folded with the next pass when possible) and COMMIT."""
    event = ActivityCompleted(
        scheduled_seq=op.seq, result=msgspec.Raw(result), attempts=job.attempt
    )
    event_type, payload = encode_event(event)
    await _call_hook(runner.before_settle, job, event_type)
    folded = False
    if runner.folder is not None:
        settle = OperationSettle(
            job_id=job.id, lease_token=token, event_type=event_type, payload=payload
        )
        folded = await runner.folder.settle_in(job, settle, lease, tx)
    if not folded:
        await tx.complete(event_type, payload)
    if runner.after_settle is not None:
        runner.after_settle(job, event_type)


async def _call_hook(hook: Callable[[Job, str], Any] | None, job: Job, event_type: str) -> None:
    if hook is not None:
        hooked = hook(job, event_type)
        if asyncio.iscoroutine(hooked):
            await hooked


async def _committed(runner: StepRunner, job: Job, token: uuid.UUID) -> bool:
    """Whether this attempt's transaction committed (its reply was lost)."""
    found = await retry_transient(lambda: runner.store.attempt_settlement(job.id, token))
    return found is not None and found[0] is JobState.SUCCEEDED


async def _pause(reruns: int, job: Job, err: BaseException | None) -> int:
    """Wait a little before running the step again (jittered, growing to 0.5 s)."""
    log.info(
        "transactional step %s (attempt %d) rolled back by %s; running it again",
        job.id,
        job.attempt,
        "a lost connection" if err is None else f"a conflict ({type(err).__name__})",
    )
    await asyncio.sleep(random.uniform(0, min(0.5, 0.005 * 2**reruns)))
    return reruns + 1
