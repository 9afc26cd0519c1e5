"""Process-wide tripwires for calls that break determinism inside workflow code.

While a pass runs workflow code (:func:`active` is True on that thread),
``time.time``, ``time.time_ns``, ``time.monotonic(_ns)``,
``time.perf_counter(_ns)``, ``time.sleep``, the module-level ``random``
functions (``random.random``, ``randint``, ``choice``, ...) and
``threading.Thread.start`` raise :class:`~azync_flow.errors.ForbiddenCallError`. Outside passes, and
for callers in the ``logging`` package (log records carry a timestamp), the
original functions run unchanged. Functions imported by name before the
guard was installed (``from time import time``) and ``datetime.now()`` cannot
be intercepted; the docs tell users to use ``ctx.now()``.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from azync_flow.errors import ForbiddenCallError

__all__ = ["active", "enter", "exit", "install"]

_state = threading.local()
_installed = False
_ALLOWED_CALLERS = ("logging", "azync_flow.replay", "opentelemetry", "_pytest", "pytest")
_RANDOM_FUNCTIONS = (
    "random",
    "randint",
    "randrange",
    "uniform",
    "choice",
    "choices",
    "shuffle",
    "sample",
    "getrandbits",
)
_on_violation: list[Callable[[ForbiddenCallError], None]] = []


def active() -> bool:
    """Return True while workflow code runs on this thread."""
    return getattr(_state, "depth", 0) > 0


def enter(on_violation: Callable[[ForbiddenCallError], None]) -> None:
    """Mark this thread as running workflow code; ``on_violation`` records a violation."""
    _state.depth = getattr(_state, "depth", 0) + 1
    stack = getattr(_state, "handlers", [])
    stack.append(on_violation)
    _state.handlers = stack


def exit() -> None:
    """Undo the matching :func:`enter`."""
    _state.depth -= 1
    _state.handlers.pop()


def _violation(call: str, hint: str) -> ForbiddenCallError:
    error = ForbiddenCallError(call, hint)
    handlers = getattr(_state, "handlers", [])
    if handlers:
        handlers[-1](error)
    return error


def _caller_allowed() -> bool:
    frame = sys._getframe(2)
    module = frame.f_globals.get("__name__", "")
    return bool(module.startswith(_ALLOWED_CALLERS))


def _wrap(original: Callable[..., Any], call: str, hint: str) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if active() and not _caller_allowed():
            raise _violation(call, hint)
        return original(*args, **kwargs)

    guarded.__name__ = getattr(original, "__name__", call)
    guarded.__doc__ = getattr(original, "__doc__", None)
    guarded.__wrapped__ = original  # type: ignore[attr-defined]
    return guarded


def install() -> None:
    """Install the tripwires once per process (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    clock_hint = "use ctx.now() for the time (durable timers: ctx.sleep())"
    time.time = _wrap(time.time, "time.time()", clock_hint)
    time.time_ns = _wrap(time.time_ns, "time.time_ns()", clock_hint)
    time.sleep = _wrap(time.sleep, "time.sleep()", "use ctx.sleep() or asyncio.sleep()")
    # Monotonic clocks: asyncio's real loop reads time.monotonic() too, but it
    # never runs while a pass is active on this thread (passes are synchronous,
    # and the deterministic loop keeps its own virtual time()).
    for name in ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"):
        setattr(time, name, _wrap(getattr(time, name), f"time.{name}()", clock_hint))
    # The module-level PRNG (a hidden Random instance): ctx.random() / ctx.rng
    # give the same sequence on every replay.
    random_hint = "use ctx.random() or ctx.rng (seeded, the same on every replay)"
    for name in _RANDOM_FUNCTIONS:
        setattr(random, name, _wrap(getattr(random, name), f"random.{name}()", random_hint))
    threading.Thread.start = _wrap(  # type: ignore[method-assign]
        threading.Thread.start, "threading.Thread.start()", "move the work into an @activity"
    )
