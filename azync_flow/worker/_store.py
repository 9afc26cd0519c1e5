"""The slice of the storage contract the worker runtime uses.

The worker sees the store only through this Protocol (a subset of the
contract's ``Store``, ``Notifier`` and ``LeaseElector``), never through the
Postgres driver, so any driver that implements these verbs can be worked.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

from ..store.leadership import LeadershipLease
from ..store.queue import DequeueParams, Job, Source, Wake


@runtime_checkable
class WorkerStore(Protocol):
    """Verbs a :class:`~azync_flow.worker.Worker` calls (contract names, snake_case)."""

    async def dequeue_batch(self, source: Source, p: DequeueParams) -> list[Job]: ...

    async def ack(self, id: uuid.UUID, lease_token: uuid.UUID) -> None: ...

    async def ack_many(self, items: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> set[uuid.UUID]: ...

    async def reschedule(
        self, id: uuid.UUID, lease_token: uuid.UUID, delay: timedelta, last_error: str
    ) -> None: ...

    async def dead(self, id: uuid.UUID, lease_token: uuid.UUID, last_error: str) -> None: ...

    async def snooze(
        self, id: uuid.UUID, lease_token: uuid.UUID, delay: timedelta, deadline_error: str
    ) -> bool: ...

    async def skip(self, id: uuid.UUID, lease_token: uuid.UUID, reason: str) -> None: ...

    async def release(self, id: uuid.UUID, lease_token: uuid.UUID) -> None: ...

    async def extend_lease(
        self, id: uuid.UUID, lease_token: uuid.UUID, lease: timedelta
    ) -> Any: ...

    async def promote_due(self, source: Source, kinds: Sequence[str] | None = None) -> int: ...

    async def reap_expired(
        self, source: Source, kinds: Sequence[str] | None = None, max_reaps: int = 5
    ) -> tuple[int, int]: ...

    async def vacuum_stats(self, source: Source, retention: timedelta) -> int: ...

    async def fold_stats(self, limit: int) -> int: ...

    async def vacuum_idempotency(self, source: Source) -> int: ...

    async def vacuum_completed(self, source: Source, retention: timedelta) -> int: ...

    async def wake(self) -> WakeStream | None: ...

    async def acquire_leadership_lease(
        self, name: str, ttl: timedelta
    ) -> LeadershipLease | None: ...


class WakeStream(Protocol):
    """Contract ``Notifier.Wake`` result: an async iterator of wakes that can be closed."""

    def __aiter__(self) -> AsyncIterator[Wake]: ...

    async def close(self) -> None: ...
