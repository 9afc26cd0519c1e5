"""Worker process of test_transactional_kill: ``_transactional_kill_app.py DSN SCHEMA``.

A real Worker (lease 1.5 s) running ``txn_order`` workflows whose three steps are
``@transaction`` steps inserting one row each into the application table
``TABLE`` (no unique key: a doubled effect would show as a second row). Runs
until killed, printing "ready" once started.

Environment:
    TABLE       the application table (schema-qualified)
    KILL_POINT  where the process SIGKILLs itself, once, at its KILL_AFTER-th step:
                "before_sql"     in the step, before its INSERT
                "after_sql"      in the step, after its INSERT (transaction open)
                "before_commit"  the step returned; its outcome not written yet
                "after_commit"   the step's transaction committed
                ""               never
    KILL_AFTER  the step count that triggers the kill (default 5)
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from datetime import timedelta
from typing import Any

import asyncpg

from azync_flow import attach_workflows, current_activity, transaction, workflow
from azync_flow.errors import ActivityError
from azync_flow.retry import RetryPolicy
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext

TABLE = os.environ.get("TABLE", "ledger")
POINT = os.environ.get("KILL_POINT", "")
AFTER = int(os.environ.get("KILL_AFTER", "5"))
STEPS = 0
#: The operation whose step is the KILL_AFTER-th (steps run concurrently: the
#: hooks after the step recognise it by its job, not by the running count).
DOOMED: set[Any] = set()


def maybe_die(point: str, doomed: bool) -> None:
    if point == POINT and doomed:
        os.kill(os.getpid(), signal.SIGKILL)


@transaction(
    name="book", retry=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=10))
)
async def book(conn: asyncpg.Connection, order: int, step: int) -> str:
    global STEPS
    STEPS += 1
    doomed = STEPS == AFTER
    if doomed:
        DOOMED.add(current_activity().job.id)
    maybe_die("before_sql", doomed)
    await conn.execute(f"INSERT INTO {TABLE} (order_no, step) VALUES ($1, $2)", order, step)
    maybe_die("after_sql", doomed)
    if step == 3 and order % 20 == 0:
        raise ValueError(f"order {order} refuses step 3")  # rolled back, both attempts
    return f"{order}/{step}"


@workflow(name="txn_order")
async def txn_order(ctx: WorkflowContext, order: int) -> list[str]:
    done = [await book(order, 1), await book(order, 2)]
    try:
        done.append(await book(order, 3))
    except ActivityError:
        done.append("refused")
    return done


def install_faults(runtime: Any) -> None:
    def before_settle(job: Any, event_type: str) -> None:
        maybe_die("before_commit", job.id in DOOMED)

    def after_settle(job: Any, event_type: str) -> None:
        maybe_die("after_commit", job.id in DOOMED)

    runtime.activities.before_settle = before_settle
    runtime.activities.after_settle = after_settle


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
    worker = Worker(
        store,
        lease=timedelta(seconds=1.5),
        poll_interval=timedelta(milliseconds=100),
        maintenance_interval=timedelta(milliseconds=100),
        leader_ttl=timedelta(seconds=2),
        handle_signals=True,
    )
    install_faults(attach_workflows(worker, [txn_order], [book]))
    task = asyncio.create_task(worker.run())
    await worker.started()
    print("ready", flush=True)
    await task
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
