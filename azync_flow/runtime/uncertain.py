"""Uncertain operations: history events, decisions and reconcile hooks.

* :func:`uncertain_event` / :func:`resolution_events` build the history events
  the store verbs append (the store keeps history opaque).
* :func:`resolve_operation` applies an audited decision (client, CLI, hooks).
* :class:`Reconciled` is what a ``reconcile=`` hook returns; :class:`Reconciler`
  calls hooks and applies their verdicts. See docs/uncertain.md.
"""

from __future__ import annotations

import asyncio
import getpass
import inspect
import logging
import socket
import uuid
from collections import OrderedDict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from azync_flow._text import clean_text
from azync_flow.codec import encode_value
from azync_flow.errors import ConflictError, NotFoundError
from azync_flow.replay.events import (
    ActivityCompleted,
    ActivityFailed,
    OperationResolved,
    OperationUncertain,
    encode_event,
)
from azync_flow.retry import describe_error
from azync_flow.runtime._operations import decode_operation
from azync_flow.store.queue import Job
from azync_flow.store.workflows import UncertainStore

if TYPE_CHECKING:
    from azync_flow.workflow import Registry

__all__ = [
    "Reconciled",
    "Reconciler",
    "UncertainOperationView",
    "default_decider",
    "resolution_events",
    "resolve_operation",
    "seq_of_execution_key",
    "uncertain_event",
]

log = logging.getLogger("azync_flow.uncertain")


def seq_of_execution_key(execution_key: str) -> int:
    """The history seq in an operation's execution key ``<workflow_id>/<seq>``."""
    return int(execution_key.rsplit("/", 1)[1])


def uncertain_event(job: Job, reason: str) -> tuple[str, bytes]:
    """``(type, payload)`` of the OperationUncertain event for ``job``.

    Usable as the ``encode`` callback of ``store.reap_uncertain_operations``.
    """
    if job.payload is not None:
        seq = decode_operation(job.payload).seq
    else:
        seq = seq_of_execution_key(job.task_key)
    return encode_event(OperationUncertain(scheduled_seq=seq, reason=clean_text(reason)))


def resolution_events(
    seq: int,
    decision: str,
    *,
    result: bytes | None = None,
    error: str | None = None,
    decided_by: str = "",
    note: str = "",
) -> tuple[tuple[str, bytes], tuple[str, bytes] | None]:
    """``(resolved_event, outcome_event)`` for ``store.resolve_uncertain``.

    ``complete`` needs ``result`` (JSON bytes) and yields an ActivityCompleted;
    ``fail`` yields an ActivityFailed of type ``"Uncertain"`` with ``error``;
    ``retry`` yields no outcome (a new attempt will produce it).

    Raises:
        ValueError: unknown decision, or ``complete`` without a result.
    """
    resolved = encode_event(
        OperationResolved(scheduled_seq=seq, decision=decision, decided_by=decided_by, note=note)
    )
    outcome: Any
    if decision == "complete":
        if result is None:
            raise ValueError("a complete decision needs the operation's result (JSON bytes)")
        outcome = ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(result), attempts=0)
    elif decision == "fail":
        outcome = ActivityFailed(
            scheduled_seq=seq, error_type="Uncertain", message=clean_text(error or "")
        )
    elif decision == "retry":
        return resolved, None
    else:
        raise ValueError(f"unknown decision {decision!r}")
    return resolved, encode_event(outcome)


# --- decisions ----------------------------------------------------------------------


class Reconciled:
    """What a reconcile hook found out about an uncertain operation.

    Build it with the class methods::

        Reconciled.completed(result)   # it took effect; ``result`` is what the activity returns
        Reconciled.failed("declined")  # it did not and must not be retried: ActivityError
        Reconciled.retry()             # it did not take effect: run it again
        Reconciled.unknown("no answer") # cannot tell: wait for a person

    Attributes:
        outcome: "completed", "failed", "retry" or "unknown".
        result: the activity's result for ``completed`` (any JSON-encodable value).
        error: the failure message for ``failed``.
        note: free text kept in the audit trail.
    """

    __slots__ = ("error", "note", "outcome", "result")

    def __init__(self, outcome: str, result: Any = None, error: str = "", note: str = "") -> None:
        if outcome not in ("completed", "failed", "retry", "unknown"):
            raise ValueError(f"unknown reconcile outcome {outcome!r}")
        self.outcome = outcome
        self.result = result
        self.error = error
        self.note = note

    @classmethod
    def completed(cls, result: Any = None, note: str = "") -> Reconciled:
        """The operation took effect; the workflow gets ``result`` as its return value."""
        return cls("completed", result=result, note=note)

    @classmethod
    def failed(cls, error: str, note: str = "") -> Reconciled:
        """The operation did not (and will not) take effect; the workflow sees ActivityError."""
        return cls("failed", error=error or "reconciled as failed", note=note)

    @classmethod
    def retry(cls, note: str = "") -> Reconciled:
        """The operation did not take effect; running it again is safe."""
        return cls("retry", note=note)

    @classmethod
    def unknown(cls, note: str = "") -> Reconciled:
        """Cannot tell: leave the operation for a person."""
        return cls("unknown", note=note)

    @property
    def decision(self) -> str | None:
        """The ``resolve_uncertain`` decision, None for unknown."""
        return {"completed": "complete", "failed": "fail", "retry": "retry"}.get(self.outcome)

    def __repr__(self) -> str:
        return f"Reconciled.{self.outcome}(result={self.result!r}, error={self.error!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reconciled) and (
            self.outcome,
            self.result,
            self.error,
        ) == (other.outcome, other.result, other.error)

    __hash__ = None  # type: ignore[assignment]


def default_decider() -> str:
    """``user@host`` of this process: who decided, when the caller does not say."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


async def resolve_operation(
    store: UncertainStore,
    operation_id: uuid.UUID | str,
    decision: str,
    *,
    result: Any = None,
    error: str | None = None,
    note: str | None = None,
    decided_by: str | None = None,
    expected_attempt: int | None = None,
) -> Any:
    """Apply a decision to an uncertain operation (the client, CLI and reconciler path).

    Builds the history events (``OperationResolved`` then ``ActivityCompleted`` /
    ``ActivityFailed``) and calls ``store.resolve_uncertain``, which records the
    decision on the operation, appends them, resumes the execution and schedules
    its workflow task in one transaction.

    Args:
        operation_id: the operation job id.
        decision: "complete", "fail" or "retry".
        result: for complete: the value the activity would have returned.
        error: for fail: the message the workflow's ActivityError carries.
        note: why (kept in history and on the operation).
        decided_by: who (default: ``user@host``). NUL and lone surrogates in
            either are recorded escaped, like every reason.
        expected_attempt: refuse (ConflictError) when the operation turned
            uncertain again at another attempt meanwhile.

    Returns:
        ``ResolvedOperation(workflow_id, workflow_name)``.

    Raises:
        ValueError: unknown decision.
        NotFoundError: no such operation, or it is not uncertain.
        ConflictError: already resolved (by a concurrent resolver, too).
        PayloadEncodeError: ``result`` is not JSON-encodable.
    """
    if decision not in ("complete", "fail", "retry"):
        raise ValueError(f"unknown decision {decision!r}; use complete, fail or retry")
    op_id = operation_id if isinstance(operation_id, uuid.UUID) else uuid.UUID(str(operation_id))
    op = await store.get_operation(op_id)
    # free text, escaped like every recorded reason (NUL, lone surrogates)
    by = clean_text(decided_by if decided_by is not None else default_decider())
    note = clean_text(note) if note else note
    data = encode_value(result, "uncertain operation result") if decision == "complete" else None
    if decision == "fail" and not error:
        error = f"resolved as failed by {by or 'an unnamed resolver'}"
    resolved, outcome = resolution_events(
        seq_of_execution_key(op.execution_key),
        decision,
        result=data,
        error=error,
        decided_by=by,
        note=note or "",
    )
    return await store.resolve_uncertain(
        op_id,
        decision,
        data,
        error,
        note,
        by,
        resolved_event=resolved,
        outcome_event=outcome,
        expected_attempt=expected_attempt,
    )


# --- reconcile hooks ---------------------------------------------------------------------


#: Uncertain episodes a Reconciler remembers having asked (oldest forgotten first).
_ASKED_MAX = 10_000


class Reconciler:
    """Calls the ``reconcile=`` hooks of uncertain operations and applies their verdicts.

    Runs in two places (both safe to race: the store fences every write):

    * inline, in the worker that marked an operation uncertain (the activity
      raised ``Uncertain`` or overran ``start_to_close``) — :meth:`reconcile_id`;
    * on the leader's maintenance tick — :meth:`run_once` — for operations the
      reaper parked after a lost lease, and any the inline path missed (crash).

    Each uncertain attempt gets one verdict: a decision (complete / fail /
    retry, recorded by ``resolve_uncertain`` with ``decided_by="reconcile hook
    <activity>"``) or, for ``unknown`` and hook errors/timeouts, a recorded
    verdict that leaves the operation for a person. A hook is called with
    ``(input, execution_key)``: ``input`` is the activity's argument (a tuple
    of them when it takes several, None when none) and should only *look up*
    the outcome — it may be called more than once if workers race.

    Args:
        store: the store.
        registry: activity definitions (their ``reconcile`` option).
        hook_timeout: a hook running longer counts as a hook error.
    """

    def __init__(
        self,
        store: UncertainStore,
        registry: Registry,
        *,
        hook_timeout: timedelta = timedelta(seconds=30),
    ) -> None:
        self.store = store
        self.registry = registry
        self.hook_timeout = hook_timeout.total_seconds()
        #: verdicts applied by this reconciler, for tests and metrics
        self.outcomes: list[str] = []
        # (operation, attempt) episodes this process is asking or has asked: the
        # inline path and the leader's tick share one Reconciler, so a hook is
        # never asked twice for one episode by one process (the store fences
        # writes across processes).
        self._asked: OrderedDict[tuple[uuid.UUID, int], None] = OrderedDict()

    def kinds(self) -> list[str]:
        """Operation kinds of this registry that declare a reconcile hook."""
        return [k for k, d in self.registry.activities.items() if d.options.reconcile]

    async def run_once(self, limit: int = 100) -> int:
        """Reconcile every uncertain operation (with a hook here) that has no verdict yet.

        Returns:
            How many were decided (complete / fail / retry).
        """
        kinds = self.kinds()
        if not kinds:
            return 0
        decided = 0
        for op in await self.store.list_unreconciled_operations(kinds, limit):
            if await self.reconcile(op) in ("complete", "fail", "retry"):
                decided += 1
        return decided

    async def reconcile_id(self, operation_id: uuid.UUID) -> str:
        """Reconcile one operation by id (the inline path). See :meth:`reconcile`."""
        op = await self.store.get_operation(operation_id)
        if op.state != "uncertain":
            return "not-uncertain"
        return await self.reconcile(op)

    async def reconcile(self, op: Any) -> str:
        """Ask ``op``'s hook and apply the verdict.

        Returns:
            "complete" / "fail" / "retry" (applied), "unknown" / "error" (left
            for a person), "no-hook", "lost" (someone else decided first), or
            "asked" (this reconciler already asks or asked the hook for this
            uncertain attempt).
        """
        defn = self.registry.activities.get(op.kind)
        hook = defn.options.reconcile if defn is not None else None
        if defn is None or hook is None:
            return "no-hook"
        episode = (op.job_id, op.attempt)
        if episode in self._asked:
            return "asked"
        self._asked[episode] = None
        if len(self._asked) > _ASKED_MAX:
            self._asked.popitem(last=False)
        try:
            return await self._ask(op, defn, hook)
        except BaseException:  # nothing durable recorded (e.g. the store failed): ask again later
            self._asked.pop(episode, None)
            raise

    async def _ask(self, op: Any, defn: Any, hook: Any) -> str:
        try:
            value = _hook_input(defn, op.input)
            async with asyncio.timeout(self.hook_timeout):
                if inspect.iscoroutinefunction(hook):
                    verdict = await hook(value, op.execution_key)
                else:
                    verdict = await asyncio.to_thread(hook, value, op.execution_key)
                    if inspect.isawaitable(verdict):
                        verdict = await verdict
            if not isinstance(verdict, Reconciled):
                raise TypeError(
                    f"reconcile hook returned {type(verdict).__name__}, not a Reconciled"
                )
        except Exception as exc:
            log.warning("reconcile hook of %s failed for %s: %r", op.kind, op.job_id, exc)
            return await self._leave(op, "error", f"hook raised {describe_error(exc)}")
        decision = verdict.decision
        if decision is None:
            return await self._leave(op, "unknown", verdict.note or "hook could not tell")
        try:
            await resolve_operation(
                self.store,
                op.job_id,
                decision,
                result=verdict.result,
                error=verdict.error or None,
                note=verdict.note or f"reconcile hook found: {verdict.outcome}",
                decided_by=f"reconcile hook {defn.name}",
                expected_attempt=op.attempt,
            )
        except (ConflictError, NotFoundError):
            self.outcomes.append("lost")
            return "lost"
        except Exception as exc:  # e.g. a result that cannot be encoded
            return await self._leave(op, "error", f"applying the verdict failed: {exc!r}")
        self.outcomes.append(decision)
        return decision

    async def _leave(self, op: Any, label: str, text: str) -> str:
        await self.store.record_reconcile_verdict(op.job_id, op.attempt, f"{label}: {text}")
        self.outcomes.append(label)
        return label


def _hook_input(defn: Any, payload: bytes) -> Any:
    """The activity argument(s) of an operation payload, decoded by annotation."""
    args = defn.decode_args(bytes(decode_operation(payload).input))
    if len(args) == 1:
        return args[0]
    return tuple(args) if args else None


class UncertainOperationView(msgspec.Struct, kw_only=True):
    """An operation waiting for a decision, as the client lists it.

    Attributes:
        operation_id: what ``resolve_uncertain`` takes.
        workflow_id / workflow_name: its execution.
        activity: activity name; ``kind`` is ``$op:<name>@<version>``.
        execution_key: ``<workflow_id>/<seq>``, the idempotency key to ask a provider with.
        input: the activity's arguments as a JSON array (bytes, as recorded).
        attempt: attempts made so far (the uncertain one included).
        since / reason: when and why it turned uncertain.
    """

    operation_id: uuid.UUID
    workflow_id: uuid.UUID
    workflow_name: str
    activity: str
    kind: str
    execution_key: str
    input: bytes
    attempt: int
    since: Any
    reason: str

    @classmethod
    def from_store(cls, op: Any) -> UncertainOperationView:
        """Build from the store's ``UncertainOperation`` (decodes the job payload)."""
        try:
            data = bytes(decode_operation(op.input).input)
        except (msgspec.DecodeError, msgspec.ValidationError):
            data = bytes(op.input)
        return cls(
            operation_id=op.job_id,
            workflow_id=op.workflow_id,
            workflow_name=op.workflow_name,
            activity=op.activity,
            kind=op.kind,
            execution_key=op.execution_key,
            input=data,
            attempt=op.attempt,
            since=op.since,
            reason=op.reason,
        )
