"""Durable timer lateness: how long after its due time a ``ctx.sleep`` fires.

    python bench/timers.py [--timers 200] [--sleep-ms 200] [--poll-ms 1000] [--rounds 3]
        [--rate 100] [--dsn DSN]

DSN: ``--dsn``, else ``$AZYNC_DSN``. The bench creates database
``azb_<pid>_timers`` on that server and drops it at its end.

Each round starts one real ``Worker`` (workflow runtime attached, poll interval
``--poll-ms``, so a timer found only by polling shows up as up to that late),
starts ``--timers`` workflows that each sleep ``--sleep-ms`` then return, and
waits for all. Each round runs two ways: *paced*, ``--rate`` starts per second
(timers come due while the worker has spare capacity: this is the timer's own
precision), and *burst*, every start as fast as the client can issue it (the
timers come due while the worker is still running the first passes of the
later starts, so on a small machine the tail is queueing behind that work).
The client has its own pool, as a client process would (a hundred result()
waits sharing the worker's pool queue its leases behind them).
Lateness is read on the database clock, from the timer's due
time (``fire_at``) to the lease of the workflow task that fires it ("wake":
when the workflow is woken) and to the commit of that pass ("commit": wake
plus the pass's run and commit). Prints p50 / p99 / max of each, in ms, per
round and over all rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
from datetime import timedelta
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azync_flow import attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker
from azync_flow.workflow import WorkflowContext


@workflow(name="bench_timer_sleep")
async def sleeper(ctx: WorkflowContext, ms: int) -> int:
    await ctx.sleep(timedelta(milliseconds=ms))
    return ms


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


_LATENESS = """
SELECT extract(epoch FROM (SELECT min(j.started_at) FROM azync_jobs j
                           WHERE j.run_id = t.workflow_id AND j.task_key = '$wft'
                             AND j.started_at >= t.fire_at) - t.fire_at)::float8 * 1000 AS wake,
       extract(epoch FROM t.fired_at - t.fire_at)::float8 * 1000 AS commit
FROM azync_workflow_timers t WHERE t.workflow_id = ANY($1::uuid[])
"""


async def _round(
    dsn: str, n: int, sleep_ms: int, poll_ms: int, rate: float
) -> list[tuple[float, float]]:
    store = await open_store(dsn, Config(), migrate=False)
    try:
        worker = Worker(
            store,
            poll_interval=timedelta(milliseconds=poll_ms),
            maintenance_interval=timedelta(milliseconds=poll_ms),
            shutdown_grace=timedelta(milliseconds=200),
            handle_signals=False,
        )
        attach_workflows(worker, [sleeper], [])
        # the client has a pool of its own, as a client process would: its
        # result() waits must not queue the worker's leases behind them
        client_store = await open_store(dsn, Config(), migrate=False)
        client = Client(client_store)
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(client_store.close)
            await stack.enter_async_context(worker)
            loop = asyncio.get_running_loop()
            began = loop.time()
            handles = []
            for i in range(n):
                if rate > 0:  # paced: the i-th start at i / rate seconds
                    await asyncio.sleep(max(0.0, began + i / rate - loop.time()))
                handles.append(await client.start(sleeper, sleep_ms))
            await asyncio.gather(*(h.result(timeout=120) for h in handles))
        rows = await store.pool.fetch(_LATENESS, [h.id for h in handles])
        return [(float(r["wake"]), float(r["commit"])) for r in rows]
    finally:
        await store.close()


def _rows(label: str, late: list[tuple[float, float]]) -> None:
    for i, what in enumerate(("wake", "commit")):
        v = [x[i] for x in late]
        print(f"{label} {what:>6} {statistics.median(v):8.1f} {_pct(v, 0.99):8.1f} {max(v):8.1f}")


async def bench(args: argparse.Namespace) -> None:
    db = f"azb_{os.getpid()}_timers"
    admin = await asyncpg.connect(args.dsn)
    await admin.execute(f'CREATE DATABASE "{db}"')
    dsn = args.dsn.rsplit("/", 1)[0] + f"/{db}"
    every: dict[str, list[tuple[float, float]]] = {"paced": [], "burst": []}
    try:
        store = await open_store(dsn, Config(), migrate=True)
        await store.close()
        print(
            f"{args.timers} timers of {args.sleep_ms} ms, poll interval {args.poll_ms} ms;"
            f" paced: {args.rate:g} starts/s, burst: as fast as the client starts them"
        )
        print(f"{'mode':>6} {'round':>6} {'':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for r in range(args.rounds):
            for mode, rate in (("paced", args.rate), ("burst", 0.0)):
                late = await _round(dsn, args.timers, args.sleep_ms, args.poll_ms, rate)
                every[mode] += late
                _rows(f"{mode:>6} {r + 1:>6}", late)
        for mode, late in every.items():
            _rows(f"{mode:>6} {'all':>6}", late)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("AZYNC_DSN"))
    ap.add_argument("--timers", type=int, default=200, help="workflows, one timer each")
    ap.add_argument("--sleep-ms", type=int, default=200, help="each timer's delay")
    ap.add_argument("--poll-ms", type=int, default=1000, help="the worker's poll interval")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=100.0, help="paced starts per second")
    args = ap.parse_args()
    if not args.dsn:
        ap.error("--dsn or $AZYNC_DSN is required")
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
