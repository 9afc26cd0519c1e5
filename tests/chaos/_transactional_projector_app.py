"""Worker process of test_transactional_kill's subscriber test:
``_transactional_projector_app.py DSN SCHEMA``.

A real Worker (lease 1.5 s) running the transactional subscriber ``projector``,
which inserts one row per ``order.placed`` event into the application table
``TABLE`` (no unique key: a doubled effect would show as a second row). Runs
until killed, printing "ready" once started.

Environment:
    TABLE       the application table (schema-qualified)
    KILL_POINT  where the process SIGKILLs itself, once, at its KILL_AFTER-th delivery:
                "before_sql"    in the handler, before its INSERT
                "after_sql"     in the handler, after its INSERT (transaction open)
                "after_commit"  the delivery's transaction (INSERT + ack) committed
                ""              never
    KILL_AFTER  the delivery count that triggers the kill (default 5)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import uuid
from datetime import timedelta
from typing import Any

from azync_flow import attach_subscribers
from azync_flow.events import EventContext, _delivery, subscriber
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker

TABLE = os.environ.get("TABLE", "projection")
POINT = os.environ.get("KILL_POINT", "")
AFTER = int(os.environ.get("KILL_AFTER", "5"))
SEEN = 0
DOOMED: set[uuid.UUID] = set()


def maybe_die(point: str, doomed: bool) -> None:
    if point == POINT and doomed:
        os.kill(os.getpid(), signal.SIGKILL)


@subscriber("order.placed", name="projector", transactional=True, lease=timedelta(seconds=1.5))
async def projector(payload: dict[str, int], ctx: EventContext) -> None:
    global SEEN
    SEEN += 1
    doomed = SEEN == AFTER
    if doomed:
        DOOMED.add(ctx.id)
    maybe_die("before_sql", doomed)
    await ctx.connection.execute(
        f"INSERT INTO {TABLE} (event_id, n) VALUES ($1, $2)", ctx.event_id, payload["n"]
    )
    maybe_die("after_sql", doomed)


def install_after_commit() -> None:
    """The ``after_commit`` point: the runner's ack step, reached once the
    delivery's transaction (the INSERT and the ack) committed."""
    runner_type: Any = _delivery.EventRunner
    acked = runner_type._ack

    async def ack(self: Any, job: Any, lease: Any) -> None:
        maybe_die("after_commit", job.id in DOOMED)
        await acked(self, job, lease)

    runner_type._ack = ack


def exit_with_parent() -> None:
    """Exit when the test process goes away (its end of our stdin closes), so a
    test stopped by its timeout leaves no worker behind."""

    def watch() -> None:
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


async def main(dsn: str, schema: str) -> None:
    exit_with_parent()
    store = await open_store(dsn, Config(schema=schema), migrate=False)
    install_after_commit()
    worker = Worker(
        store,
        lease=timedelta(seconds=1.5),
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        leader_ttl=timedelta(seconds=2),
        handle_signals=True,
    )
    await attach_subscribers(worker, [projector]).register()
    task = asyncio.create_task(worker.run())
    await worker.started()
    print("ready", flush=True)
    await task
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
