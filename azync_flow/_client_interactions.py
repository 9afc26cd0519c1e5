"""The client side of queries and updates (``WorkflowHandle.query`` / ``update``)
and the waits a client's handles share (``result``, ``query``, ``update``).

A wait registers with the client's LISTEN connection for the execution
(``workflow.done:``, ``workflow.query:`` and ``workflow.update:`` notifications
of that id wake it), re-checks on every wake-up and at least every
``fallback_poll`` seconds (with a growing pause up to ``poll_interval`` when
the store cannot listen).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import typing
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from azync_flow._local_workflows import local_workflows
from azync_flow.codec import decode_value, encode_value
from azync_flow.errors import (
    NotFoundError,
    QueryFailedError,
    QueryNotFoundError,
    QueryTimeoutError,
    UpdateFailedError,
    UpdateRejectedError,
)
from azync_flow.replay import UPDATE_SIGNAL_PREFIX
from azync_flow.store.validate import check_name
from azync_flow.store.workflows import (
    DONE_RESET,
    QueryAnswer,
    QueryRequest,
    SignalParams,
    UpdateOutcome,
    WorkflowClientStore,
    WorkflowState,
)

if TYPE_CHECKING:
    from azync_flow.worker import Worker

__all__ = ["DEFAULT_QUERY_TIMEOUT", "TERMINAL_STATES", "Waits", "query_workflow", "update_workflow"]

log = logging.getLogger("azync_flow.client")

T = TypeVar("T")

#: States an execution never leaves.
TERMINAL_STATES = (
    WorkflowState.SUCCEEDED,
    WorkflowState.FAILED,
    WorkflowState.CANCELLED,
    WorkflowState.TERMINATED,
)

#: Default time a query may take to be answered.
DEFAULT_QUERY_TIMEOUT = timedelta(seconds=10)


class Waits:
    """The waits of one client's handles, sharing one LISTEN connection.

    Args:
        store: the client's store.
        poll_interval: longest pause between two checks when the store cannot listen (s).
        fallback_poll: longest pause between two checks while listening (s).
        linger: how long the LISTEN connection stays open after the last waiter left (s).
    """

    def __init__(
        self,
        store: WorkflowClientStore[Any],
        *,
        poll_interval: float,
        fallback_poll: float,
        linger: float,
    ) -> None:
        self.poll_interval = poll_interval
        self.fallback_poll = fallback_poll
        self.watcher = _DoneWatcher(store, linger)
        #: Waits ended by a wake-up (not by a fallback re-check); a test hook.
        self.wakeups = 0

    async def wait_for(
        self,
        run_id: uuid.UUID,
        check: Callable[[], Awaitable[T | None]],
        deadline: float | None,
    ) -> T | None:
        """Call ``check`` until it returns a value (returned) or the monotonic
        ``deadline`` passes (None), sleeping on the execution's wake-ups between calls."""
        woken, listening = await self.watcher.acquire(run_id)
        pause = 0.002
        try:
            while True:
                woken.clear()
                found = await check()
                if found is not None:
                    return found
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return None
                if listening:
                    wait = self.fallback_poll
                else:
                    wait = pause
                    pause = min(pause * 2, self.poll_interval)
                if deadline is not None:
                    wait = min(wait, deadline - now)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await woken.wait()
                if woken.is_set():
                    self.wakeups += 1
        finally:
            await self.watcher.release(run_id, woken)

    async def close(self) -> None:
        """Release the LISTEN connection (only open while a wait runs, or lingers)."""
        await self.watcher.close()


class _DoneWatcher:
    """One LISTEN connection per client while handles wait in
    :meth:`WorkflowHandle.result`, fanning ``workflow.done`` notifications out to
    them; it is closed again when the last waiter leaves, after ``linger``
    seconds without a new waiter (0: at once, no idle connection)."""

    def __init__(self, store: WorkflowClientStore[Any], linger: float = 0.0) -> None:
        self.store = store
        self.linger = linger
        self.waiters: dict[uuid.UUID, set[asyncio.Event]] = {}
        self.sub: Any = None
        self.task: asyncio.Task[None] | None = None
        self.unavailable = False
        self._lock = asyncio.Lock()
        self._closing: asyncio.TimerHandle | None = None

    async def acquire(self, run_id: uuid.UUID) -> tuple[asyncio.Event, bool]:
        """Register a waiter; returns its event and whether wake-ups will come
        (False: the store cannot LISTEN, poll instead)."""
        async with self._lock:
            if self._closing is not None:
                self._closing.cancel()
                self._closing = None
            event = asyncio.Event()
            self.waiters.setdefault(run_id, set()).add(event)
            return event, await self._ensure()

    async def release(self, run_id: uuid.UUID, event: asyncio.Event) -> None:
        async with self._lock:
            events = self.waiters.get(run_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self.waiters[run_id]
            if not self.waiters:
                if self.linger > 0 and self.sub is not None:
                    loop = asyncio.get_running_loop()
                    self._closing = loop.call_later(
                        self.linger, lambda: loop.create_task(self._close_if_idle())
                    )
                else:
                    await self._close()

    async def _close_if_idle(self) -> None:
        async with self._lock:
            self._closing = None
            if not self.waiters:
                await self._close()

    async def _ensure(self) -> bool:
        if self.task is not None and not self.task.done():
            return True
        if self.unavailable:
            return False
        try:
            self.sub = await self.store.workflow_done_events()
        except Exception as err:
            log.warning("cannot LISTEN for finished workflows (%s); polling instead", err)
            self.sub = None
        if self.sub is None:
            self.unavailable = True
            return False
        self.task = asyncio.create_task(self._pump(), name="azync-client-done-pump")
        return True

    async def _pump(self) -> None:
        async for run_id in self.sub:
            targets = (
                [e for events in self.waiters.values() for e in events]
                if run_id == DONE_RESET
                else list(self.waiters.get(run_id, ()))
            )
            for event in targets:
                event.set()

    async def _close(self) -> None:
        sub, task = self.sub, self.task
        self.sub = self.task = None
        if sub is not None:
            await sub.close()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        async with self._lock:
            if self._closing is not None:
                self._closing.cancel()
                self._closing = None
            await self._close()


def _deadline(timeout: timedelta | float | None) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return time.monotonic() + seconds


async def query_workflow(
    store: WorkflowClientStore[Any],
    waits: Waits,
    worker: Worker | None,
    workflow_id: uuid.UUID,
    name: str,
    args: tuple[Any, ...],
    *,
    timeout: timedelta | float,  # noqa: ASYNC109 - waits on the database, not a coroutine
    type: Any,
) -> Any:
    """See :meth:`azync_flow.client.WorkflowHandle.query`."""
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if seconds <= 0:
        raise ValueError("a query timeout must be positive")
    data = encode_value(list(args), f"arguments of query {name!r}")
    query_id = uuid.uuid4()
    await store.request_workflow_query(
        QueryRequest(
            id=query_id,
            workflow_id=workflow_id,
            name=name,
            args=data,
            timeout=timedelta(seconds=seconds),
        )
    )
    local = local_workflows(worker)
    if local is not None:
        local.wake_queries()  # no NOTIFY hop for a worker of this process

    async def answered() -> QueryAnswer | None:
        answer: QueryAnswer | None = await store.take_workflow_query(query_id)
        return answer

    answer = await waits.wait_for(workflow_id, answered, _deadline(seconds))
    if answer is None:  # withdraw it (an answer that just came in still counts)
        answer = await store.take_workflow_query(query_id, withdraw=True)
    if answer is None or answer.state not in ("answered", "failed"):
        raise QueryTimeoutError(workflow_id, name, seconds)
    if answer.state == "failed":
        if answer.error_type == QueryNotFoundError.__name__:
            raise QueryNotFoundError(workflow_id, name, answer.message)
        raise QueryFailedError(workflow_id, name, answer.error_type, answer.message)
    return decode_value(answer.answer or b"null", type, f"result of query {name!r}")


async def update_workflow(
    store: WorkflowClientStore[Any],
    waits: Waits,
    worker: Worker | None,
    workflow_id: uuid.UUID,
    name: str,
    args: tuple[Any, ...],
    *,
    update_id: str | None,
    timeout: timedelta | float | None,  # noqa: ASYNC109 - waits on the database
    type: Any,
) -> Any:
    """See :meth:`azync_flow.client.WorkflowHandle.update`."""
    check_name(name, "update name")
    if update_id == "":
        raise ValueError("an update id must not be empty")
    uid = check_name(update_id, "update id") if update_id else str(uuid.uuid4())

    async def decided() -> UpdateOutcome | None:
        outcome: UpdateOutcome | None = await store.get_workflow_update(workflow_id, uid)
        return outcome

    outcome = await decided() or await _request(
        store, worker, workflow_id, name, uid, args, decided
    )
    if outcome is None:

        async def settled() -> UpdateOutcome | None:
            found = await decided()
            if found is not None:
                return found
            view = await store.get_workflow_execution(workflow_id)
            if view.state not in TERMINAL_STATES:
                return None
            return await decided() or UpdateOutcome(
                update_id=uid,
                name=name,
                state="failed",
                error_type="WorkflowFinished",
                message=f"the execution ended ({view.state}) before the update completed",
            )

        outcome = await waits.wait_for(workflow_id, settled, _deadline(timeout))
        if outcome is None:
            raise TimeoutError(f"update {name!r} (id {uid}) of workflow {workflow_id} not done yet")
    return _update_result(workflow_id, name, outcome, type)


async def _request(
    store: WorkflowClientStore[Any],
    worker: Worker | None,
    workflow_id: uuid.UUID,
    name: str,
    uid: str,
    args: tuple[Any, ...],
    decided: Callable[[], Awaitable[UpdateOutcome | None]],
) -> UpdateOutcome | None:
    """Send the request (a duplicate of a pending one is dropped by the inbox);
    an outcome when the execution cannot take it."""
    data = encode_value(list(args), f"arguments of update {name!r}")
    params = SignalParams(
        workflow_id=workflow_id, name=UPDATE_SIGNAL_PREFIX + name, payload=data, message_id=uid
    )
    try:
        await store.signal_workflow(params)
    except NotFoundError:
        # NotFoundError again: no such execution
        view = await store.get_workflow_execution(workflow_id)
        return await decided() or UpdateOutcome(
            update_id=uid,
            name=name,
            state="rejected",
            error_type="WorkflowNotRunning",
            message=f"the execution is {view.state}; only a running execution takes updates",
        )
    local = local_workflows(worker)
    if local is not None:
        local.wake_tasks()
    return None


def _update_result(workflow_id: uuid.UUID, name: str, outcome: UpdateOutcome, type: Any) -> Any:
    uid = outcome.update_id
    if outcome.name != name:
        raise UpdateRejectedError(
            workflow_id,
            name,
            uid,
            "DuplicateUpdateId",
            f"the id is taken by update {outcome.name!r}",
        )
    if outcome.state == "completed":
        value = decode_value(outcome.result or b"null", type, f"result of update {name!r}")
        return typing.cast(Any, value)
    if outcome.state == "rejected":
        raise UpdateRejectedError(workflow_id, name, uid, outcome.error_type, outcome.message)
    raise UpdateFailedError(workflow_id, name, uid, outcome.error_type, outcome.message)
