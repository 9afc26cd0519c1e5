"""Retry a store call that failed on a transient transaction conflict.

A deadlock (SQLSTATE 40P01) or serialization failure (40001) rolls the whole
transaction back, so the same call can simply be made again: its fences
(lease token, expected seq) still decide whether it may write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["TRANSIENT_SQLSTATES", "is_transient", "retry_transient"]

log = logging.getLogger("azync_flow.runtime")

T = TypeVar("T")

#: deadlock_detected, serialization_failure
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})


def is_transient(err: BaseException) -> bool:
    """True when ``err`` (or its cause) is a rolled-back transaction worth retrying."""
    seen: BaseException | None = err
    while seen is not None:
        if getattr(seen, "sqlstate", None) in TRANSIENT_SQLSTATES:
            return True
        seen = seen.__cause__
    return False


async def retry_transient(call: Callable[[], Awaitable[T]], attempts: int = 5) -> T:
    """Await ``call()``, repeating it (with a short growing pause) on transient errors."""
    pause = 0.005
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except Exception as err:
            if attempt == attempts or not is_transient(err):
                raise
            log.info("transient store error (attempt %d), retrying: %s", attempt, err)
            await asyncio.sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")
