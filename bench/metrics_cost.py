"""What metrics cost a worker: the same burst of three-activity workflows run by a
worker process with metrics off, and with them on (recorded by the OpenTelemetry
SDK and served for Prometheus, as ``azync-flow worker --metrics-port`` does).

    python bench/metrics_cost.py [-n 300] [--rounds 4] [--dsn ...]

DSN: ``--dsn``, else ``$AZYNC_DSN``, else 127.0.0.1:5432/test. The bench creates
a database ``azb_<pid>_metrics`` (dropped at the end). Each round runs both sides,
in alternating order (off, on, then on, off, ...), each with a fresh worker
process (``bench/_flow_workload.py worker [--metrics]``) and a remote client in
this process starting ``-n`` workflows at once and awaiting them. Per side, the
median over rounds of:

* workflows/s of the burst (start of the first to the last result);
* worker CPU ms per workflow (the worker process's ``process_time``);
* transactions per workflow in the database (``pg_stat_database.xact_commit``
  over the run, the client's included; read after the worker exits, which
  flushes its backends' counters): every statement outside an explicit
  transaction is one, so equal figures mean metrics added no SQL to the hot path.

With metrics on, the worker's exposition is scraped at the end and its
``azync_flow_workflow_completed_total`` must equal the workflows run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _flow_workload import three

from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import open_store

LOCAL = "postgresql://postgres@127.0.0.1:5432/test"
WORKLOAD = Path(__file__).resolve().parent / "_flow_workload.py"


def _with_db(dsn: str, db: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, ""))


async def _xacts(dsn: str, db: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        return int(
            await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", db)
        )
    finally:
        await conn.close()


class WorkerProc:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def ask(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        await self.proc.stdin.drain()
        reply: dict[str, Any] = json.loads(await self.proc.stdout.readline())
        return reply

    async def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await asyncio.wait_for(self.proc.wait(), 60)


async def _worker(dsn: str, metrics: bool) -> WorkerProc:
    args = [str(WORKLOAD), "worker", "--dsn", dsn] + (["--metrics"] if metrics else [])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    ready = json.loads(await proc.stdout.readline())
    assert ready == {"ready": True}, ready
    return WorkerProc(proc)


def _completed(text: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "azync_flow_workflow_completed_total":
                total += s.value
    return total


async def _side(server: str, dsn: str, db: str, n: int, metrics: bool) -> dict[str, float]:
    before = await _xacts(server, db)
    worker = await _worker(dsn, metrics)
    store = await open_store(dsn, Config(max_pool_size=8), migrate=False)
    try:
        client = Client(store)
        cpu0 = (await worker.ask({"cmd": "cpu"}))["cpu_s"]
        began = time.perf_counter()
        handles = [await client.start(three, i) for i in range(n)]
        for h in handles:
            assert (await h.result(timeout=600))["c"] == 3
        elapsed = time.perf_counter() - began
        cpu1 = (await worker.ask({"cmd": "cpu"}))["cpu_s"]
        if metrics:
            text = (await worker.ask({"cmd": "metrics"}))["text"]
            assert _completed(text) == n, "the worker's metrics did not count every workflow"
    finally:
        await store.close()
        await worker.stop()
    await asyncio.sleep(1.0)  # let the exited backends' counters land
    after = await _xacts(server, db)
    return {
        "wf_per_s": n / elapsed,
        "cpu_ms_per_wf": (cpu1 - cpu0) * 1000 / n,
        "xacts_per_wf": (after - before) / n,
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("AZYNC_DSN", LOCAL))
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    db = f"azb_{os.getpid()}_metrics"
    admin = await asyncpg.connect(args.dsn)
    await admin.execute(f'CREATE DATABASE "{db}"')
    dsn = _with_db(args.dsn, db)
    try:
        store = await open_store(dsn, Config(), migrate=True)
        await store.close()
        results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for metrics in order:
                got = await _side(args.dsn, dsn, db, args.n, metrics)
                results[metrics].append(got)
                print(f"round {r + 1} metrics {'on ' if metrics else 'off'}: {got}", flush=True)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()
    print(f"\n{args.n} three-activity workflows per run, {args.rounds} rounds, medians")
    print(f"{'':24} {'metrics off':>12} {'metrics on':>12} {'on / off':>9}")
    for key, label in (
        ("wf_per_s", "workflows/s"),
        ("cpu_ms_per_wf", "worker CPU ms / workflow"),
        ("xacts_per_wf", "transactions / workflow"),
    ):
        off = statistics.median(x[key] for x in results[False])
        on = statistics.median(x[key] for x in results[True])
        print(f"{label:24} {off:12.2f} {on:12.2f} {on / off:9.3f}")


if __name__ == "__main__":
    asyncio.run(main())
