"""Queries and updates: the half of :class:`~azync_flow.replay.engine.WorkflowInstance`
that answers questions about a workflow's state and runs update handlers.

* A **query** calls a read-only handler on the instance as it stands (a cached
  instance, or one just replayed to the end of its history). It writes
  nothing: while it runs the instance is *read-only* and any durable call
  raises :class:`~azync_flow.errors.ReadOnlyContextError` without touching the
  instance's state.
* An **update** arrives as a buffered request (an inbox entry named
  ``$update:<name>`` whose message id is the update id). A pass delivers it
  after the signals: the validator runs read-only; a rejection is reported
  (never recorded); an acceptance is recorded as ``UpdateAccepted`` and starts
  the handler as a workflow task, whose end is the ``UpdateCompleted`` command.
  On replay ``UpdateAccepted`` restarts the handler at the same point (the
  validator is not run again).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from azync_flow.errors import NonDeterminismError, QueryNotFoundError, ReadOnlyContextError
from azync_flow.replay.events import Event, UpdateAccepted, UpdateCompleted
from azync_flow.replay.loop import DeterministicLoop
from azync_flow.replay.outcome import BufferedSignal, WorkflowInfo, safe_message
from azync_flow.store.validate import check_name
from azync_flow.store.workflows import UpdateOutcome

__all__ = ["UPDATE_SIGNAL_PREFIX", "InteractionsMixin", "UpdateHandler", "check_signal_name"]

#: Inbox name prefix of update requests (``$update:<update name>``).
UPDATE_SIGNAL_PREFIX = "$update:"


def check_signal_name(name: str) -> str:
    """Return ``name`` if user code may send or wait for a signal of that name.

    Raises:
        ValueError: ``name`` contains NUL or is not valid UTF-8, is over 255
            characters, or starts with the reserved ``$update:`` prefix (the
            inbox entries of update requests; a signal of that name would forge one).
    """
    check_name(name, "signal name")
    if name.startswith(UPDATE_SIGNAL_PREFIX):
        raise ValueError(f"signal names starting with {UPDATE_SIGNAL_PREFIX!r} are reserved")
    return name


T = TypeVar("T")

#: ``handler(args JSON array) -> result JSON`` of a query.
QueryHandler = Callable[[bytes], bytes]


@dataclass(frozen=True)
class UpdateHandler:
    """An update handler as the engine sees it (the workflow layer builds it).

    Attributes:
        run: ``run(args JSON array)`` returns a coroutine producing the result JSON.
        validate: ``validate(args JSON array)`` raises to reject; None accepts all.
    """

    run: Callable[[bytes], Coroutine[Any, Any, bytes]]
    validate: Callable[[bytes], None] | None = None


class InteractionsMixin:
    """Query and update state of a workflow instance (pure; no I/O)."""

    loop: DeterministicLoop
    info: WorkflowInfo
    _task_context: contextvars.Context | None
    _consumed: list[tuple[int, int]]
    _out: list[tuple[int, Event]]
    _failure: NonDeterminismError | None

    def _init_interactions(self) -> None:
        self._query_handlers: dict[str, QueryHandler] = {}
        self._update_handlers: dict[str, UpdateHandler] = {}
        self._updates_started: set[str] = set()
        self._rejected: list[UpdateOutcome] = []
        self._read_only = False

    def _stopped(self) -> bool:
        raise NotImplementedError

    def _append_input(self, event: Event) -> int:
        raise NotImplementedError

    def _emit(self, event: Event) -> tuple[int, Event | None]:
        raise NotImplementedError

    def _mismatch(self, seq: int | None, recorded: str, new: str, detail: str = "") -> None:
        raise NotImplementedError

    def _check_size(self, what: str, data: bytes) -> None:
        raise NotImplementedError

    # --- registration (the workflow layer) -------------------------------------------------

    def set_query_handler(self, name: str, handler: QueryHandler) -> None:
        """Register (or replace) the handler of query ``name``."""
        self._query_handlers[name] = handler

    def set_update_handler(self, name: str, handler: UpdateHandler) -> None:
        """Register (or replace) the handler of update ``name``."""
        self._update_handlers[name] = handler

    @property
    def query_names(self) -> list[str]:
        """Names of the registered query handlers, sorted."""
        return sorted(self._query_handlers)

    # --- read-only calls -------------------------------------------------------------------

    def _check_writable(self, what: str) -> None:
        if self._read_only:
            raise ReadOnlyContextError(what)

    def read_only_call(self, fn: Callable[[], T]) -> T:
        """Call ``fn`` with this instance's loop installed and every durable call
        refused (:class:`ReadOnlyContextError`); its exceptions propagate."""
        box: list[T] = []
        self._read_only = True
        try:
            self.loop.run_callable(lambda: box.append(fn()))
        finally:
            self._read_only = False
        return box[0]

    def query(self, name: str, args: bytes) -> bytes:
        """Answer query ``name`` with ``args`` (a JSON array) from the current state.

        Returns:
            The handler's result, JSON-encoded.

        Raises:
            QueryNotFoundError: no handler of that name is registered.
            Exception: whatever the handler raised (``ReadOnlyContextError``
                when it issued a command).
        """
        handler = self._query_handlers.get(name)
        if handler is None:
            known = ", ".join(self.query_names) or "none"
            raise QueryNotFoundError(
                self.info.execution_id, name, f"no query handler of that name (registered: {known})"
            )
        return self.read_only_call(lambda: handler(args))

    # --- updates -----------------------------------------------------------------------------

    def _deliver_updates(self, signals: Sequence[BufferedSignal]) -> None:
        """Validate and accept (or reject) buffered update requests, in arrival order."""
        for request in signals:
            if self._stopped():
                return
            if not request.name.startswith(UPDATE_SIGNAL_PREFIX):
                continue
            name = request.name[len(UPDATE_SIGNAL_PREFIX) :]
            rejection = self._validate_update(name, request)
            if rejection is not None:
                self._rejected.append(rejection)
                self._consumed.append((request.signal_id, 0))  # consumed, nothing recorded
                continue
            seq = self._append_input(
                UpdateAccepted(
                    seq=0,
                    update_id=request.message_id,
                    name=name,
                    args=msgspec.Raw(request.payload),
                )
            )
            self._consumed.append((request.signal_id, seq))

    def _validate_update(self, name: str, request: BufferedSignal) -> UpdateOutcome | None:
        def rejected(error_type: str, message: str) -> UpdateOutcome:
            return UpdateOutcome(
                update_id=request.message_id,
                name=name,
                state="rejected",
                error_type=error_type,
                message=message,
            )

        if request.message_id in self._updates_started:
            return rejected("DuplicateUpdateId", "an update with this id was already accepted")
        handler = self._update_handlers.get(name)
        if handler is None:
            known = ", ".join(sorted(self._update_handlers)) or "none"
            return rejected(
                "UnknownUpdate", f"no update handler of that name (registered: {known})"
            )
        if handler.validate is not None:
            validate = handler.validate
            try:
                self.read_only_call(lambda: validate(request.payload))
            except Exception as exc:
                return rejected(type(exc).__name__, safe_message(exc))
        return None

    def _start_update(self, seq: int, event: UpdateAccepted) -> None:
        handler = self._update_handlers.get(event.name)
        if handler is None:
            self._mismatch(
                seq, event.describe(), "", f"no update handler {event.name!r} was registered here"
            )
            return
        self._updates_started.add(event.update_id)
        context = self._task_context.copy() if self._task_context is not None else None
        task = self.loop.create_task(
            self._run_update(event, handler), name=f"update:{event.name}", context=context
        )
        task.add_done_callback(_retrieve)

    async def _run_update(self, event: UpdateAccepted, handler: UpdateHandler) -> None:
        done = UpdateCompleted(seq=0, update_id=event.update_id, name=event.name)
        try:
            result = await handler.run(bytes(event.args))
            self._check_size(f"result of update {event.name!r}", result)
            done.result = msgspec.Raw(result)
        except Exception as exc:  # the handler's failure is the update's outcome
            done.error_type = type(exc).__name__
            done.message = safe_message(exc)
        self._emit(done)

    def _update_results(self) -> list[UpdateOutcome]:
        """Rejections of this pass, then the updates its new events completed."""
        results = list(self._rejected)
        for _, event in self._out:
            if isinstance(event, UpdateCompleted):
                state = "failed" if event.error_type else "completed"
                result = None if event.error_type else bytes(event.result)
                results.append(
                    UpdateOutcome(
                        update_id=event.update_id,
                        name=event.name,
                        state=state,
                        result=result,
                        error_type=event.error_type,
                        message=event.message,
                    )
                )
        return results


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # aborted handlers end with WorkflowAbort: not an error to report
