"""The worker registry (migration 0018): what each running worker registers.

One row per worker process, written only by that worker — at start, by a
periodic refresh off the hot path, and at stop — so the registry never
makes two transactions wait on one row. A worker killed without stopping
leaves a row that stops counting once its expiry passes.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

from ._base import PgBase

__all__ = ["WorkerRegistryMixin"]


class WorkerRegistryMixin(PgBase):
    async def register_worker(
        self,
        worker_id: uuid.UUID,
        workflows: Sequence[str],
        ttl: timedelta,
        *,
        host: str = "",
        pid: int = 0,
    ) -> None:
        """Insert or refresh this worker's row: it runs ``workflows`` and counts
        as live for ``ttl`` from now (backend clock). Call it again before the
        ``ttl`` passes to stay live."""
        await self._fetch("worker_register", worker_id, host, pid, sorted(set(workflows)), ttl)

    async def unregister_worker(self, worker_id: uuid.UUID) -> None:
        """Remove this worker's row (it is stopping). No error when absent."""
        await self._fetch("worker_unregister", worker_id)

    async def live_workers_for_workflow(self, name: str) -> int:
        """How many live workers (expiry not passed) register workflow ``name``."""
        return int(await self._fetchval("worker_live_for_workflow", name))
