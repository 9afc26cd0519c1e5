"""Worker process for the paused-leader test: queue maintenance with a short
leadership TTL, run as ``azync-flow worker _leader_app:make``.

Environment: DSN, SCHEMA, TICK and TTL (seconds).
"""

from __future__ import annotations

import os
from datetime import timedelta

from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker


async def make() -> Worker:
    store = await open_store(os.environ["DSN"], Config(schema=os.environ["SCHEMA"]), migrate=False)
    worker = Worker(
        store,
        poll_interval=timedelta(milliseconds=200),
        maintenance_interval=timedelta(seconds=float(os.environ["TICK"])),
        leader_ttl=timedelta(seconds=float(os.environ["TTL"])),
    )

    @worker.register("noop")
    async def noop(payload: object) -> None:
        return None

    return worker
