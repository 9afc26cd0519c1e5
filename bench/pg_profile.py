"""What PostgreSQL does per workflow: functions, nested statements, planning, HOT.

    python bench/pg_profile.py --dsn postgresql://postgres@127.0.0.1:5433/postgres \
        [-n 600] [--sequential]

Runs a burst of ``-n`` three-activity workflows (``bench/_flow_workload.py``'s
``three``; ``--sequential``: one at a time, each awaited before the next
starts, so the figures are per-call costs on a quiet server rather than costs
under contention for the CPU) through a real worker in its own process, in a fresh database
``azp_<pid>`` on the server of ``--dsn`` (dropped at the end), and prints per
workflow:

* each PL/pgSQL function (``pg_stat_user_functions``): calls, total and self ms;
* the top statements by total time, nested ones included (``pg_stat_statements``
  with ``track = all``): calls, execution ms, planning ms (``track_planning``);
* per table: rows inserted and updated, the HOT share of the updates and the
  number of indexes;
* lock wait: backends waiting on a ``Lock`` in ``pg_stat_activity``, sampled
  every ~5 ms, by wait event.

The server needs ``shared_preload_libraries = 'pg_stat_statements'`` with
``pg_stat_statements.track = all`` and ``track_planning = on``; functions are
counted with ``track_functions = pl`` (set on the database here). Figures are
totals divided by ``-n``: compare runs on one machine, not against other hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _flow_workload import three

from azync_flow.client import Client
from azync_flow.store.postgres import open_store

HERE = Path(__file__).resolve().parent


def _db_dsn(dsn: str, db: str) -> str:
    base, _, _ = dsn.rpartition("/")
    return f"{base}/{db}"


async def _sample_locks(dsn: str, db: str, stop: asyncio.Event, waits: Counter[str]) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        last = time.monotonic()
        while not stop.is_set():
            rows = await conn.fetch(
                "SELECT wait_event FROM pg_stat_activity"
                " WHERE datname = $1 AND wait_event_type = 'Lock'",
                db,
            )
            now = time.monotonic()
            for r in rows:
                waits[r["wait_event"]] += now - last
            last = now
            await asyncio.sleep(0.005)
    finally:
        await conn.close()


async def _worker(dsn: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "_flow_workload.py"),
        "worker",
        "--dsn",
        dsn,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if not json.loads(line).get("ready"):
        raise RuntimeError(f"worker did not start: {line!r}")
    return proc


async def profile(dsn: str, n: int, sequential: bool) -> None:
    db = f"azp_{os.getpid()}"
    admin = await asyncpg.connect(dsn)
    await admin.execute(f'CREATE DATABASE "{db}"')
    target = _db_dsn(dsn, db)
    try:
        await admin.execute(f"ALTER DATABASE \"{db}\" SET track_functions = 'pl'")
        conn = await asyncpg.connect(target)
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        store = await open_store(target)  # migrates
        worker = await _worker(target)
        client = Client(store)
        try:
            # warm up: plans and caches of both processes
            for h in [await client.start(three, i) for i in range(20)]:
                await h.result(timeout=60)
            await conn.execute("SELECT pg_stat_statements_reset()")
            await conn.execute("SELECT pg_stat_reset()")
            stop = asyncio.Event()
            waits: Counter[str] = Counter()
            sampler = asyncio.create_task(_sample_locks(dsn, db, stop, waits))
            t0 = time.monotonic()
            if sequential:
                for i in range(n):
                    await (await client.start(three, i)).result(timeout=300)
            else:
                handles = [await client.start(three, i) for i in range(n)]
                for h in handles:
                    await h.result(timeout=300)
            elapsed = time.monotonic() - t0
            stop.set()
            await sampler
        finally:
            assert worker.stdin is not None
            worker.stdin.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.wait(), 30)
            await store.close()
        await asyncio.sleep(1.0)  # the worker's backends flush their stats on exit
        await _report(conn, n, elapsed, waits)
        await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()


async def _report(conn: asyncpg.Connection, n: int, elapsed: float, waits: Counter[str]) -> None:
    print(f"{n} workflows in {elapsed:.2f} s: {n / elapsed:.1f} workflows/s\n")
    fns = await conn.fetch(
        "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions"
        " ORDER BY total_time DESC"
    )
    print(f"{'function':<40} {'calls/wf':>9} {'total ms/wf':>12} {'self ms/wf':>11} {'ms/call':>8}")
    for r in fns:
        print(
            f"{r['funcname']:<40} {r['calls'] / n:>9.2f} {r['total_time'] / n:>12.3f}"
            f" {r['self_time'] / n:>11.3f} {r['total_time'] / max(r['calls'], 1):>8.3f}"
        )
    tops = await conn.fetch(
        "SELECT toplevel, calls, total_exec_time, total_plan_time, plans,"
        "       regexp_replace(left(query, 400), '\\s+', ' ', 'g') AS q"
        " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
        " WHERE datname = current_database()) ORDER BY total_exec_time + total_plan_time DESC"
        " LIMIT 25"
    )
    top = [r for r in tops if r["toplevel"]]
    print(
        f"\ntop-level statements: exec {sum(r['total_exec_time'] for r in top) / n:.3f} ms/wf,"
        f" plan {sum(r['total_plan_time'] for r in top) / n:.3f} ms/wf"
    )
    head = f"{'lvl':<4} {'calls/wf':>9} {'exec ms/wf':>11} {'plan ms/wf':>11} {'plans':>6}"
    print(head + "  statement")
    for r in tops:
        name = r["q"]
        if "name:" in name:
            name = name[name.index("name:") :]
        print(
            f"{'top' if r['toplevel'] else 'nest':<4} {r['calls'] / n:>9.2f}"
            f" {r['total_exec_time'] / n:>11.3f} {r['total_plan_time'] / n:>11.3f}"
            f" {r['plans']:>6}  {name[:90]}"
        )
    tables = await conn.fetch(
        "SELECT t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del,"
        "       (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid) AS indexes"
        " FROM pg_stat_user_tables t WHERE t.n_tup_ins + t.n_tup_upd + t.n_tup_del > 0"
        " ORDER BY t.n_tup_upd + t.n_tup_ins DESC"
    )
    print(f"\n{'table':<34} {'ins/wf':>7} {'upd/wf':>7} {'HOT share':>9} {'indexes':>8}")
    for r in tables:
        share = r["n_tup_hot_upd"] / r["n_tup_upd"] if r["n_tup_upd"] else float("nan")
        print(
            f"{r['relname']:<34} {r['n_tup_ins'] / n:>7.2f} {r['n_tup_upd'] / n:>7.2f}"
            f" {share:>9.2f} {r['indexes']:>8}"
        )
    print("\nlock wait ms/wf by wait event:", {k: round(v * 1000 / n, 2) for k, v in waits.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("AZYNC_DSN", ""))
    ap.add_argument("-n", type=int, default=600)
    ap.add_argument("--sequential", action="store_true", help="one workflow at a time")
    args = ap.parse_args()
    if not args.dsn:
        ap.error("--dsn (or AZYNC_DSN) is required: a server with pg_stat_statements preloaded")
    asyncio.run(profile(args.dsn, args.n, args.sequential))


if __name__ == "__main__":
    main()
