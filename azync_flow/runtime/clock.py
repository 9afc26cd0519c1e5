"""The backend clock as the runtime last saw it, for passes run without a load."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from azync_flow.store.workflows import WorkflowRuntimeStore

__all__ = ["BackendClock"]


class BackendClock:
    """Estimates the backend clock between round trips.

    A pass run in memory (no load) still needs a ``now`` for ``ctx.now()``:
    the store's clock override when one is set (tests), else the last backend
    time observed (a load or a commit) plus the local monotonic time elapsed
    since. The value is recorded in history, so replays never re-read it.
    """

    def __init__(self, store: WorkflowRuntimeStore) -> None:
        self._store = store
        self._seen: datetime | None = None
        self._at = 0.0

    def observe(self, backend_now: datetime | None) -> None:
        """Record a backend time just read (None: nothing learned)."""
        if backend_now is not None:
            self._seen = backend_now
            self._at = time.monotonic()

    def now(self) -> datetime | None:
        """The estimated backend time, or None before any was observed."""
        override = self._store.now()
        if override is not None:
            return override
        if self._seen is None:
            return None
        return self._seen + timedelta(seconds=time.monotonic() - self._at)
