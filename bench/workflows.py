"""Workflow benchmark: azync_flow side by side with DBOS Transact, one table.

    python bench/workflows.py [-n 1000] [--seq 200] [--signals 100] [--commit-runs 200]

DSN: ``--dsn``, else ``$AZYNC_DSN``, else an embedded server. The bench creates
(and drops and recreates on every run) two databases on that server,
``azb_flow`` and ``azb_dbos``, so ``pg_stat_database`` of each sees only its side.

Rows (each side is one process: the azync_flow client and a real ``Worker``
share one event loop; DBOS runs in a subprocess, ``bench/_dbos_workload.py``):

* throughput: N workflows of 3 activities (steps), all started, then all awaited;
  workflows/s, and start-to-finish p50/p99 from each side's own row timestamps.
* sequential: one 3-activity workflow at a time, start -> result seen by the
  client (azync_flow: ``handle.result()``, woken by the terminal commit's NOTIFY;
  DBOS: a direct in-process call).
* signal -> resume: a workflow parked in ``wait_signal``/``recv``; signal/send ->
  result seen by the client.
* commits per 3-activity workflow: ``pg_stat_database.xact_commit`` delta of the
  side's database over a process that runs K workflows (azync_flow: all started,
  then awaited with one aggregate query per 100 ms; DBOS: in-process calls), minus the
  same process with K = 0 (stats are flushed when the backends exit). This
  counts every transaction, read-only ones included; ``write txns`` is the
  ``txid_current()`` delta over the same window, minus the K = 0 run (it is
  cluster-wide: run on an otherwise idle server).
* replay (azync_flow only, no database): a full replay of histories of 100,
  1,000 and 10,000 events, and a cached pass (one new event) at that length,
  next to the cached pass at event 10. Target: <= 2x.

Targets (issue 3): >= 3x DBOS workflows/s, <= 0.5x its start-to-finish p50,
<= 4 commits per 3-activity workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azync_flow import WorkflowContext, activity, workflow
from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.replay import (
    ActivityCompleted,
    ActivityScheduled,
    HistoryEntry,
    WorkflowInfo,
    WorkflowInstance,
    run_pass,
)
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.worker import Worker

HERE = Path(__file__).resolve().parent
FLOW_DB, DBOS_DB = "azb_flow", "azb_dbos"
#: Worker concurrency (per lease loop) and pool size of the azync_flow side.
CONCURRENCY = int(os.environ.get("AZB_CONCURRENCY", "32"))


@activity(name="step_a")
async def step_a(i: int) -> dict[str, int]:
    return {"i": i, "a": 1}


@activity(name="step_b")
async def step_b(d: dict[str, int]) -> dict[str, int]:
    return {**d, "b": 2}


@activity(name="step_c")
async def step_c(d: dict[str, int]) -> dict[str, int]:
    return {**d, "c": 3}


@workflow(name="three")
async def three(ctx: WorkflowContext, i: int) -> dict[str, int]:
    return await step_c(await step_b(await step_a(i)))


@workflow(name="waiter")
async def waiter(ctx: WorkflowContext, _: None) -> Any:
    return await ctx.wait_signal("go", timeout=timedelta(seconds=30))


@activity(name="step")
async def step(i: int) -> int:
    return i + 1


@workflow(name="long")
async def long(ctx: WorkflowContext, n: int) -> int:
    total = 0
    for i in range(n):
        total += await step(i)
    return total


# --- helpers --------------------------------------------------------------------------------


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    f = int(k)
    c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)


def with_db(dsn: str, db: str) -> str:
    """``dsn`` pointing at database ``db`` (keeps the query, e.g. ``?host=/socket/dir``)."""
    return urlsplit(dsn)._replace(path=f"/{db}").geturl()


async def recreate(dsn: str, db: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{db}"')
    finally:
        await conn.close()


async def db_counters(dsn: str, db: str) -> tuple[int, int]:
    """(xact_commit of ``db``, current txid) read on a fresh connection to another database."""
    conn = await asyncpg.connect(dsn)
    try:
        commits = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", db
        )
        xid = await conn.fetchval("SELECT txid_current()")
        return int(commits), int(xid)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def flow_worker(dsn: str, *, migrate: bool = False) -> AsyncIterator[PostgresStore]:
    store = await open_store(dsn, Config(max_pool_size=CONCURRENCY + 8), migrate=migrate)
    worker = Worker(
        store,
        concurrency=CONCURRENCY,
        poll_interval=timedelta(seconds=1),
        maintenance_interval=timedelta(seconds=1),
        handle_signals=False,
    )
    worker.register_workflows([three, waiter], [step_a, step_b, step_c])
    try:
        async with worker:
            yield store
    finally:
        await store.close()


async def parked(store: PostgresStore, wid: uuid.UUID) -> None:
    """Until the first pass of ``wid`` has committed (it then waits in ``wait_signal``)."""
    query = (
        "SELECT count(*) FROM azync_jobs WHERE run_id = $1 AND kind = '$wft'"
        " AND state = 'succeeded'"
    )
    for _ in range(10_000):
        if await store.pool.fetchval(query, wid):
            return
        await asyncio.sleep(0.001)
    raise TimeoutError(f"{wid} never parked")


# --- azync_flow workloads -------------------------------------------------------------------


async def flow_throughput(dsn: str, n: int) -> dict[str, Any]:
    async with flow_worker(dsn) as store, Client(store) as client:
        for i in range(20):  # warm-up
            assert (await (await client.start(three, -i - 1)).result(timeout=60))["c"] == 3
        t0 = time.perf_counter()
        handles = [await client.start(three, i) for i in range(n)]
        results = [await h.result(timeout=300) for h in handles]
        seconds = time.perf_counter() - t0
        assert results[-1] == {"i": n - 1, "a": 1, "b": 2, "c": 3}
        rows = await store.pool.fetch(
            "SELECT extract(epoch FROM completed_at - created_at) * 1000 AS ms"
            " FROM azync_workflow_executions WHERE id = any($1::uuid[])",
            [h.id for h in handles],
        )
    return {"seconds": seconds, "latencies_ms": [float(r["ms"]) for r in rows]}


async def flow_sequential(dsn: str, n: int) -> dict[str, Any]:
    async with flow_worker(dsn) as store, Client(store) as client:
        lat = []
        for i in range(n + 10):
            a = time.perf_counter()
            handle = await client.start(three, i)
            assert (await handle.result(timeout=60))["c"] == 3
            if i >= 10:  # the first ten warm up
                lat.append((time.perf_counter() - a) * 1000)
    return {"latencies_ms": lat}


async def flow_signal(dsn: str, n: int) -> dict[str, Any]:
    async with flow_worker(dsn) as store, Client(store) as client:
        lat = []
        for i in range(n):
            handle = await client.start(waiter, None)
            await parked(store, handle.id)
            await asyncio.sleep(0.005)
            a = time.perf_counter()
            await handle.signal("go", {"k": i})
            assert await handle.result(timeout=60) == {"k": i}
            lat.append((time.perf_counter() - a) * 1000)
    return {"latencies_ms": lat}


async def flow_commits_run(dsn: str, k: int) -> None:
    """Start K workflows, then wait for all with one aggregate query every 100 ms."""
    async with flow_worker(dsn) as store:
        client = Client(store)
        ids = [(await client.start(three, i)).id for i in range(k)]
        query = (
            "SELECT count(*) FROM azync_workflow_executions"
            " WHERE id = any($1::uuid[]) AND state = 'succeeded'"
        )
        for _ in range(6000):
            if await store.pool.fetchval(query, ids) == k:
                return
            await asyncio.sleep(0.1)
        raise TimeoutError("workflows of the commit count did not finish in 10 min")


def run_flow_commits_process(dsn: str, k: int) -> None:
    """K workflows in a fresh process (its backends' exit flushes the stats)."""
    subprocess.run([sys.executable, "-P", __file__, "--dsn", dsn, "--_commits", str(k)], check=True)


# --- DBOS workloads -------------------------------------------------------------------------


def dbos_available() -> bool:
    probe = "import dbos, sqlalchemy, psycopg"
    return subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True).returncode == 0


def run_dbos(mode: str, url: str, n: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-P", str(HERE / "_dbos_workload.py"), mode, "--url", url, "-n", str(n)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"DBOS {mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- commits --------------------------------------------------------------------------------


async def commits_per_workflow(admin_dsn: str, db: str, k: int, run: Any) -> tuple[float, float]:
    """(xact_commit per workflow, write transactions per workflow) of ``run(k)``."""

    async def window(count: int) -> tuple[int, int]:
        c0, x0 = await db_counters(admin_dsn, db)
        await asyncio.to_thread(run, count)
        await asyncio.sleep(1.2)  # let exited backends' stats land
        c1, x1 = await db_counters(admin_dsn, db)
        return c1 - c0, x1 - x0 - 1

    base_c, base_x = min(await window(0), await window(0))
    full_c, full_x = await window(k)
    return (full_c - base_c) / k, (full_x - base_x) / k


# --- replay ---------------------------------------------------------------------------------


def replay_times(reps: int = 200) -> dict[int, tuple[float, float]]:
    """{events: (full replay ms, cached pass us p50)} for histories of that length."""
    info = WorkflowInfo(uuid.uuid4(), "long")
    out = {}
    for events in (10, 100, 1_000, 10_000):
        steps = events // 2
        history: list[HistoryEntry] = []
        for i in range(steps):
            seq = len(history) + 1
            raw = msgspec.Raw(b"[%d]" % i)
            history.append(HistoryEntry(seq, ActivityScheduled(seq=seq, name="step", input=raw)))
            history.append(
                HistoryEntry(
                    seq + 1, ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(b"1"))
                )
            )
        fulls = []
        for _ in range(3):
            t0 = time.perf_counter()
            run_pass(long, b"%d" % (steps + 10_000), history, info=info)
            fulls.append(time.perf_counter() - t0)
        instance = WorkflowInstance(long, b"%d" % (steps + 10_000), info)
        instance.advance(history)
        seq = len(history) + 1
        samples = []
        for _ in range(reps):
            new = [
                HistoryEntry(
                    seq + 1, ActivityCompleted(scheduled_seq=seq, result=msgspec.Raw(b"1"))
                )
            ]
            t0 = time.perf_counter()
            instance.advance(new)
            samples.append(time.perf_counter() - t0)
            seq += 2
        out[events] = (min(fulls) * 1000, statistics.median(samples) * 1e6)
    return out


# --- main -----------------------------------------------------------------------------------


def fmt_ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or not theirs:
        return "-"
    return f"{ours / theirs:.2f}x"


async def bench(args: argparse.Namespace) -> None:
    admin, where = (args.dsn, "--dsn") if args.dsn else resolve_dsn()
    print(f"PostgreSQL: {where}; databases {FLOW_DB} (azync_flow) and {DBOS_DB} (DBOS)")
    flow_dsn, dbos_url = with_db(admin, FLOW_DB), with_db(admin, DBOS_DB)
    with_dbos = not args.no_dbos and dbos_available()
    if not with_dbos:
        print("DBOS: not importable (pip install 'azync-flow[bench]') or --no-dbos; one side only")
    await recreate(admin, FLOW_DB)
    (await open_store(flow_dsn, Config())).pool.terminate()  # migrate once
    flow: dict[str, Any] = {}
    dbos: dict[str, Any] = {}
    if with_dbos:
        await recreate(admin, DBOS_DB)

    print(f"throughput: {args.n} workflows x 3 activities ...", flush=True)
    flow["thr"] = await flow_throughput(flow_dsn, args.n)
    if with_dbos:
        dbos["thr"] = run_dbos("throughput", dbos_url, args.n)
    print(f"sequential: {args.seq} workflows ...", flush=True)
    flow["seq"] = await flow_sequential(flow_dsn, args.seq)
    if with_dbos:
        dbos["seq"] = run_dbos("sequential", dbos_url, args.seq)
    print(f"signal -> resume: {args.signals} runs ...", flush=True)
    flow["sig"] = await flow_signal(flow_dsn, args.signals)
    if with_dbos:
        dbos["sig"] = run_dbos("signal", dbos_url, args.signals)
    print(f"commits: {args.commit_runs} sequential workflows per side ...", flush=True)
    flow["commits"] = await commits_per_workflow(
        admin, FLOW_DB, args.commit_runs, lambda k: run_flow_commits_process(flow_dsn, k)
    )
    if with_dbos:
        dbos["commits"] = await commits_per_workflow(
            admin, DBOS_DB, args.commit_runs, lambda k: run_dbos("commits", dbos_url, k)
        )
    print("replay ...", flush=True)
    replay = replay_times()

    rows: list[tuple[str, float | None, float | None, str]] = []

    def add(label: str, key: str, fn: Any, target: str = "") -> None:
        ours = fn(flow[key])
        theirs = fn(dbos[key]) if key in dbos else None
        rows.append((label, ours, theirs, target))

    add("workflows/s (3 activities)", "thr", lambda r: len(r["latencies_ms"]) / r["seconds"])
    rows[-1] = (*rows[-1][:3], ">= 3x")
    add("  start-to-finish p50 ms", "thr", lambda r: pct(r["latencies_ms"], 50), "<= 0.5x")
    add("  start-to-finish p99 ms", "thr", lambda r: pct(r["latencies_ms"], 99))
    add("sequential p50 ms", "seq", lambda r: pct(r["latencies_ms"], 50), "<= 0.5x")
    add("sequential p99 ms", "seq", lambda r: pct(r["latencies_ms"], 99))
    add("signal -> resume p50 ms", "sig", lambda r: pct(r["latencies_ms"], 50))
    add("signal -> resume p99 ms", "sig", lambda r: pct(r["latencies_ms"], 99))
    add("commits/wf (xact_commit)", "commits", lambda r: r[0], "<= 4")
    add("  write txns/wf (txid)", "commits", lambda r: r[1], "<= 4")
    for events in (100, 1_000, 10_000):
        full, cached = replay[events]
        rows.append((f"replay {events:>6} events: full ms", full, None, ""))
        ratio = cached / replay[10][1]
        rows.append((f"  cached pass us (x event 10: {ratio:.2f})", cached, None, "<= 2x"))

    print()
    print(f"{'metric':<42} {'azync_flow':>11} {'DBOS':>9} {'ratio':>7}  target")
    print(f"{'-' * 42} {'-' * 11} {'-' * 9} {'-' * 7}  ------")
    for label, ours, theirs, target in rows:
        t = f"{theirs:9.1f}" if theirs is not None else f"{'-':>9}"
        print(f"{label:<42} {ours:11.1f} {t} {fmt_ratio(ours, theirs):>7}  {target}")
    cpus = os.cpu_count()
    print(f"\n{cpus} CPUs; one process per side; Postgres shared. Ratio = azync_flow / DBOS.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("AZYNC_DSN"))
    parser.add_argument("-n", type=int, default=1000, help="workflows in the throughput run")
    parser.add_argument("--seq", type=int, default=200, help="sequential workflows")
    parser.add_argument("--signals", type=int, default=100, help="signal -> resume runs")
    parser.add_argument("--commit-runs", type=int, default=200, help="workflows per commit count")
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS side")
    parser.add_argument("--_commits", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._commits is not None:
        asyncio.run(flow_commits_run(args.dsn, args._commits))
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
