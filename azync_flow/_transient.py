"""Retry a store call that failed on a transient transaction conflict or outage.

A deadlock (SQLSTATE 40P01) or serialization failure (40001) rolls the whole
transaction back, so the same call can simply be made again: its fences
(lease token, expected seq) still decide whether it may write. The same holds
for a database that is briefly unreachable (a restart, a failover): the
outcome of a finished activity or pass is still known here, so its report is
repeated until the server is back instead of being left to lease expiry
(where a non-idempotent activity's outcome would become uncertain). A report
whose first try did commit is refused by its fence on the repeat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from azync_flow.errors import StoreUnavailableError

__all__ = [
    "MAX_CONFLICT_RERUNS",
    "TRANSIENT_SQLSTATES",
    "UNAVAILABLE_BUDGET",
    "is_transient",
    "retry_transient",
]

log = logging.getLogger("azync_flow.runtime")

T = TypeVar("T")

#: deadlock_detected, serialization_failure
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})

#: Re-runs of one transactional attempt (a step, a delivery, a DAG task) after
#: serialization failures or deadlocks before the conflict counts as the
#: attempt's failure (then its retry policy decides).
MAX_CONFLICT_RERUNS = 50

#: How long a report is repeated while the database is unreachable, in seconds
#: (the caller's lease usually ends it first: a lost lease cancels the runner).
UNAVAILABLE_BUDGET = 60.0


def is_transient(err: BaseException) -> bool:
    """True when ``err`` (or its cause) is a rolled-back transaction worth retrying."""
    seen: BaseException | None = err
    while seen is not None:
        if getattr(seen, "sqlstate", None) in TRANSIENT_SQLSTATES:
            return True
        seen = seen.__cause__
    return False


async def retry_transient(call: Callable[[], Awaitable[T]], attempts: int = 5) -> T:
    """Await ``call()``, repeating it (with a short growing pause) on transient errors.

    Args:
        call: the store call; it must be fenced (safe to repeat).
        attempts: tries on transaction conflicts. An unreachable database
            (``StoreUnavailableError``) is retried apart from them, with
            pauses growing to 1 s, for up to :data:`UNAVAILABLE_BUDGET` seconds.

    Raises:
        Exception: the last error once the tries or the budget are spent, or
            at once any other error.
    """
    pause = 0.005
    attempt = 0
    outage_pause = 0.05
    outage_deadline: float | None = None
    while True:
        try:
            return await call()
        except StoreUnavailableError:
            now = time.monotonic()
            if outage_deadline is None:
                outage_deadline = now + UNAVAILABLE_BUDGET
            if now >= outage_deadline:
                raise
            await asyncio.sleep(outage_pause)
            outage_pause = min(outage_pause * 2, 1.0)
        except Exception as err:
            attempt += 1
            if attempt >= attempts or not is_transient(err):
                raise
            log.info("transient store error (attempt %d), retrying: %s", attempt, err)
            await asyncio.sleep(pause)
            pause *= 2
