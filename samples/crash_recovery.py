"""Crash recovery: SIGKILL a worker right after the charge step, start a new one,
and the order completes with every completed activity executed exactly once.

    python samples/crash_recovery.py

1. starts an order workflow, then a worker in a subprocess that SIGKILLs itself
   the moment the ``charge_card`` completion has been committed (the runtime's
   fault point ``ActivityRunner.after_settle``);
2. starts a second worker process, sends ``approve`` and waits for the result;
3. counts the activity executions each worker appended to a ledger file and
   exits non-zero unless every activity ran exactly once.

Uses ``$AZYNC_DSN`` when set, else the embedded PostgreSQL (see quickstart.py);
``$AZYNC_SCHEMA`` picks the schema.
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
from azync_flow.store import Config, Job, WorkflowState
from azync_flow.store.postgres import open_store

SCHEMA = os.environ.get("AZYNC_SCHEMA", "")
#: Short leases: a job the killed worker had just leased is re-run within ~LEASE.
LEASE = timedelta(seconds=2)


async def worker_process(dsn: str, execution: uuid.UUID, kill_after: str) -> None:
    """Body of a worker subprocess: run until ``execution`` is finished (or get killed)."""
    store = await open_store(dsn, Config(schema=SCHEMA), migrate=False)

    def fault(job: Job, event_type: str) -> None:
        if kill_after and job.kind.startswith(f"$op:{kill_after}@"):
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


async def spawn_worker(dsn: str, execution: uuid.UUID, ledger: Path, kill_after: str = "") -> Any:
    args = [__file__, "--worker", str(execution), "--kill-after", kill_after]
    env = {**os.environ, "AZYNC_DSN": dsn, "ORDER_LEDGER": str(ledger)}
    return await asyncio.create_subprocess_exec(sys.executable, *args, env=env)


def ledger_counts(ledger: Path) -> Counter[str]:
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    return Counter(line.split()[0] for line in lines)


async def main() -> int:
    dsn, where = resolve_dsn()
    print(f"database:  {where}")
    store = await open_store(dsn, Config(schema=SCHEMA))  # migrates
    ledger = Path(tempfile.mkdtemp(prefix="azync_crash_")) / "ledger.txt"
    print(f"ledger:    {ledger}")
    client = Client(store)
    try:
        order = Order(f"o-{uuid.uuid4().hex[:6]}", "sku-7", 1, 1999, "4242424242424242", 60.0)
        handle = await client.start(order_workflow, order)
        print(f"started:   order {order.id} as execution {handle.id}")

        first = await spawn_worker(dsn, handle.id, ledger, kill_after="charge_card")
        print(f"worker 1:  pid {first.pid}, SIGKILLs itself once charge_card's completion commits")
        code = await asyncio.wait_for(first.wait(), 60)
        if code != -signal.SIGKILL:
            print(f"worker 1 exited with {code}, expected SIGKILL")
            return 1
        history = await handle.history()
        print(
            f"worker 1:  killed by SIGKILL; execution {(await handle.describe()).state}, "
            f"last event #{history[-1].seq} {history[-1].event.describe()}"
        )
        print(f"           ledger so far: {dict(ledger_counts(ledger))}")

        second = await spawn_worker(dsn, handle.id, ledger)
        print(
            f"worker 2:  pid {second.pid} takes over (anything worker 1 still had leased "
            f"is re-run once its {LEASE.total_seconds():g}s lease expires)"
        )
        await handle.signal("approve", {"by": "crash_recovery"}, message_id=f"ok-{order.id}")
        print("signalled: approve")
        receipt = await handle.result(timeout=60)
        code = await asyncio.wait_for(second.wait(), 60)
        print(f"worker 2:  exited {code}")
        print(f"result:    {receipt.status}, {receipt.charge_id}, {receipt.tracking}")

        counts = ledger_counts(ledger)
        scheduled = [
            e.event.name for e in await handle.history() if isinstance(e.event, ActivityScheduled)
        ]
        print(f"\n  {'activity':<14} {'executions':>10}")
        print(f"  {'-' * 14} {'-' * 10}")
        for name in scheduled:
            print(f"  {name:<14} {counts[name]:>10}")
        once = all(counts[n] == 1 for n in scheduled) and counts.total() == len(scheduled)
        print(f"\nevery completed activity executed exactly once: {'yes' if once else 'NO'}")
        return 0 if once and receipt.status == "shipped" else 1
    finally:
        await client.close()
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", type=uuid.UUID, help=argparse.SUPPRESS)
    parser.add_argument("--kill-after", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(worker_process(os.environ["AZYNC_DSN"], args.worker, args.kill_after))
    else:
        sys.exit(asyncio.run(main()))
