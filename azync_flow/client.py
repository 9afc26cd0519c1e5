"""Client of workflow executions: start, signal, result, cancel, describe, history.

Example::

    client = Client(store)
    handle = await client.start(order_workflow, Order(...), idempotency_key="order-17")
    await handle.signal("approve", {"by": "ann"}, message_id="approve-17")
    result = await handle.result(timeout=timedelta(minutes=5))
"""

from __future__ import annotations

import asyncio
import time
import typing
import uuid
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar

from azync_flow.errors import (
    WorkflowCancelledError,
    WorkflowError,
    WorkflowFailedError,
)
from azync_flow.replay.codec import decode_value, encode_value
from azync_flow.replay.events import HistoryEntry
from azync_flow.replay.passes import to_entries
from azync_flow.replay.replayer import RecordedHistory
from azync_flow.runtime.uncertain import UncertainOperationView, resolve_operation
from azync_flow.store.errors import ConflictError
from azync_flow.store.types import (
    SignalParams,
    WorkflowExecutionView,
    WorkflowStartParams,
    WorkflowState,
)
from azync_flow.workflow import WorkflowDefinition

__all__ = ["Client", "IdempotencyConflictError", "WorkflowHandle"]

R = TypeVar("R")


class IdempotencyConflictError(ConflictError, WorkflowError):
    """A start reused an id or idempotency key of an execution with a different
    workflow or different input (C19). Nothing was started."""

    code = "idempotency_conflict"


class ClientStore(Protocol):
    async def start_workflow(self, p: WorkflowStartParams, **kw: Any) -> tuple[bool, uuid.UUID]: ...
    async def get_workflow_execution(self, id: uuid.UUID) -> WorkflowExecutionView: ...
    async def signal_workflow(self, p: SignalParams) -> bool: ...
    async def cancel_workflow_execution(self, id: uuid.UUID) -> None: ...
    async def resume_workflow(self, id: uuid.UUID) -> None: ...
    async def list_uncertain_operations(
        self, limit: int = 100, workflow_id: uuid.UUID | None = None
    ) -> list[Any]: ...
    async def resolve_uncertain(self, *args: Any, **kwargs: Any) -> Any: ...
    async def list_history(
        self, workflow_id: uuid.UUID, after_seq: int = 0, limit: int | None = None
    ) -> list[Any]: ...


class Client:
    """Starts and addresses workflow executions through a store.

    Args:
        store: the store (``PostgresStore``).
        poll_interval: longest pause between two reads while waiting for a result.
    """

    def __init__(
        self, store: ClientStore, *, poll_interval: timedelta = timedelta(milliseconds=200)
    ):
        self.store = store
        self.poll_interval = poll_interval.total_seconds()

    async def start(
        self,
        workflow: WorkflowDefinition[Any, R],
        input: Any = None,
        *,
        id: uuid.UUID | None = None,
        idempotency_key: str = "",
        meta: dict[str, str] | None = None,
    ) -> WorkflowHandle[R]:
        """Start an execution (or return the live one holding ``idempotency_key``).

        A start whose ``id`` or live ``idempotency_key`` (scoped to the workflow
        name) matches an existing execution returns that execution's handle
        (``handle.started`` is False) when the workflow and the input are the
        same. A finished execution frees its key: a later start runs anew.

        Raises:
            IdempotencyConflictError: same id/key, different workflow or input.
            PayloadEncodeError: the input is not JSON-encodable.
        """
        data = workflow.encode_input(input)
        params = WorkflowStartParams(
            id=id or uuid.uuid4(),
            name=workflow.name,
            input=data,
            version=workflow.version,
            business_idempotency_key=idempotency_key,
            meta=meta or {},
        )
        inserted, wid = await self.store.start_workflow(params)
        if not inserted:
            existing = await self.store.get_workflow_execution(wid)
            if existing.name != workflow.name or existing.input != data:
                raise IdempotencyConflictError(
                    f"execution {wid} already holds this id/key with workflow "
                    f"{existing.name!r} and different input; nothing started"
                )
        return WorkflowHandle(self, wid, workflow, started=inserted)

    async def list_uncertain(
        self, workflow_id: uuid.UUID | None = None, limit: int = 100
    ) -> list[UncertainOperationView]:
        """Operations waiting for a decision (oldest first), optionally of one
        execution: workflow, activity, input, since when and why (docs/uncertain.md)."""
        ops = await self.store.list_uncertain_operations(limit=limit, workflow_id=workflow_id)
        return [UncertainOperationView.from_store(op) for op in ops]

    async def resolve_uncertain(
        self,
        operation_id: Any,
        decision: str,
        result: Any = None,
        error: str | None = None,
        note: str | None = None,
        decided_by: str | None = None,
    ) -> None:
        """Decide an uncertain operation, audited, in one transaction with the
        execution's resume and its next workflow task (docs/uncertain.md).

        Args:
            operation_id: the operation id (UUID or its string), or an item of
                :meth:`list_uncertain`.
            decision: ``complete`` (the workflow gets ``result`` as if the
                activity returned it), ``fail`` (the workflow sees ``ActivityError``
                of type ``Uncertain`` with ``error``) or ``retry`` (run it again;
                the uncertain attempt stays recorded).
            note: why; kept in history (``OperationResolved``) and on the operation.
            decided_by: who (default: ``user@host`` of this process).

        Raises:
            ValueError: unknown decision or malformed id.
            NotFoundError: no such operation, or it is not uncertain; nothing changed.
            ConflictError: already resolved (e.g. by a concurrent resolver); nothing changed.
        """
        op_id = getattr(operation_id, "job_id", operation_id)
        await resolve_operation(
            self.store,  # type: ignore[arg-type]
            op_id,
            decision,
            result=result,
            error=error,
            note=note,
            decided_by=decided_by,
        )

    def get_handle(
        self,
        id: uuid.UUID,
        workflow: WorkflowDefinition[Any, R] | None = None,
    ) -> WorkflowHandle[R]:
        """A handle on an existing execution (no I/O)."""
        return WorkflowHandle(self, id, workflow, started=False)


class WorkflowHandle(Generic[R]):
    """Addresses one execution.

    Attributes:
        id: the execution id.
        started: True when this handle's ``start`` created the execution.
    """

    def __init__(
        self,
        client: Client,
        id: uuid.UUID,
        workflow: WorkflowDefinition[Any, R] | None,
        *,
        started: bool,
    ) -> None:
        self.client = client
        self.id = id
        self.workflow = workflow
        self.started = started

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.id}>"

    async def signal(self, name: str, payload: Any = None, *, message_id: str = "") -> bool:
        """Send signal ``name``; buffered until a ``ctx.wait_signal(name)`` takes it.

        Returns:
            True when accepted, False when ``message_id`` was already accepted
            (the duplicate is dropped; a retried send gets this same answer).

        Raises:
            NotFoundError: no such execution, or it finished.
        """
        data = encode_value(payload, f"payload of signal {name!r}")
        return await self.client.store.signal_workflow(
            SignalParams(workflow_id=self.id, name=name, payload=data, message_id=message_id)
        )

    async def cancel(self) -> None:
        """Request cancellation: the workflow sees ``asyncio.CancelledError`` at its
        current await and may clean up (durably) before it ends."""
        await self.client.store.cancel_workflow_execution(self.id)

    async def resume(self) -> None:
        """Resume a suspended execution (e.g. after fixing non-deterministic code)."""
        await self.client.store.resume_workflow(self.id)

    async def describe(self) -> WorkflowExecutionView:
        """The execution row: state, result, failure reason, timestamps."""
        return await self.client.store.get_workflow_execution(self.id)

    async def history(self) -> list[HistoryEntry]:
        """The decoded history, in seq order."""
        return to_entries(await self.client.store.list_history(self.id))

    async def recorded_history(self) -> RecordedHistory:
        """The history in the Replayer's portable form (``.to_json()`` to save it)."""
        view = await self.describe()
        rows = await self.client.store.list_history(self.id)
        return RecordedHistory.from_rows(view.name, view.input, rows, self.id)

    async def result(self, timeout: timedelta | float | None = None) -> R:  # noqa: ASYNC109
        """Wait for the execution to finish and return its result.

        Polls with a growing pause (up to the client's ``poll_interval``).

        Raises:
            WorkflowFailedError: the workflow raised.
            WorkflowCancelledError: it was cancelled.
            TimeoutError: ``timeout`` elapsed first (the execution keeps running).
        """
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        deadline = None if seconds is None else time.monotonic() + seconds
        pause = 0.002
        while True:
            view = await self.describe()
            if view.state == WorkflowState.SUCCEEDED:
                result_type = self.workflow.result_type if self.workflow else Any
                value = decode_value(view.result or b"null", result_type, "workflow result")
                return typing.cast(R, value)
            if view.state == WorkflowState.FAILED:
                raise WorkflowFailedError(self.id, "WorkflowFailed", view.failure_reason)
            if view.state == WorkflowState.CANCELLED:
                raise WorkflowCancelledError(self.id, view.failure_reason)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"workflow {self.id} still {view.state} after {seconds}s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, self.client.poll_interval)
