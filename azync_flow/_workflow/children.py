"""Child workflows seen from the parent's code: :class:`ChildHandle`."""

from __future__ import annotations

import asyncio
import dataclasses
import typing
import uuid
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar

from azync_flow.codec import encode_value
from azync_flow.replay import check_signal_name
from azync_flow.replay.engine import WorkflowInstance

__all__ = ["ChildHandle", "ChildOptions", "ChildWorkflow", "ParentClosePolicy"]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: What happens to a live child when its parent run ends (completes, fails, is
#: cancelled or terminated, or continues as new): ``"terminate"`` ends it
#: (the default), ``"request_cancel"`` sends it a cancel request, ``"abandon"``
#: leaves it running on its own.
ParentClosePolicy = typing.Literal["terminate", "request_cancel", "abandon"]


@dataclasses.dataclass(frozen=True)
class ChildOptions:
    """Routing of a child execution, from ``ctx.start_child``'s keywords (the
    runtime reads it when the child is created; replay does not compare it).

    Attributes:
        task_queue: the child's task queue; ``None`` = the parent's.
        priority: the child's priority; ``None`` = the parent's.
        execution_timeout / run_timeout: the child's timeouts; ``None`` = none.
    """

    task_queue: str | None = None
    priority: int | None = None
    execution_timeout: timedelta | None = None
    run_timeout: timedelta | None = None


class ChildWorkflow(Protocol[R_co]):
    """What ``ctx.start_child`` needs of a ``@workflow`` definition whose result is ``R_co``."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def encode_input(self, value: Any) -> bytes: ...

    def decode_result(self, data: bytes) -> R_co: ...


class ChildHandle(Generic[R]):
    """A child execution started by ``ctx.start_child``.

    Attributes:
        id: the child execution's id (list/describe it with the client).
        name: its workflow name.
        seq: the parent's history seq of its ``ChildStarted`` event.
    """

    def __init__(
        self,
        instance: WorkflowInstance,
        seq: int,
        child_id: uuid.UUID,
        future: asyncio.Future[Any],
        workflow: ChildWorkflow[R],
    ) -> None:
        self._instance = instance
        self._future = future
        self._workflow = workflow
        self.id = child_id
        self.name = workflow.name
        self.seq = seq

    def __repr__(self) -> str:
        return f"ChildHandle({self.name!r}, id={self.id})"

    async def result(self) -> R:
        """Wait (durably) for the child to finish and return its result, decoded to
        the child workflow's return annotation.

        Raises:
            ChildWorkflowError: the child failed, was cancelled or terminated
                (its ``state``, ``error_type`` and ``message``), or its id was
                taken by another execution.
        """
        return self._workflow.decode_result(await asyncio.shield(self._future))

    async def signal(self, name: str, payload: Any = None) -> None:
        """Send signal ``name`` to the child. Recorded in the parent's history
        (``ChildSignaled``) and buffered for the child in the same commit,
        exactly once (its message id is derived from the parent run and seq). A
        signal to a child that has already finished is dropped.

        Raises:
            ValueError: ``name`` contains NUL, is over 255 characters or starts
                with the reserved ``$update:`` prefix.
            PayloadEncodeError: ``payload`` is not JSON-encodable.
        """
        check_signal_name(name)
        data = encode_value(payload, f"payload of signal {name!r}")
        self._instance.signal_child(self.seq, self.id, name, data)

    async def cancel(self) -> None:
        """Ask the child to cancel: recorded in the parent's history
        (``ChildCancelRequested``) and set on the child in the same commit. The
        child's code sees ``CancelledError`` and may clean up; when it ends
        cancelled, ``result()`` raises ChildWorkflowError with state
        ``cancelled``. A request to a child that has already finished does
        nothing."""
        self._instance.cancel_child(self.seq, self.id)
