"""Uncertain operations on the worker: the event that parks one, and the
:class:`Reconciler` that calls ``reconcile=`` hooks and applies their verdicts
the way an operator's decision is applied. See docs/uncertain.md.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections import OrderedDict
from datetime import timedelta
from typing import Any

from azync_flow._decisions import resolve_operation
from azync_flow._operations import decode_operation, seq_of_execution_key
from azync_flow._text import clean_text
from azync_flow._workflow.definitions import Registry
from azync_flow._workflow.reconcile import Reconciled
from azync_flow.errors import ConflictError, DecisionError, NotFoundError
from azync_flow.replay.events import OperationUncertain, encode_event
from azync_flow.retry import describe_error
from azync_flow.store.queue import Job
from azync_flow.store.workflows import UncertainStore
from azync_flow.telemetry import RunEvent, RunTracer

__all__ = ["Reconciler", "uncertain_event"]

log = logging.getLogger("azync_flow.uncertain")


def uncertain_event(job: Job, reason: str) -> tuple[str, bytes]:
    """``(type, payload)`` of the OperationUncertain event for ``job``.

    Usable as the ``encode`` callback of ``store.reap_uncertain_operations``.
    """
    if job.payload is not None:
        seq = decode_operation(job.payload).seq
    else:
        seq = seq_of_execution_key(job.task_key)
    return encode_event(OperationUncertain(scheduled_seq=seq, reason=clean_text(reason)))


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
        tracer: where the ``uncertain.resolved <activity>`` span of each
            applied decision goes (default: the global tracer provider), as
            for a decision taken through the client.
    """

    def __init__(
        self,
        store: UncertainStore,
        registry: Registry,
        *,
        hook_timeout: timedelta = timedelta(seconds=30),
        tracer: RunTracer | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.tracer = tracer or RunTracer()
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
        except DecisionError as exc:  # nothing written: still uncertain, for a new decision
            return await self._leave(
                op,
                "error",
                f"the hook's result {exc.given} did not fit the result type "
                f"{exc.expected} ({exc.problem}); decide again",
            )
        except Exception as exc:  # e.g. a result that cannot be encoded
            return await self._leave(op, "error", f"applying the verdict failed: {exc!r}")
        self.outcomes.append(decision)
        # the run event on the run's trace; it also counts the resolution (metric)
        self.tracer.run_event(
            op.meta,
            RunEvent.UNCERTAIN_RESOLVED,
            run_id=op.workflow_id,
            subject=defn.name,
            attributes={
                "azync.resolution": decision,
                "azync.seq": seq_of_execution_key(op.execution_key),
            },
        )
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
