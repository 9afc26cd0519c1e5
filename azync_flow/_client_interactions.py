"""The client side of queries and updates (``WorkflowHandle.query`` / ``update``)
and the wait loop the handle's waits share.

A wait registers with the client's LISTEN connection for the execution
(``workflow.done:``, ``workflow.query:`` and ``workflow.update:`` notifications
of that id wake it), re-checks on every wake-up and at least every
``fallback_poll`` seconds (with a growing pause up to ``poll_interval`` when
the store cannot listen).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import typing
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from azync_flow.codec import decode_value, encode_value
from azync_flow.errors import (
    NotFoundError,
    QueryFailedError,
    QueryNotFoundError,
    QueryTimeoutError,
    UpdateFailedError,
    UpdateRejectedError,
)
from azync_flow.replay._interactions import UPDATE_SIGNAL_PREFIX
from azync_flow.runtime.worker_runtime import workflow_runtime
from azync_flow.store.validate import check_name
from azync_flow.store.workflows import (
    QueryAnswer,
    QueryRequest,
    SignalParams,
    UpdateOutcome,
    WorkflowState,
)

if TYPE_CHECKING:
    from azync_flow.client import Client, WorkflowHandle

__all__ = ["TERMINAL_STATES", "query_workflow", "update_workflow", "wait_for"]

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


async def wait_for(
    client: Client,
    run_id: uuid.UUID,
    check: Callable[[], Awaitable[T | None]],
    deadline: float | None,
) -> T | None:
    """Call ``check`` until it returns a value (returned) or the monotonic
    ``deadline`` passes (None), sleeping on the execution's wake-ups between calls."""
    watcher = client._watcher
    woken, listening = await watcher.acquire(run_id)
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
                wait = client.fallback_poll
            else:
                wait = pause
                pause = min(pause * 2, client.poll_interval)
            if deadline is not None:
                wait = min(wait, deadline - now)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await woken.wait()
            if woken.is_set():
                client.wakeups += 1
    finally:
        await watcher.release(run_id, woken)


def _deadline(timeout: timedelta | float | None) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return time.monotonic() + seconds


async def query_workflow(
    handle: WorkflowHandle[Any],
    name: str,
    args: tuple[Any, ...],
    *,
    timeout: timedelta | float,  # noqa: ASYNC109 - waits on the database, not a coroutine
    type: Any,
) -> Any:
    """See :meth:`azync_flow.client.WorkflowHandle.query`."""
    store: Any = handle.client.store
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if seconds <= 0:
        raise ValueError("a query timeout must be positive")
    data = encode_value(list(args), f"arguments of query {name!r}")
    query_id = uuid.uuid4()
    await store.request_workflow_query(
        QueryRequest(
            id=query_id,
            workflow_id=handle.id,
            name=name,
            args=data,
            timeout=timedelta(seconds=seconds),
        )
    )
    runtime = workflow_runtime(handle.client.worker)
    if runtime is not None:
        runtime.query_loop.poke()  # no NOTIFY hop for a worker of this process

    async def answered() -> QueryAnswer | None:
        answer: QueryAnswer | None = await store.take_workflow_query(query_id)
        return answer

    answer = await wait_for(handle.client, handle.id, answered, _deadline(seconds))
    if answer is None:  # withdraw it (an answer that just came in still counts)
        answer = await store.take_workflow_query(query_id, withdraw=True)
    if answer is None or answer.state not in ("answered", "failed"):
        raise QueryTimeoutError(handle.id, name, seconds)
    if answer.state == "failed":
        if answer.error_type == QueryNotFoundError.__name__:
            raise QueryNotFoundError(handle.id, name, answer.message)
        raise QueryFailedError(handle.id, name, answer.error_type, answer.message)
    return decode_value(answer.answer or b"null", type, f"result of query {name!r}")


async def update_workflow(
    handle: WorkflowHandle[Any],
    name: str,
    args: tuple[Any, ...],
    *,
    update_id: str | None,
    timeout: timedelta | float | None,  # noqa: ASYNC109 - waits on the database
    type: Any,
) -> Any:
    """See :meth:`azync_flow.client.WorkflowHandle.update`."""
    store: Any = handle.client.store
    check_name(name, "update name")
    if update_id == "":
        raise ValueError("an update id must not be empty")
    uid = check_name(update_id, "update id") if update_id else str(uuid.uuid4())

    async def decided() -> UpdateOutcome | None:
        outcome: UpdateOutcome | None = await store.get_workflow_update(handle.id, uid)
        return outcome

    outcome = await decided() or await _request(handle, name, uid, args, decided)
    if outcome is None:

        async def settled() -> UpdateOutcome | None:
            found = await decided()
            if found is not None:
                return found
            view = await handle.describe()
            if view.state not in TERMINAL_STATES:
                return None
            return await decided() or UpdateOutcome(
                update_id=uid,
                name=name,
                state="failed",
                error_type="WorkflowFinished",
                message=f"the execution ended ({view.state}) before the update completed",
            )

        outcome = await wait_for(handle.client, handle.id, settled, _deadline(timeout))
        if outcome is None:
            raise TimeoutError(f"update {name!r} (id {uid}) of workflow {handle.id} not done yet")
    return _update_result(handle, name, outcome, type)


async def _request(
    handle: WorkflowHandle[Any],
    name: str,
    uid: str,
    args: tuple[Any, ...],
    decided: Callable[[], Awaitable[UpdateOutcome | None]],
) -> UpdateOutcome | None:
    """Send the request (a duplicate of a pending one is dropped by the inbox);
    an outcome when the execution cannot take it."""
    data = encode_value(list(args), f"arguments of update {name!r}")
    params = SignalParams(
        workflow_id=handle.id, name=UPDATE_SIGNAL_PREFIX + name, payload=data, message_id=uid
    )
    try:
        await handle.client.store.signal_workflow(params)
    except NotFoundError:
        view = await handle.describe()  # NotFoundError again: no such execution
        return await decided() or UpdateOutcome(
            update_id=uid,
            name=name,
            state="rejected",
            error_type="WorkflowNotRunning",
            message=f"the execution is {view.state}; only a running execution takes updates",
        )
    runtime = workflow_runtime(handle.client.worker)
    if runtime is not None:
        runtime.task_loop.poke()
    return None


def _update_result(
    handle: WorkflowHandle[Any], name: str, outcome: UpdateOutcome, type: Any
) -> Any:
    uid = outcome.update_id
    if outcome.name != name:
        raise UpdateRejectedError(
            handle.id, name, uid, "DuplicateUpdateId", f"the id is taken by update {outcome.name!r}"
        )
    if outcome.state == "completed":
        value = decode_value(outcome.result or b"null", type, f"result of update {name!r}")
        return typing.cast(Any, value)
    if outcome.state == "rejected":
        raise UpdateRejectedError(handle.id, name, uid, outcome.error_type, outcome.message)
    raise UpdateFailedError(handle.id, name, uid, outcome.error_type, outcome.message)
