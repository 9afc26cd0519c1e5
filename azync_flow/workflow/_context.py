"""``WorkflowContext``: the deterministic stand-ins workflow code uses."""

from __future__ import annotations

import asyncio
import typing
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from azync_flow.replay.codec import decode_value, encode_value
from azync_flow.replay.engine import WorkflowInstance
from azync_flow.replay.events import SignalReceived
from azync_flow.replay.outcome import WorkflowInfo

__all__ = ["WorkflowContext"]

T = TypeVar("T")


def _seconds(duration: timedelta | float) -> float:
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


class WorkflowContext:
    """Passed as the first argument of every ``@workflow`` function.

    Everything here is deterministic: on replay it returns what the first run got.
    """

    def __init__(self, instance: WorkflowInstance) -> None:
        self._instance = instance

    @property
    def info(self) -> WorkflowInfo:
        """Execution id, workflow name, version and workflow-task attempt."""
        return self._instance.info

    @property
    def is_replaying(self) -> bool:
        """True while recorded history is being re-walked. Use only to skip
        side-effect-free work such as logging."""
        return self._instance.is_replaying

    def now(self) -> datetime:
        """Current time (UTC), recorded in history on first call and replayed after.

        Each call records one ``SideEffectRecorded`` event; the value is the
        backend (Postgres) time of the pass that first made the call.
        """
        return self._instance.now()

    def random(self) -> float:
        """A float in [0, 1) from a PRNG seeded by the execution id (same on replay)."""
        return self._instance.random()

    def uuid4(self) -> uuid.UUID:
        """A version-4 UUID from the seeded PRNG (same on replay)."""
        return self._instance.uuid4()

    def patched(self, patch_id: str) -> bool:
        """Version gate for changed code.

        Returns True for executions that reach this point with the new code
        (recording a ``PatchMarker``), False for executions that passed this
        point before the change (their history has no marker here). The answer
        for one ``patch_id`` is fixed for the rest of the execution.
        """
        return self._instance.patched(patch_id)

    def side_effect(self, fn: Callable[[], T], type: Any = Any) -> T:
        """Run ``fn`` once and record its result; replays return the recorded value.

        ``fn`` must be quick and must not fail; its result must be JSON-encodable.
        """
        raw = self._instance.side_effect("side_effect", lambda: encode_value(fn(), "side effect"))
        return typing.cast(T, decode_value(raw, type, "side effect"))

    async def sleep(self, duration: timedelta | float) -> None:
        """Durable timer: survives worker restarts. ``asyncio.sleep`` is equivalent.

        Args:
            duration: a ``timedelta`` or seconds. Zero or less just yields.
        """
        await asyncio.sleep(_seconds(duration))

    async def wait_signal(
        self,
        name: str,
        *,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109 - durable timeout, part of the API
        type: Any = Any,
    ) -> Any:
        """Wait for the next signal ``name`` and return its payload.

        A signal sent before the wait is buffered and returned at once; each
        signal is returned to exactly one wait, in arrival order. Waits for the
        same name are served first come, first served.

        Args:
            name: signal name.
            timeout: optional durable timeout (``timedelta`` or seconds).
            type: decode the payload to this type (unknown Struct fields ignored).

        Returns:
            The decoded payload.

        Raises:
            TimeoutError: (``asyncio.TimeoutError``) the timeout elapsed first; the
                signal, if it comes later, stays buffered for a later wait.
        """
        future = self._instance.add_signal_waiter(name)
        try:
            if timeout is None:
                event: SignalReceived = await future
            else:
                async with asyncio.timeout(_seconds(timeout)):
                    event = await future
        finally:
            self._instance.remove_signal_waiter(name, future)
        return decode_value(event.payload, type, f"payload of signal {name!r}")

    async def wait(
        self,
        aws: Iterable[Awaitable[Any]],
        *,
        return_when: str = asyncio.ALL_COMPLETED,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109
    ) -> tuple[list[asyncio.Future[Any]], list[asyncio.Future[Any]]]:
        """Deterministic ``asyncio.wait``: lists instead of sets.

        Returns:
            ``(done, pending)``: done in completion order, pending in argument order.
            Prefer this (or ``asyncio.gather``) over iterating ``asyncio.wait``'s sets.
        """
        tasks = [asyncio.ensure_future(a) for a in aws]
        order: list[asyncio.Future[Any]] = []
        for task in tasks:
            task.add_done_callback(order.append)
        await asyncio.wait(
            tasks,
            return_when=return_when,
            timeout=None if timeout is None else _seconds(timeout),
        )
        await asyncio.sleep(0)  # let the done callbacks run
        done = [t for t in order if t.done()]
        done += [t for t in tasks if t.done() and t not in done]
        return done, [t for t in tasks if not t.done()]
