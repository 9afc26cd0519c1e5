"""Crash recovery: SIGKILL a worker right after the charge step, start a new one,
and the order completes with every completed activity executed exactly once.

    python samples/crash_recovery.py

1. starts an order workflow, then a worker in a subprocess that SIGKILLs itself
   the moment the ``charge_card`` completion has been committed (the runtime's
   fault point ``ActivityRunner.after_settle``);
2. starts a second worker process, sends ``approve`` and waits for the result;
3. counts the activity executions each worker appended to a ledger file and
   exits non-zero unless every activity ran exactly once.

Uses ``$AZYNC_DSN`` when set, else the embedded PostgreSQL (see quickstart.py).
Each run uses a fresh schema ``crash_<random>`` (dropped at the end) so executions
left over from other runs cannot interfere; set ``$AZYNC_SCHEMA`` to use (and keep)
a schema of your own. Only this order's activity executions are counted, and
worker 1 kills itself only after *this* execution's ``charge_card`` commits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from order import Order, make_worker, order_workflow

from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.replay import ActivityScheduled
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.queue import Job
from azync_flow.store.workflows import WorkflowState
from azync_flow.testing import drop_schema

#: Short leases: a job the killed worker had just leased is re-run within ~LEASE.
LEASE = timedelta(seconds=2)
#: Upper bound for each wait (worker exit, workflow result).
TIMEOUT_S = 60.0


async def worker_process(dsn: str, schema: str, execution: uuid.UUID, kill_after: str) -> None:
    """Body of a worker subprocess: run until ``execution`` is finished (or get killed)."""
    store = await open_store(dsn, Config(schema=schema), migrate=False)

    def fault(job: Job, event_type: str) -> None:
        # Only THIS execution's activity: other executions in the schema never trigger it.
        if kill_after and job.run_id == execution and job.kind.startswith(f"$op:{kill_after}@"):
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no lease release, no ack

    try:
        async with make_worker(store, lease=LEASE, after_settle=fault):
            while True:
                view = await store.get_workflow_execution(execution)
                if view.state not in (WorkflowState.RUNNING, WorkflowState.SUSPENDED):
                    return
                await asyncio.sleep(0.1)
    finally:
        await store.close()


async def spawn_worker(
    dsn: str, schema: str, execution: uuid.UUID, ledger: Path, kill_after: str = ""
) -> Any:
    args = [__file__, "--worker", str(execution), "--kill-after", kill_after]
    env = {**os.environ, "AZYNC_DSN": dsn, "AZYNC_SCHEMA": schema, "ORDER_LEDGER": str(ledger)}
    return await asyncio.create_subprocess_exec(sys.executable, *args, env=env)


async def stop(proc: Any) -> None:
    """Kill a worker subprocess that is still running and reap it (no orphans)."""
    if proc is not None and proc.returncode is None:
        proc.kill()
        await proc.wait()


def ledger_counts(ledger: Path, order_id: str) -> Counter[str]:
    """Executions per activity of order ``order_id`` (lines are ``step order_id``)."""
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    return Counter(
        parts[0] for parts in map(str.split, lines) if len(parts) == 2 and parts[1] == order_id
    )


async def main() -> int:
    dsn, where = resolve_dsn()
    print(f"database:  {where}")
    own_schema = os.environ.get("AZYNC_SCHEMA", "")
    schema = own_schema or f"crash_{uuid.uuid4().hex[:12]}"
    print(f"schema:    {schema}{'' if own_schema else ' (fresh, dropped at the end)'}")
    store = await open_store(dsn, Config(schema=schema))  # migrates
    ledger = Path(tempfile.mkdtemp(prefix="azync_crash_")) / "ledger.txt"
    print(f"ledger:    {ledger}")
    client = Client(store)
    first = second = None
    try:
        order = Order(f"o-{uuid.uuid4().hex[:6]}", "sku-7", 1, 1999, "4242424242424242", 60.0)
        handle = await client.start(order_workflow, order)
        print(f"started:   order {order.id} as execution {handle.id}")

        first = await spawn_worker(dsn, schema, handle.id, ledger, kill_after="charge_card")
        print(f"worker 1:  pid {first.pid}, SIGKILLs itself once charge_card's completion commits")
        try:
            code = await asyncio.wait_for(first.wait(), TIMEOUT_S)
        except TimeoutError:
            print(f"worker 1 did not kill itself within {TIMEOUT_S:g}s")
            return 1
        if code != -signal.SIGKILL:
            print(f"worker 1 exited with {code}, expected SIGKILL")
            return 1
        history = await handle.history()
        if not history:
            print("worker 1:  killed, but the execution has no history yet: nothing to recover")
            return 1
        print(
            f"worker 1:  killed by SIGKILL; execution {(await handle.describe()).state}, "
            f"last event #{history[-1].seq} {history[-1].event.describe()}"
        )
        print(f"           ledger so far: {dict(ledger_counts(ledger, order.id))}")

        second = await spawn_worker(dsn, schema, handle.id, ledger)
        print(
            f"worker 2:  pid {second.pid} takes over (anything worker 1 still had leased "
            f"is re-run once its {LEASE.total_seconds():g}s lease expires)"
        )
        await handle.signal("approve", {"by": "crash_recovery"}, message_id=f"ok-{order.id}")
        print("signalled: approve")
        try:
            receipt = await handle.result(timeout=TIMEOUT_S)
            code = await asyncio.wait_for(second.wait(), TIMEOUT_S)
        except TimeoutError:
            print(f"order {order.id} did not finish within {TIMEOUT_S:g}s")
            return 1
        print(f"worker 2:  exited {code}")
        print(f"result:    {receipt.status}, {receipt.charge_id}, {receipt.tracking}")

        counts = ledger_counts(ledger, order.id)
        scheduled = [
            e.event.name for e in await handle.history() if isinstance(e.event, ActivityScheduled)
        ]
        print(f"\n  {'activity':<14} {'executions':>10}")
        print(f"  {'-' * 14} {'-' * 10}")
        for name in scheduled:
            print(f"  {name:<14} {counts[name]:>10}")
        once = bool(scheduled) and all(counts[n] == 1 for n in scheduled)
        once = once and counts.total() == len(scheduled)
        print(f"\nevery completed activity executed exactly once: {'yes' if once else 'NO'}")
        return 0 if once and receipt.status == "shipped" else 1
    finally:
        await stop(first)
        await stop(second)
        await client.close()
        await store.close()
        if not own_schema:
            await drop_schema(dsn, schema)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", type=uuid.UUID, help=argparse.SUPPRESS)
    parser.add_argument("--kill-after", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        dsn, schema = os.environ["AZYNC_DSN"], os.environ["AZYNC_SCHEMA"]
        asyncio.run(worker_process(dsn, schema, args.worker, args.kill_after))
    else:
        sys.exit(asyncio.run(main()))
