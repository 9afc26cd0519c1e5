"""The deterministic asyncio event loop that runs workflow code during a pass.

It implements just enough of :class:`asyncio.AbstractEventLoop` for tasks,
futures, ``gather``, ``wait``, ``timeout`` and cancellation:

* ``call_soon`` appends to a FIFO ready queue; :meth:`DeterministicLoop.run_until_quiet`
  runs it until empty. No I/O selector, no threads: the order of callbacks
  depends only on the order of inputs, so the same history yields the same run.
* ``call_later``/``call_at`` with a positive delay start a *durable timer*
  through the host (the replay engine), which records ``TimerStarted`` and
  later fires the handle when ``TimerFired`` is delivered. ``asyncio.sleep``,
  ``asyncio.timeout`` and ``asyncio.wait_for`` are therefore durable.
* ``time()`` is virtual workflow time in seconds: it starts at 0 and moves to a
  timer's deadline when that timer fires.
* Tasks and futures hash by creation number, so the sets ``asyncio.wait``
  returns iterate in the same order in every process and on every replay.
* Every I/O, executor, subprocess and signal-handler method raises
  :class:`~azync_flow.errors.ForbiddenCallError` naming the call.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import threading
import typing
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from azync_flow.errors import ForbiddenCallError
from azync_flow.replay import guard

__all__ = ["DeterministicLoop", "DurableTimerHandle", "TimerHost"]


class TimerHost(Protocol):
    """What the loop needs from the engine for durable timers and forbidden calls."""

    def start_timer(self, handle: DurableTimerHandle, delay: float) -> None: ...

    def cancel_timer(self, handle: DurableTimerHandle) -> None: ...

    def forbidden(self, error: ForbiddenCallError) -> None: ...


class DurableTimerHandle(asyncio.TimerHandle):
    """A ``TimerHandle`` backed by a durable timer; ``seq`` is its TimerStarted seq."""

    seq: int = 0
    fired: bool = False


class _OrderedTask(asyncio.Task[Any]):
    """A task whose hash is its creation number on the loop, not its address.

    ``asyncio.wait`` returns *sets*; with address-based hashes their iteration
    order differs between processes (and between replays), so code looping over
    ``done`` would issue commands in a different order on replay.
    Creation order is deterministic, so the set order is too.
    """

    def __init__(
        self,
        coro: Any,
        *,
        loop: asyncio.AbstractEventLoop,
        order: int,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> None:
        self._order = order  # before Task.__init__, which hashes the task to register it
        super().__init__(coro, loop=loop, name=name, context=context)

    def __hash__(self) -> int:
        return self._order


class _OrderedFuture(asyncio.Future[Any]):
    """A future hashed by creation number (see :class:`_OrderedTask`)."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop, order: int) -> None:
        self._order = order
        super().__init__(loop=loop)

    def __hash__(self) -> int:
        return self._order


class DeterministicLoop(asyncio.AbstractEventLoop):
    """A single-threaded, I/O-free loop driven explicitly by the replay engine."""

    def __init__(self, host: TimerHost) -> None:
        self._host = host
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._time = 0.0
        self._closed = False
        self._running = False
        self._thread_id: int | None = None
        self._exception_handler: Any = None
        self._task_factory: Any = None
        self._debug = False
        self._created = 0  # tasks and futures created, for their deterministic hashes
        self._tasks: list[asyncio.Task[Any]] = []
        self._prune_at = 64
        #: Unhandled-exception contexts reported by tasks/handles (for diagnostics).
        self.unhandled: list[dict[str, Any]] = []
        self.stopped = False

    # --- driving ---------------------------------------------------------------

    def run_until_quiet(self) -> None:
        """Run ready callbacks (FIFO) until none remain or :meth:`halt` was called.

        Installs this loop as the running loop of the current thread for the
        duration, restoring the previous one (the worker's loop) afterwards.
        """
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        self._running = True
        self._thread_id = threading.get_ident()
        guard.enter(self._host.forbidden)
        try:
            while self._ready and not self.stopped:
                handle = self._ready.popleft()
                if not handle._cancelled:
                    handle._run()
        finally:
            guard.exit()
            self._running = False
            asyncio.events._set_running_loop(previous)

    def run_callable(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` with this loop installed as the running loop (no tasks stepped)."""
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        guard.enter(self._host.forbidden)
        try:
            fn()
        finally:
            guard.exit()
            asyncio.events._set_running_loop(previous)

    def halt(self) -> None:
        """Stop running callbacks now (the pass is abandoned)."""
        self.stopped = True

    def advance_time(self, when: float) -> None:
        """Move virtual time forward to ``when`` (never backwards)."""
        self._time = max(self._time, when)

    # --- scheduling -------------------------------------------------------------

    def time(self) -> float:
        return self._time

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_at(self._time + delay, callback, *args, context=context)

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        handle = DurableTimerHandle(when, callback, args, self, context)
        delay = when - self._time
        if delay <= 0:
            handle.fired = True
            self._ready.append(handle)
        else:
            self._host.start_timer(handle, delay)
        return handle

    def fire_timer(self, handle: DurableTimerHandle) -> None:
        """Deliver a fired durable timer: advance time, queue its callback."""
        handle.fired = True
        self.advance_time(handle.when())
        if not handle._cancelled:
            self._ready.append(handle)

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        if isinstance(handle, DurableTimerHandle) and not handle.fired:
            self._host.cancel_timer(handle)

    def call_soon_threadsafe(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: Any = None
    ) -> asyncio.Handle:
        if self._thread_id is not None and threading.get_ident() != self._thread_id:
            self._forbid("loop.call_soon_threadsafe from another thread")
        return self.call_soon(callback, *args, context=context)

    # --- futures and tasks --------------------------------------------------------

    def _next_order(self) -> int:
        self._created += 1
        return self._created

    def create_future(self) -> asyncio.Future[Any]:
        return _OrderedFuture(loop=self, order=self._next_order())

    def create_task(
        self,
        coro: Coroutine[Any, Any, Any] | Any,
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        if self._task_factory is not None:
            task = typing.cast(asyncio.Task[Any], self._task_factory(self, coro))
            if name is not None:
                task.set_name(name)
        else:
            task = _OrderedTask(
                coro, loop=self, order=self._next_order(), name=name, context=context
            )
        self._tasks.append(task)
        if len(self._tasks) >= self._prune_at:  # amortised: a long run keeps no dead tasks
            self._tasks = [t for t in self._tasks if not t.done()]
            self._prune_at = max(64, 2 * len(self._tasks))
        return task

    def live_tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks of this loop not yet done, in creation order (what
        ``asyncio.all_tasks(loop)`` answers, without scanning every task of the
        process)."""
        self._tasks = [t for t in self._tasks if not t.done()]
        return list(self._tasks)

    def set_task_factory(self, factory: Any) -> None:
        self._task_factory = factory

    def get_task_factory(self) -> Any:
        return self._task_factory

    # --- state ----------------------------------------------------------------------

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._ready.clear()

    def stop(self) -> None:
        self.halt()

    def get_debug(self) -> bool:
        return self._debug

    def set_debug(self, enabled: bool) -> None:
        self._debug = enabled

    # --- errors -------------------------------------------------------------------------

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        if self._exception_handler is not None:
            self._exception_handler(self, context)
            return
        self.unhandled.append(context)

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.unhandled.append(context)

    def set_exception_handler(self, handler: Any) -> None:
        self._exception_handler = handler

    def get_exception_handler(self) -> Any:
        return self._exception_handler

    # --- forbidden --------------------------------------------------------------------------

    def _forbid(self, call: str) -> Any:
        error = ForbiddenCallError(
            call,
            "workflow code must not do I/O or use threads; move it into an @activity",
        )
        self._host.forbidden(error)
        raise error

    def run_forever(self) -> None:
        self._forbid("loop.run_forever")

    def run_until_complete(self, future: Any) -> Any:
        return self._forbid("loop.run_until_complete")

    async def shutdown_asyncgens(self) -> None:
        return None

    async def shutdown_default_executor(self) -> None:
        return None


_FORBIDDEN = (
    "run_in_executor",
    "set_default_executor",
    "getaddrinfo",
    "getnameinfo",
    "create_connection",
    "create_server",
    "create_unix_connection",
    "create_unix_server",
    "create_datagram_endpoint",
    "connect_accepted_socket",
    "connect_read_pipe",
    "connect_write_pipe",
    "sendfile",
    "start_tls",
    "subprocess_exec",
    "subprocess_shell",
    "add_reader",
    "remove_reader",
    "add_writer",
    "remove_writer",
    "sock_recv",
    "sock_recv_into",
    "sock_recvfrom",
    "sock_recvfrom_into",
    "sock_sendall",
    "sock_sendto",
    "sock_sendfile",
    "sock_connect",
    "sock_accept",
    "add_signal_handler",
    "remove_signal_handler",
)


def _make_forbidden(name: str) -> Callable[..., Any]:
    def forbidden(self: DeterministicLoop, *args: Any, **kwargs: Any) -> Any:
        return self._forbid(f"loop.{name}")

    forbidden.__name__ = name
    return forbidden


for _name in _FORBIDDEN:
    setattr(DeterministicLoop, _name, _make_forbidden(_name))
