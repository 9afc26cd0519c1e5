"""Workflow benchmark: azync_flow side by side with DBOS Transact and Absurd, one table.

    python bench/workflows.py [--rounds 3] [-n 1000] [--seq 200] [--signals 100]
                              [--gather 200] [--commit-runs 200] [--events 2000]
                              [--quick] [--no-dbos] [--no-absurd]

DSN: ``--dsn``, else ``$AZYNC_DSN``, else an embedded server. The bench creates four
databases on that server for the run and drops them at its end, ``azb_<pid>_flow``,
``azb_<pid>_dbos``, ``azb_<pid>_absurd`` and ``azb_<pid>_floor`` (named per run: runs
sharing a server leave each other alone), so the statistics of each see only its side.

Absurd (PyPI ``absurd-sdk`` and ``absurdctl``, in the ``bench`` extra; its schema is
the SQL ``absurdctl`` bundles) runs the throughput, sequential and signal rows in one
process, ``bench/_absurd_workload.py serve``: the SDK's worker loop and a client that
polls for results every 5 ms (Absurd has no push). Its columns are "Absurd" and "vs A"
(azync_flow / Absurd per round, median); its worker loop runs only during its own
workloads.

Rounds. Each round runs every workload on azync_flow, then on DBOS, workload by
workload (azync_flow, DBOS, azync_flow, DBOS, ...), so a load swing on the machine
falls on both sides alike. A row shows, per side, the median over rounds, and the
median of the per-round ratios azync_flow / other side, its target and whether the
median ratio meets it.

Processes. azync_flow: a real ``Worker`` alone in its own process
(``bench/_flow_workload.py worker``); the client (``Client``, the remote-client
path) runs in this process. DBOS: one process that starts and runs the workflows
(``bench/_dbos_workload.py serve``): DBOS has no separate worker. Both are started
fresh each round and answer one JSON command per line. Per side, a watcher process
(``bench/_pg_watch.py``, on the admin database) samples the server during the
throughput run.

Rows:

* 3-activity workflows/s: N workflows of 3 sequential activities (steps), all
  started at once (the burst), then all awaited; start-to-finish p50/p99 from each
  side's own row timestamps (created -> completed). That figure starts, per
  workflow, when its own start committed: DBOS's process both starts and runs the
  workflows, so its later starts wait in its start loop (not counted), where
  azync_flow's client creates them all at once and they wait in the queue
  (counted). The one-clock rows below count both waits.
* burst of N, one clock: per workflow, its completion minus the moment the burst's
  submission began (azync_flow: the bench's client before its first start; DBOS:
  its process before its first ``start_workflow``), both on this machine's wall
  clock (``time.time()``, which the processes share). Completion is the side's row
  timestamp (azync_flow ``completed_at``, DBOS ``updated_at``, ms; both the
  server's ``now()`` of the completing transaction), converted to this machine's
  clock by the offset measured on the fastest of 5 round trips.
* worker CPU ms / workflow over that run: ``time.process_time`` of the azync_flow
  worker process, and of the DBOS process (which also starts the workflows); the
  ``+ client`` row adds this process's CPU to the azync_flow side, the like-for-like
  figure against DBOS's single process.
* PG rows, over that same run (after its warm-up), each side's database only:

  - statement ms / workflow: ``pg_stat_statements`` (the extension created in each
    side's database; that database's entries reset before the run), the sum of
    ``total_exec_time`` of top-level statements, / N; ``statements / workflow``:
    their calls / N. Background statements (pollers, maintenance) of the run are
    in it. Where the extension is not preloaded, the rows show n/a and the table
    says how to preload it (``shared_preload_libraries``); where the server
    evicted entries meanwhile (``pg_stat_statements.max``), a note says so.
  - backend CPU ms / workflow: user + system CPU of the database's backends
    (``/proc/<pid>/stat``; pids from ``pg_stat_activity``, read while they live;
    see ``bench/_pg_watch.py``), / N. Only where the server runs on this machine
    (else n/a). Clock-tick resolution (10 ms per backend): with ``--quick``'s
    small N, a rough figure.
  - lock-wait ms / workflow: ``pg_stat_activity`` sampled every ~5 ms from a
    separate process and connection; each sample adds (backends of the database
    with ``wait_event_type = 'Lock'``) x (time since the previous sample), / N.
    A sampled estimate (waits shorter than the gap are missed or counted whole);
    the notes split it by ``wait_event``.
  - machine CPU busy %: ``/proc/stat`` deltas over the run, every CPU, every
    process (the other side's idle processes, the sampler and other users of the
    machine included).
  A second table lists the 5 costliest statements per side (total time): the
  named query's name (its ``-- name:`` comment, or the azync_flow named query of
  the same shape once literals and parameters are blanked), else the first 60
  characters; calls / workflow, mean ms and total ms / workflow over all rounds.
* ``--limits``: each round also runs the same burst twice more on the same worker,
  ``three`` and ``three_limited`` (its three activities share a generous global
  ``ConcurrencyLimit`` of 1000, never reached), back to back with the order
  alternated by round; the row shows the limited workflows/s, the unlimited
  ones and the median of the per-round ratios (target >= 0.9x).
* sequential p50 / p99, remote client: one 3-activity workflow at a time, start ->
  result seen by the client (``handle.result()``, woken by the terminal commit's
  NOTIFY); DBOS: a direct in-process call, its fastest path.
* sequential, in-process (eager): the same in the worker's own process through a
  client bound to it (``Client.for_worker(worker)``: each start commits with its
  first pass), beside DBOS's direct call: the like-for-like comparison.
* signal -> resume p50: a workflow parked in ``wait_signal``/``recv``; signal/send ->
  result seen by the client.
* gather of 10 activities, workflows/s: a workflow that awaits ``asyncio.gather`` of
  10 activities; DBOS: an async workflow awaiting ``asyncio.gather`` of 10 async
  steps (its own way of running steps concurrently inside one workflow, the closest
  equivalent; a queue would add a polling hop per step).
* scale-out, workflows/s: the 3-activity throughput run with 2 worker processes and
  the client in this (third) process. DBOS: 2 processes dequeuing from a DBOS queue
  (polling every 0.1 s) and a ``DBOSClient`` process that enqueues and waits.
* publish, 8 producers: ``--events`` events to one subscriber (a fresh worker
  process running only that subscriber), each producer a coroutine of this
  process publishing one event per transaction: through the client's pool
  (``client.publish``), and on its own connection inside its own transaction
  (``conn=``, the outbox path). events/s published: ``--events`` / (first publish
  -> last publish returned); delivered: / (first publish -> the subscriber ran the
  last delivery). DBOS has no event ledger: its row is the closest equivalent, 8
  threads sharing a ``DBOSClient`` enqueueing no-op workflows on a queue (one
  transaction each) that one queue-worker process runs (polling every 0.1 s);
  there is no DBOS figure for ``conn=``. Floor: 8 asyncpg connections, each
  inserting an event row and its delivery row in one statement (its own
  transaction); the ``vs floor`` rows give azync_flow's ratio to it.
* commits / write txns per 3-activity workflow: over a fresh process that runs K
  workflows (azync_flow: worker and remote-path client in one process, all started,
  then awaited with one aggregate query per 100 ms; DBOS: in-process calls), minus a
  K = 0 process (measured once per side), with no other process of the run
  connected. ``commits`` is the ``pg_stat_database.xact_commit`` delta of the
  side's database (read-only transactions too; stats are flushed when the
  backends exit). ``write txns`` counts the WAL's COMMIT records of transactions
  that wrote a block of the side's database (``pg_walinspect``, PostgreSQL 15+,
  superuser: exact on a shared server); where that extension cannot be created, the
  ``txid_current()`` advance (cluster-wide, so other clients add to it: the row
  then shows the minimum over rounds). The ``eager start`` row: the same window
  with the client bound to the worker (``Client.for_worker(worker)``: each start commits
  with its first pass), azync_flow only.
* floor: the same 3 steps as plain asyncpg commits and no engine, 5 commits per
  workflow (start insert, 3 step results, finish update), N workflows over the
  worker's concurrency in connections, and one at a time; rows give azync_flow's
  ratio to it.
* replay (azync_flow only, no database, once): a full replay of histories of 100,
  1,000 and 10,000 events, and a cached pass (one new event) at that length, as a
  ratio to the cached pass at event 10.

``--quick`` runs small sizes (``QUICK``) and runs publish, scale-out and the commit
windows, which start two to five processes per side, in round 1 only; about 3
minutes (3.3 measured on two cores shared with other work).

Targets: >= 3x DBOS workflows/s; start-to-finish, sequential and signal -> resume
p50 <= 0.5x DBOS; <= 6 write transactions per workflow with a remote client (<= 4
with eager start); >= 40% of the floor's workflows/s; cached pass <= 2x event 10.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _flow_workload import DEFAULT_CONCURRENCY, PING, fan, long, three, three_limited, waiter

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

HERE = Path(__file__).resolve().parent
FLOW_SCRIPT, DBOS_SCRIPT = HERE / "_flow_workload.py", HERE / "_dbos_workload.py"
ABSURD_SCRIPT = HERE / "_absurd_workload.py"
#: Per engine side, the table its executions' state lives in (the HOT-share row).
RUN_TABLE = {"flow": "azync_workflow_executions", "dbos": "workflow_status", "absurd": "r_bench"}
WATCH_SCRIPT = HERE / "_pg_watch.py"
#: Worker concurrency (per lease loop) of the azync_flow side, DBOS queue worker
#: concurrency, and the floor's connection count.
CONCURRENCY = int(os.environ.get("AZB_CONCURRENCY", str(DEFAULT_CONCURRENCY)))
#: Producers of the publish rows (each in its own transactions, on its own connection).
PRODUCERS = 8
#: Sizes of ``--quick`` (rounds stay as given).
QUICK = {"n": 80, "seq": 20, "signals": 15, "gather": 15, "commit_runs": 20, "events": 400}

Sample = dict[str, Any]


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


async def clock_offset(conn: Any) -> float:
    """The server's clock minus this machine's ``time.time()``, in seconds: the
    fastest of 5 round trips, its midpoint taken as the server's reading."""
    best: tuple[float, float] | None = None
    for _ in range(5):
        a = time.time()
        server = float(await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())"))
        b = time.time()
        if best is None or b - a < best[0]:
            best = (b - a, server - (a + b) / 2)
    assert best is not None
    return best[1]


@dataclass
class Proc:
    """A workload process: ``{"ready": true}`` once up, then one JSON reply per JSON line."""

    name: str
    proc: asyncio.subprocess.Process
    #: The last lines of its stderr, shown when it dies.
    stderr: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=60))
    drain: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, name: str, *argv: str) -> Proc:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-P",
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            limit=1 << 24,
        )
        self = cls(name, proc)
        self.drain = asyncio.create_task(self._drain_stderr())
        await self.reply(wait_s=120)
        return self

    async def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr.append(line.decode(errors="replace"))

    async def reply(self, wait_s: float = 900) -> Sample:
        """The next JSON object line on stdout (other lines are skipped)."""
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), wait_s)
            if not line:
                await self.proc.wait()
                if self.drain is not None:
                    await self.drain
                raise RuntimeError(f"{self.name} exited:\n{''.join(self.stderr)}")
            if line.startswith(b"{"):
                return dict(json.loads(line))

    async def ask(self, **cmd: Any) -> Sample:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
        await self.proc.stdin.drain()
        return await self.reply()

    async def stop(self) -> None:
        """Close its stdin (it then exits gracefully), or kill it after 60 s."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        if self.drain is not None:
            await self.drain


def run_json(*argv: str) -> Sample:
    """Run a workload process to its end; its last stdout line is a JSON object (or nothing)."""
    proc = subprocess.run(
        [sys.executable, "-P", *argv], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:2]} failed:\n{proc.stderr[-3000:]}")
    lines = proc.stdout.strip().splitlines()
    return dict(json.loads(lines[-1])) if lines else {}


def importable(probe: str) -> bool:
    return subprocess.run([sys.executable, "-P", "-c", probe], capture_output=True).returncode == 0


# --- azync_flow workloads (client side; the worker runs in its own process) ------------------


async def flow_throughput(
    client: Client,
    store: PostgresStore,
    n: int,
    workers: list[Proc],
    watch: Watch | None = None,
    wf: Any = three,
) -> Sample:
    """The burst: N started at once, then all awaited. ``latencies_ms``: created ->
    completed from the rows; ``burst_ms``: completed (server clock, converted to
    this machine's) minus the moment the first start was submitted. ``wf``: the
    3-activity workflow (``three_limited``: the same under a global limit)."""
    warm = [await client.start(wf, -i - 1) for i in range(20)]  # warm-up, all at once
    assert all([(await h.result(timeout=60))["c"] == 3 for h in warm])
    cpu0 = [(await w.ask(cmd="cpu"))["cpu_s"] for w in workers]
    if watch is not None:
        await watch.begin()
    own0, t_submit, t0 = time.process_time(), time.time(), time.perf_counter()
    handles = [await client.start(wf, i) for i in range(n)]
    results = [await h.result(timeout=300) for h in handles]
    seconds, own = time.perf_counter() - t0, time.process_time() - own0
    pg = await watch.end() if watch is not None else {}
    cpu1 = [(await w.ask(cmd="cpu"))["cpu_s"] for w in workers]
    cpu = sum(cpu1) - sum(cpu0)
    assert results[-1] == {"i": n - 1, "a": 1, "b": 2, "c": 3}
    rows = await store.pool.fetch(
        "SELECT extract(epoch FROM completed_at - created_at) * 1000 AS ms,"
        " extract(epoch FROM completed_at) AS done"
        " FROM azync_workflow_executions WHERE id = any($1::uuid[])",
        [h.id for h in handles],
    )
    offset = await clock_offset(store.pool)
    return {
        "seconds": seconds,
        "latencies_ms": [float(r["ms"]) for r in rows],
        "burst_ms": [(float(r["done"]) - offset - t_submit) * 1000 for r in rows],
        "cpu_s": cpu,
        "client_cpu_s": own,
        **pg,
    }


async def dbos_throughput(dbos: Proc, dsn: str, n: int, watch: Watch) -> Sample:
    """DBOS's burst (its process starts and runs the workflows); the timestamps of
    ``dbos.workflow_status`` (server clock, ms) read here once the statistics are."""
    await watch.begin()
    x = await dbos.ask(mode="throughput", n=n)
    x.update(await watch.end())
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT created_at, updated_at FROM dbos.workflow_status"
            " WHERE workflow_uuid = any($1::text[])",
            x.pop("ids"),
        )
        offset = await clock_offset(conn)
    finally:
        await conn.close()
    t_submit = x.pop("t_submit")
    x["latencies_ms"] = [float(r["updated_at"] - r["created_at"]) for r in rows]
    x["burst_ms"] = [(r["updated_at"] / 1000 - offset - t_submit) * 1000 for r in rows]
    return x


async def absurd_throughput(absurd: Proc, dsn: str, n: int, watch: Watch) -> Sample:
    """Absurd's burst (its process spawns and runs the tasks); each task's
    ``enqueue_at`` and its last run's ``completed_at`` (server clock) read here."""
    await watch.begin()
    x = await absurd.ask(mode="throughput", n=n)
    x.update(await watch.end())
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT extract(epoch FROM r.completed_at - t.enqueue_at) * 1000 AS ms,"
            " extract(epoch FROM r.completed_at) AS done"
            " FROM absurd.t_bench t JOIN absurd.r_bench r ON r.run_id = t.last_attempt_run"
            " WHERE t.task_id = any($1::uuid[])",
            x.pop("ids"),
        )
        offset = await clock_offset(conn)
    finally:
        await conn.close()
    t_submit = x.pop("t_submit")
    x["latencies_ms"] = [float(r["ms"]) for r in rows]
    x["burst_ms"] = [(float(r["done"]) - offset - t_submit) * 1000 for r in rows]
    return x


async def flow_sequential(client: Client, n: int) -> Sample:
    lat = []
    for i in range(n + 3):
        a = time.perf_counter()
        handle = await client.start(three, i)
        assert (await handle.result(timeout=60))["c"] == 3
        if i >= 3:  # the first three warm up (the worker is warm from the throughput run)
            lat.append((time.perf_counter() - a) * 1000)
    return {"latencies_ms": lat}


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


async def flow_signal(client: Client, store: PostgresStore, n: int) -> Sample:
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


async def flow_gather(client: Client, n: int) -> Sample:
    assert await (await client.start(fan, 0)).result(timeout=60) == 55  # warm-up
    t0 = time.perf_counter()
    handles = [await client.start(fan, i) for i in range(n)]
    results = [await h.result(timeout=300) for h in handles]
    seconds = time.perf_counter() - t0
    assert results[-1] == sum(n - 1 + k + 1 for k in range(10))
    return {"seconds": seconds}


# --- the floor: plain asyncpg, no engine ----------------------------------------------------

FLOOR_SCHEMA = """
CREATE TABLE floor_runs (
    id uuid PRIMARY KEY, input jsonb NOT NULL, result jsonb,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(), completed_at timestamptz);
CREATE TABLE floor_steps (
    run_id uuid NOT NULL, seq int NOT NULL, result jsonb NOT NULL, PRIMARY KEY (run_id, seq));
"""


async def floor_workflow(conn: asyncpg.Connection, i: int) -> None:
    """The 3-step workflow as 5 autocommit statements: start, 3 step results, finish."""
    rid = uuid.uuid4()
    await conn.execute("INSERT INTO floor_runs (id, input) VALUES ($1, $2::jsonb)", rid, str(i))
    d = {"i": i}
    for seq, key in enumerate("abc", 1):
        d = {**d, key: seq}
        await conn.execute(
            "INSERT INTO floor_steps VALUES ($1, $2, $3::jsonb)", rid, seq, json.dumps(d)
        )
    await conn.execute(
        "UPDATE floor_runs SET result = $2::jsonb, completed_at = clock_timestamp() WHERE id = $1",
        rid,
        json.dumps(d),
    )


async def floor_run(dsn: str, n: int, seq: int) -> Sample:
    """N workflows over CONCURRENCY connections (workflows/s), then ``seq`` one at a time."""
    async with asyncpg.create_pool(dsn, min_size=CONCURRENCY, max_size=CONCURRENCY) as pool:
        todo = iter(range(n))

        async def lane() -> None:
            async with pool.acquire() as conn:
                for i in todo:
                    await floor_workflow(conn, i)

        t0 = time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
        seconds = time.perf_counter() - t0
        lat = []
        async with pool.acquire() as conn:
            for i in range(seq):
                a = time.perf_counter()
                await floor_workflow(conn, i)
                lat.append((time.perf_counter() - a) * 1000)
    return {"seconds": seconds, "n": n, "latencies_ms": lat}


# --- publish --------------------------------------------------------------------------------


async def flow_publish(dsn: str, events: int) -> Sample:
    """PRODUCERS coroutines publish ``events`` events of ``PING`` (each publish its own
    transaction) to one subscriber in a fresh worker process: through the client's
    pool (``pool``), then each producer on its own connection inside its own
    transaction (``conn``, the outbox path). Per path: ``published_s`` (first
    publish -> last publish returned) and ``delivered_s`` (first publish -> the
    subscriber ran the last delivery, on the wall clock both processes share)."""
    argv = (str(FLOW_SCRIPT), "subscriber", "--dsn", dsn, "--concurrency", str(CONCURRENCY))
    sub = await Proc.start("azync_flow subscriber", *argv)
    store = await open_store(dsn, Config(max_pool_size=PRODUCERS + 2), migrate=False)
    client = Client(store)
    conns = [await asyncpg.connect(dsn) for _ in range(PRODUCERS)]
    delivered, out = 0, {}

    async def produce(k: int, count: int, conn: asyncpg.Connection | None) -> None:
        for i in range(k, count, PRODUCERS):
            if conn is None:
                await client.publish(PING, {"i": i})
            else:
                async with conn.transaction():
                    await client.publish(PING, {"i": i}, conn=conn)

    async def burst(count: int, path: str) -> tuple[float, float]:
        nonlocal delivered
        lanes = conns if path == "conn" else [None] * PRODUCERS
        t_wall, t0 = time.time(), time.perf_counter()
        await asyncio.gather(*(produce(k, count, c) for k, c in enumerate(lanes)))
        published = time.perf_counter() - t0
        delivered += count
        at = (await sub.ask(cmd="until", count=delivered))["at"]
        return published, at - t_wall

    try:
        for path in ("pool", "conn"):
            await burst(PRODUCERS * 5, path)  # warm-up: connections, statements
            published, done = await burst(events, path)
            out[path] = {"published_s": published, "delivered_s": done}
    finally:
        for c in conns:
            await c.close()
        await client.close()
        await store.close()
        await sub.stop()
    return out


async def dbos_publish(url: str, events: int) -> Sample:
    """DBOS's closest equivalent: PRODUCERS threads enqueue no-op workflows on a
    queue, one ``queue-worker`` process runs them (``_dbos_workload.py publish``)."""
    argv = (str(DBOS_SCRIPT), "queue-worker", "--url", url, "--concurrency", str(CONCURRENCY))
    worker = await Proc.start("DBOS queue worker", *argv)
    try:
        x = await asyncio.to_thread(
            run_json,
            *(str(DBOS_SCRIPT), "publish", "--url", url, "-n", str(events)),
            *("--producers", str(PRODUCERS)),
        )
    finally:
        await worker.stop()
    return {"pool": {"published_s": x["seconds_published"], "delivered_s": x["seconds_delivered"]}}


FLOOR_EVENTS_SCHEMA = """
CREATE TABLE floor_events (
    id uuid PRIMARY KEY, type text NOT NULL, payload jsonb NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE floor_deliveries (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), event_id uuid NOT NULL,
    subscriber text NOT NULL, state text NOT NULL DEFAULT 'pending',
    run_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON floor_deliveries (state, run_at);
"""

#: One event and its one delivery, one statement, its own (autocommit) transaction.
FLOOR_PUBLISH = """
WITH e AS (INSERT INTO floor_events (id, type, payload) VALUES ($1, $2, $3::jsonb) RETURNING id)
INSERT INTO floor_deliveries (event_id, subscriber) SELECT id, 'sink' FROM e
"""


async def floor_publish(dsn: str, events: int) -> Sample:
    """PRODUCERS connections insert ``events`` event rows, each with its delivery row."""
    conns = [await asyncpg.connect(dsn) for _ in range(PRODUCERS)]

    async def produce(k: int, conn: asyncpg.Connection, count: int) -> None:
        for i in range(k, count, PRODUCERS):
            await conn.execute(FLOOR_PUBLISH, uuid.uuid4(), PING, json.dumps({"i": i}))

    try:
        await asyncio.gather(*(produce(k, c, PRODUCERS * 5) for k, c in enumerate(conns)))
        t0 = time.perf_counter()
        await asyncio.gather(*(produce(k, c, events) for k, c in enumerate(conns)))
        return {"published_s": time.perf_counter() - t0}
    finally:
        for c in conns:
            await c.close()


# --- commits --------------------------------------------------------------------------------


async def settled_commits(admin: str, db: str) -> int:
    """``xact_commit`` of ``db`` once its backends are gone and their stats flushed."""
    conn = await asyncpg.connect(admin)
    try:
        for _ in range(1000):  # exited backends leave pg_stat_activity, then flush stats
            if not await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", db
            ):
                break
            await asyncio.sleep(0.02)
        query = "SELECT xact_commit FROM pg_stat_database WHERE datname = $1"
        last = -1
        while (commits := int(await conn.fetchval(query, db))) != last:
            last = commits
            await asyncio.sleep(0.1)
        return commits
    finally:
        await conn.close()


#: Committed top-level transactions that (or whose subtransactions) wrote a block of
#: database $3, between WAL positions $1 and $2.
WAL_WRITES = r"""
WITH r AS (
    SELECT xid, resource_manager, record_type, description, block_ref
    FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn)
), touched AS (
    SELECT DISTINCT xid::text AS x FROM r
    WHERE xid::text <> '0' AND block_ref ~ ('rel \d+/' || $3::oid::text || '/')
)
SELECT count(*) FROM r
WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT'
  AND EXISTS (
    SELECT 1 FROM touched WHERE x = r.xid::text OR x = ANY (
        string_to_array(trim(substring(r.description FROM 'subxacts: ([0-9 ]+)')), ' ')))
"""


@dataclass
class WriteMeter:
    """Counts the write transactions of one database between two marks.

    Exact where ``pg_walinspect`` can be created (PostgreSQL 15+, superuser): the
    WAL's COMMIT records of transactions that wrote a block of that database. Else
    the ``txid_current()`` advance, which is cluster-wide: other clients of the
    server add to it.
    """

    dsn: str
    exact: bool

    @classmethod
    async def open(cls, dsn: str) -> WriteMeter:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            exact = True
        except asyncpg.PostgresError:
            exact = False
        finally:
            await conn.close()
        return cls(dsn, exact)

    async def mark(self) -> str:
        conn = await asyncpg.connect(self.dsn)
        try:
            if self.exact:
                return str(await conn.fetchval("SELECT pg_current_wal_flush_lsn()::text"))
            return str(await conn.fetchval("SELECT txid_current()"))
        finally:
            await conn.close()

    async def writes(self, db: str, start: str, end: str) -> int:
        if not self.exact:
            return int(end) - int(start) - 1  # the mark's own txid_current()
        conn = await asyncpg.connect(self.dsn)
        try:
            # pg_walinspect refuses a start at the flush point: no WAL, no writes
            if await conn.fetchval("SELECT $2::text::pg_lsn <= $1::text::pg_lsn", start, end):
                return 0
            oid = await conn.fetchval("SELECT oid FROM pg_database WHERE datname = $1", db)
            return int(await conn.fetchval(WAL_WRITES, start, end, oid))
        finally:
            await conn.close()


async def background_writes(admin: str, seconds: float = 2.0) -> float:
    """Write transactions per second other clients commit on the server (txid advance)."""
    conn = await asyncpg.connect(admin)
    try:
        x0 = int(await conn.fetchval("SELECT txid_current()"))
        await asyncio.sleep(seconds)
        x1 = int(await conn.fetchval("SELECT txid_current()"))
        return (x1 - x0 - 1) / seconds
    finally:
        await conn.close()


async def commit_window(
    admin: str, meter: WriteMeter, db: str, run: Callable[[], object]
) -> tuple[int, int]:
    """(commits, write txns) of ``db`` around the process ``run`` starts and waits for."""
    c0, m0 = await settled_commits(admin, db), await meter.mark()
    await asyncio.to_thread(run)
    c1, m1 = await settled_commits(admin, db), await meter.mark()
    return c1 - c0, await meter.writes(db, m0, m1)


# --- where PostgreSQL's time goes -------------------------------------------------------------

#: Top-level statements of the connected database since its reset (the statistics'
#: own statements left out).
STATEMENTS = """
SELECT query, calls, total_exec_time AS ms FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND toplevel
  AND query NOT LIKE '%pg_stat_statements%'
"""
#: Planning time of every statement of the database, nested ones included (PL/pgSQL
#: statements are planned inside their function), where ``track_planning`` is on.
PLANNING = """
SELECT CASE WHEN current_setting('pg_stat_statements.track_planning')::bool
            THEN coalesce(sum(total_plan_time), 0) END
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_statements%'
"""
#: Row updates and HOT updates per table, for the HOT-share rows.
TABLE_UPDATES = "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
PRELOAD_HINT = (
    "pg_stat_statements is not preloaded: PG statement rows are n/a. To get them, add it"
    " to the server's postgresql.conf, shared_preload_libraries = 'pg_stat_statements',"
    " and restart the server."
)


@dataclass
class Statements:
    """``pg_stat_statements`` of one side's database (the extension created there).

    ``reset`` clears that database's entries only (``pg_stat_statements_reset(0,
    dbid, 0)``): other databases' statistics on a shared server are left alone.
    """

    dsn: str
    evicted0: int = 0

    @classmethod
    async def open(cls, dsn: str) -> Statements | None:
        """None when the extension is not preloaded (or cannot be created)."""
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await conn.fetchval("SELECT count(*) FROM pg_stat_statements")
        except asyncpg.PostgresError:
            return None
        finally:
            await conn.close()
        return cls(dsn)

    async def reset(self) -> None:
        conn = await asyncpg.connect(self.dsn)
        try:
            self.evicted0 = int(await conn.fetchval("SELECT dealloc FROM pg_stat_statements_info"))
            await conn.execute(
                "SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database"
                " WHERE datname = current_database()"
            )
        finally:
            await conn.close()

    async def read(self) -> Sample:
        """``rows``: query, calls, ms (total execution time); ``plan_ms``: planning
        time of all statements, nested included (None without ``track_planning``);
        ``evicted``: entries the server evicted meanwhile (``pg_stat_statements.max``
        reached: then the figures may undercount)."""
        conn = await asyncpg.connect(self.dsn)
        try:
            rows = await conn.fetch(STATEMENTS)
            plan = await conn.fetchval(PLANNING)
            evicted = int(await conn.fetchval("SELECT dealloc FROM pg_stat_statements_info"))
        finally:
            await conn.close()
        return {
            "rows": [{"query": r["query"], "calls": r["calls"], "ms": r["ms"]} for r in rows],
            "plan_ms": None if plan is None else float(plan),
            "evicted": evicted - self.evicted0,
        }


@dataclass
class Watch:
    """Where PostgreSQL's time goes for one side's database over a window: its
    statement statistics (``Statements``), and lock waits, backend CPU and the
    machine's busy share from a ``bench/_pg_watch.py`` process."""

    proc: Proc
    statements: Statements | None
    dsn: str
    updates0: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    async def start(cls, env: Env, side: str) -> Watch:
        argv = (str(WATCH_SCRIPT), "--dsn", env.admin, "--db", env.db(side))
        proc = await Proc.start(f"watch {side}", *argv)
        return cls(proc, env.statements.get(side), env.dsn(side))

    async def table_updates(self, settle_s: float = 0.0) -> dict[str, tuple[int, int]]:
        """{table: (updates, HOT updates)} so far. ``settle_s``: wait first, so the
        backends' pending statistics (flushed at most once a second) are in."""
        await asyncio.sleep(settle_s)
        conn = await asyncpg.connect(self.dsn)
        try:
            rows = await conn.fetch(TABLE_UPDATES)
        finally:
            await conn.close()
        return {r["relname"]: (r["n_tup_upd"], r["n_tup_hot_upd"]) for r in rows}

    async def begin(self) -> None:
        if self.statements is not None:
            await self.statements.reset()
        self.updates0 = await self.table_updates(settle_s=1.1)
        await self.proc.ask(cmd="start")

    async def end(self) -> Sample:
        """``{"pg": {...}}``: the watcher's figures, ``statements`` (or None) and
        ``updates``: {table: [updates, HOT updates]} over the window."""
        pg = await self.proc.ask(cmd="stop")
        pg["statements"] = None if self.statements is None else await self.statements.read()
        after = await self.table_updates(settle_s=1.1)
        pg["updates"] = {
            t: [u - self.updates0.get(t, (0, 0))[0], h - self.updates0.get(t, (0, 0))[1]]
            for t, (u, h) in after.items()
        }
        return {"pg": pg}


def _shape(sql: str) -> str:
    """A statement without comments, literals or parameters, whitespace collapsed:
    equal for a named query and its ``pg_stat_statements`` text (which replaces
    constants with ``$n``)."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"'(?:[^']|'')*'|\$\d+|\b\d+(?:\.\d+)?\b", "?", sql)
    return " ".join(sql.split()).lower()


def _named_queries() -> dict[str, str]:
    """{shape: name} of azync_flow's named queries (empty if their module moved)."""
    try:
        from azync_flow.store.postgres._queries import QUERIES
    except ImportError:
        return {}
    return {_shape(sql): name for name, sql in QUERIES.items()}


NAMED = _named_queries()


def statement_label(query: str) -> str:
    """The named-query name of a statement (its leading ``-- name:`` comment, or the
    named query of the same shape), else its first 60 characters."""
    if m := re.match(r"\s*--\s*name:\s*(\S+)", query):
        return m.group(1)
    if name := NAMED.get(_shape(query)):
        return name
    text = " ".join(re.sub(r"--[^\n]*", " ", query).split())
    return text if len(text) <= 60 else text[:57] + "..."


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


# --- the run --------------------------------------------------------------------------------


@dataclass
class Samples:
    """Per workload and side ("flow", "dbos", "absurd", "floor"): one sample per round."""

    by: dict[str, dict[str, list[Sample]]] = field(default_factory=dict)

    def add(self, workload: str, side: str, sample: Sample) -> None:
        self.by.setdefault(workload, {}).setdefault(side, []).append(sample)

    def get(self, workload: str, side: str) -> list[Sample]:
        return self.by.get(workload, {}).get(side, [])


async def both(
    samples: Samples,
    workload: str,
    flow: Callable[[], Awaitable[Sample]],
    dbos: Callable[[], Awaitable[Sample]] | None,
    absurd: Callable[[], Awaitable[Sample]] | None = None,
) -> None:
    """One workload on each side that has it, one after the other."""
    samples.add(workload, "flow", await flow())
    if dbos is not None:
        samples.add(workload, "dbos", await dbos())
    if absurd is not None:
        samples.add(workload, "absurd", await absurd())


class Phases:
    """Progress on one line: each phase's name and seconds."""

    def __init__(self) -> None:
        self.t = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        print(f"{name} {now - self.t:.0f}s", end=" ", flush=True)
        self.t = now


@dataclass
class Env:
    """The server, this run's databases and the write meter.

    Databases are named per run (``azb_<pid>_flow``, ``_dbos``, ``_floor``), so runs
    sharing a server do not drop each other's databases.
    """

    admin: str
    tag: str
    with_dbos: bool
    with_absurd: bool = False
    meter: WriteMeter | None = None
    #: Per engine side, its statement statistics (absent where not preloaded).
    statements: dict[str, Statements] = field(default_factory=dict)

    def db(self, side: str) -> str:
        return f"azb_{self.tag}_{side}"

    def dsn(self, side: str) -> str:
        return with_db(self.admin, self.db(side))

    def sides(self) -> list[str]:
        return ["floor", *self.engines()]

    def engines(self) -> list[str]:
        return (
            ["flow"]
            + (["dbos"] if self.with_dbos else [])
            + (["absurd"] if self.with_absurd else [])
        )

    def commits_argv(self, side: str, k: int, eager: bool = False) -> tuple[str, ...]:
        if side == "flow":
            argv = (str(FLOW_SCRIPT), "commits", "--dsn", self.dsn("flow"), "-n", str(k))
            return (*argv, "--eager") if eager else argv
        return (str(DBOS_SCRIPT), "commits", "--url", self.dsn("dbos"), "-n", str(k))

    async def commits(self, side: str, k: int, eager: bool = False) -> Sample:
        """Commits and write txns of ``side``'s database over a process running K
        workflows (``eager``: azync_flow's client bound to its worker)."""
        assert self.meter is not None
        argv = self.commits_argv(side, k, eager)
        c, x = await commit_window(self.admin, self.meter, self.db(side), lambda: run_json(*argv))
        return {"commits": c, "writes": x}


async def limited_pair(
    s: Samples,
    args: argparse.Namespace,
    client: Client,
    store: PostgresStore,
    worker: Proc,
    limited_first: bool,
) -> None:
    """``--limits``: the burst of ``three`` and of ``three_limited`` back to back on
    one worker, in the order given (alternated by round so neither always runs
    on the warmer system): ``thr_plain`` and ``thr_limited``."""
    runs = [("thr_plain", three), ("thr_limited", three_limited)]
    for name, wf in runs[::-1] if limited_first else runs:
        s.add(name, "flow", await flow_throughput(client, store, args.n, [worker], wf=wf))


async def one_round(
    args: argparse.Namespace, env: Env, heavy: bool = True, limited_first: bool = False
) -> Samples:
    """Every workload once per side, interleaved; publish, scale-out, commit windows,
    floors last.

    Publish and scale-out run with only their side's processes alive (connections
    are scarce), and commit windows with no other process of this run connected.
    ``heavy=False`` skips publish, scale-out and commit windows (they start two to
    five processes per side).
    """
    s = Samples()
    ph = Phases()
    flow_dsn, dbos_url, absurd_url = env.dsn("flow"), env.dsn("dbos"), env.dsn("absurd")
    worker_argv = (str(FLOW_SCRIPT), "worker", "--dsn", flow_dsn, "--concurrency", str(CONCURRENCY))
    starts = [Proc.start("azync_flow worker", *worker_argv)]
    if env.with_dbos:
        starts.append(Proc.start("DBOS", str(DBOS_SCRIPT), "serve", "--url", dbos_url))
    if env.with_absurd:
        absurd_argv = ("serve", "--url", absurd_url, "--concurrency", str(CONCURRENCY))
        starts.append(Proc.start("Absurd", str(ABSURD_SCRIPT), *absurd_argv))
    procs = list(await asyncio.gather(*starts))
    worker = procs[0]
    dbos = procs[1] if env.with_dbos else None
    absurd = procs[-1] if env.with_absurd else None
    watches = {side: await Watch.start(env, side) for side in env.engines()}
    store = await open_store(flow_dsn, Config(max_pool_size=4), migrate=False)
    # results awaited one after another share the client's lingering LISTEN connection
    client = Client(store)
    ph.done("start")

    def on_dbos(mode: str, n: int) -> Callable[[], Awaitable[Sample]] | None:
        return None if dbos is None else (lambda: dbos.ask(mode=mode, n=n))

    def on_absurd(mode: str, n: int) -> Callable[[], Awaitable[Sample]] | None:
        return None if absurd is None else (lambda: absurd.ask(mode=mode, n=n))

    try:
        try:
            await both(
                s,
                "thr",
                lambda: flow_throughput(client, store, args.n, [worker], watches["flow"]),
                None
                if dbos is None
                else (lambda: dbos_throughput(dbos, dbos_url, args.n, watches["dbos"])),
                None
                if absurd is None
                else (lambda: absurd_throughput(absurd, absurd_url, args.n, watches["absurd"])),
            )
            ph.done("thr")
            if args.limits:
                await limited_pair(s, args, client, store, worker, limited_first)
                ph.done("limits")
            await both(
                s,
                "seq",
                lambda: flow_sequential(client, args.seq),
                on_dbos("sequential", args.seq),
                on_absurd("sequential", args.seq),
            )
            s.add("seq_eager", "flow", await worker.ask(cmd="sequential", n=args.seq))
            ph.done("seq")
            await both(
                s,
                "sig",
                lambda: flow_signal(client, store, args.signals),
                on_dbos("signal", args.signals),
                on_absurd("signal", args.signals),
            )
            ph.done("sig")
            await both(
                s,
                "gather",
                lambda: flow_gather(client, args.gather),
                on_dbos("gather", args.gather),
            )
            ph.done("gather")
        finally:
            for p in [*procs, *(w.proc for w in watches.values())]:
                await p.stop()
        if heavy:
            await both(
                s,
                "publish",
                lambda: flow_publish(flow_dsn, args.events),
                (lambda: dbos_publish(dbos_url, args.events)) if env.with_dbos else None,
            )
            ph.done("publish")
            await both(
                s,
                "scale",
                lambda: flow_scale_out(client, store, worker_argv, args.n),
                (lambda: dbos_scale_out(dbos_url, args.n)) if env.with_dbos else None,
            )
            ph.done("scale-out")
    finally:
        await client.close()
        await store.close()
    if heavy:
        await both(
            s,
            "commits",
            lambda: env.commits("flow", args.commit_runs),
            (lambda: env.commits("dbos", args.commit_runs)) if env.with_dbos else None,
        )
        s.add("commits_eager", "flow", await env.commits("flow", args.commit_runs, eager=True))
        ph.done("commits")
    s.add("floor", "floor", await floor_run(env.dsn("floor"), args.n, args.seq))
    if heavy:
        s.add("publish", "floor", await floor_publish(env.dsn("floor"), args.events))
    ph.done("floor")
    return s


async def flow_scale_out(
    client: Client, store: PostgresStore, worker_argv: tuple[str, ...], n: int
) -> Sample:
    """The throughput run with 2 fresh worker processes; the client is this process."""
    workers = await asyncio.gather(
        Proc.start("azync_flow worker 1", *worker_argv),
        Proc.start("azync_flow worker 2", *worker_argv),
    )
    try:
        return await flow_throughput(client, store, n, list(workers))
    finally:
        for w in workers:
            await w.stop()


async def dbos_scale_out(url: str, n: int) -> Sample:
    argv = (str(DBOS_SCRIPT), "queue-worker", "--url", url, "--concurrency", str(CONCURRENCY))
    workers = await asyncio.gather(
        Proc.start("DBOS queue worker 1", *argv), Proc.start("DBOS queue worker 2", *argv)
    )
    try:
        return await asyncio.to_thread(
            run_json, str(DBOS_SCRIPT), "enqueue", "--url", url, "-n", str(n)
        )
    finally:
        for w in workers:
            await w.stop()


async def commit_baselines(env: Env) -> Samples:
    """Commits and write txns of a K = 0 process per side (with the txid meter, the lower
    of two: other clients can only add to it)."""
    assert env.meter is not None
    s = Samples()
    for side in ("flow", "dbos") if env.with_dbos else ("flow",):
        windows = [await env.commits(side, 0) for _ in range(1 if env.meter.exact else 2)]
        s.add("commits0", side, min(windows, key=lambda w: (w["writes"], w["commits"])))
    return s


# --- the table ------------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    ours: float | None
    other: float | None = None
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    #: Not measurable here (the figures' source is missing): shown as n/a.
    na: bool = False
    #: The Absurd side's median and the median of per-round azync_flow / Absurd.
    absurd: float | None = None
    absurd_ratio: float | None = None


def median_or_none(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def compare(
    label: str,
    ours: list[float],
    other: list[float],
    target: str = "",
    ok: Callable[[float, float | None], bool | None] | None = None,
    *,
    additive_noise: bool = False,
    absurd: list[float] | None = None,
    absurd_ok: Callable[[float, float | None], bool | None] | None = None,
) -> Row:
    """Medians per side and the median of per-round ratios; ``met`` is ``ok(ours, ratio)``
    (and ``absurd_ok(ours, ratio to Absurd)`` where given).

    ``additive_noise``: for counts that other clients of the server can only raise
    (cluster-wide txids), each side's minimum over rounds and their ratio instead.
    ``absurd``: the Absurd side's series, compared to ``ours`` the same way.
    """
    if additive_noise:
        a, b = min(ours, default=None), min(other, default=None)
        ratio = a / b if a is not None and b else None
        row = Row(label, a, b, ratio, target)
    else:
        ratios = [x / y for x, y in zip(ours, other, strict=False) if y]
        row = Row(label, median_or_none(ours), median_or_none(other), median_or_none(ratios))
        row.target = target
    if absurd:
        row.absurd = median_or_none(absurd)
        row.absurd_ratio = median_or_none([x / y for x, y in zip(ours, absurd, strict=False) if y])
    if ok is not None and row.ours is not None:
        row.met = ok(row.ours, row.ratio)
    if absurd_ok is not None and row.ours is not None:
        met = absurd_ok(row.ours, row.absurd_ratio)
        row.met = None if row.met is None or met is None else row.met and met
    return row


def build_rows(
    s: Samples,
    base: Samples,
    args: argparse.Namespace,
    replay: dict[int, tuple[float, float]],
    exact_writes: bool,
) -> list[Row]:
    def series(workload: str, side: str, fn: Callable[[Sample], float]) -> list[float]:
        return [fn(x) for x in s.get(workload, side)]

    def row(
        label: str,
        workload: str,
        fn: Callable[[Sample], float],
        target: str = "",
        ok: Callable[[float, float | None], bool | None] | None = None,
        absurd_ok: Callable[[float, float | None], bool | None] | None = None,
    ) -> Row:
        return compare(
            label,
            series(workload, "flow", fn),
            series(workload, "dbos", fn),
            target,
            ok,
            absurd=series(workload, "absurd", fn),
            absurd_ok=absurd_ok,
        )

    def per_sec(n: int) -> Callable[[Sample], float]:
        return lambda x: n / x["seconds"]

    def p(q: float) -> Callable[[Sample], float]:
        return lambda x: pct(x["latencies_ms"], q)

    def ratio_at_least(t: float) -> Callable[[float, float | None], bool | None]:
        return lambda _ours, ratio: None if ratio is None else ratio >= t

    def ratio_at_most(t: float) -> Callable[[float, float | None], bool | None]:
        return lambda _ours, ratio: None if ratio is None else ratio <= t

    def per_wf(key: str, side: str) -> Callable[[Sample], float]:
        b = base.get("commits0", side)[0][key]
        return lambda x: (x[key] - b) / args.commit_runs

    def pg_row(label: str, fn: Callable[[Sample], float | None]) -> Row:
        """A row from the throughput run's ``pg`` figures; n/a where a side has none."""

        def side(name: str) -> list[float]:
            xs = [fn(x["pg"]) for x in s.get("thr", name) if "pg" in x]
            return [x for x in xs if x is not None]

        ours, other, absurd = side("flow"), side("dbos"), side("absurd")
        if not ours and not other:
            return Row(label, None, na=True)
        return compare(label, ours, other, absurd=absurd)

    def statements(fn: Callable[[Sample], float | None]) -> Callable[[Sample], float | None]:
        return lambda pg: None if pg["statements"] is None else fn(pg["statements"])

    def hot_share(pg: Sample, table: str | None) -> float | None:
        """HOT updates / updates over the run (``table="run"``: the side's run table,
        found by name among its tables; None: all of them)."""
        updates = pg.get("updates") or {}
        if table is not None:
            names = set(RUN_TABLE.values())
            updates = {t: v for t, v in updates.items() if t in names}
        total = sum(u for u, _ in updates.values())
        return sum(h for _, h in updates.values()) / total if total else None

    def burst(q: float) -> Callable[[Sample], float]:
        return lambda x: pct(x["burst_ms"], q)

    def events_per_s(path: str, key: str) -> Callable[[Sample], float]:
        return lambda x: args.events / x[path][key]

    n = args.n
    rows = [
        row(
            "3-activity workflows/s",
            "thr",
            per_sec(n),
            ">= 3x, A 1.5x",
            ratio_at_least(3),
            ratio_at_least(1.5),
        ),
        *(
            [
                compare(
                    "  under a global limit of 1000 / without (same worker)",
                    series("thr_limited", "flow", per_sec(n)),
                    series("thr_plain", "flow", per_sec(n)),
                    ">= 0.9x",
                    ratio_at_least(0.9),
                ),
                compare(
                    "  p50 ms under the limit / without",
                    series("thr_limited", "flow", p(50)),
                    series("thr_plain", "flow", p(50)),
                ),
            ]
            if args.limits
            else []
        ),
        row("  start-to-finish p50 ms (own rows)", "thr", p(50), "<= 0.5x", ratio_at_most(0.5)),
        row("  start-to-finish p99 ms (own rows)", "thr", p(99)),
        row(f"  burst of {n}: p50 ms, one clock", "thr", burst(50)),
        row(f"  burst of {n}: p99 ms, one clock", "thr", burst(99)),
        row("  worker CPU ms / workflow", "thr", lambda x: x["cpu_s"] * 1000 / n),
        row(
            "  worker + client CPU ms / workflow",
            "thr",
            lambda x: (x["cpu_s"] + x.get("client_cpu_s", 0.0)) * 1000 / n,
        ),
        pg_row(
            "  PG statement ms / workflow",
            statements(lambda st: sum(r["ms"] for r in st["rows"]) / n),
        ),
        pg_row(
            "  PG statements / workflow",
            statements(lambda st: sum(r["calls"] for r in st["rows"]) / n),
        ),
        pg_row(
            "  PG backend CPU ms / workflow",
            lambda pg: None if pg["backend_cpu_s"] is None else pg["backend_cpu_s"] * 1000 / n,
        ),
        pg_row(
            "  PG planning ms / workflow (nested too)",
            statements(lambda st: None if st.get("plan_ms") is None else st["plan_ms"] / n),
        ),
        pg_row("  PG lock-wait ms / workflow", lambda pg: pg["lock_wait_s"] * 1000 / n),
        pg_row("  PG HOT share of updates, all tables", lambda pg: hot_share(pg, None)),
        pg_row("  PG HOT share, run table*", lambda pg: hot_share(pg, "run")),
        pg_row(
            "  machine CPU busy %",
            lambda pg: None if pg["cpu_busy"] is None else pg["cpu_busy"] * 100,
        ),
        row("sequential p50 ms, remote client", "seq", p(50), "<= 0.5x", ratio_at_most(0.5)),
        row("sequential p99 ms, remote client", "seq", p(99)),
        compare(
            "sequential p50 ms, in-process (eager)",
            series("seq_eager", "flow", p(50)),
            series("seq", "dbos", p(50)),
        ),
        compare(
            "sequential p99 ms, in-process (eager)",
            series("seq_eager", "flow", p(99)),
            series("seq", "dbos", p(99)),
        ),
        row("signal -> resume p50 ms", "sig", p(50), "<= 0.5x", ratio_at_most(0.5)),
        row("signal -> resume p99 ms", "sig", p(99)),
        row("gather of 10 activities: workflows/s", "gather", per_sec(args.gather)),
        row("scale-out (2 workers + client): wf/s", "scale", per_sec(n)),
        row(
            f"publish, {PRODUCERS} producers: events/s",
            "publish",
            events_per_s("pool", "published_s"),
        ),
        row(
            "  delivered to 1 subscriber: events/s", "publish", events_per_s("pool", "delivered_s")
        ),
        compare(
            "  conn= (caller's txn): events/s",
            series("publish", "flow", events_per_s("conn", "published_s")),
            [],
        ),
        compare(
            "  conn=: delivered: events/s",
            series("publish", "flow", events_per_s("conn", "delivered_s")),
            [],
        ),
    ]
    flow_commits = series("commits", "flow", per_wf("commits", "flow"))
    flow_writes = series("commits", "flow", per_wf("writes", "flow"))
    dbos_commits, dbos_writes = [], []
    if base.get("commits0", "dbos"):
        dbos_commits = series("commits", "dbos", per_wf("commits", "dbos"))
        dbos_writes = series("commits", "dbos", per_wf("writes", "dbos"))
    rows.append(compare("commits / workflow (xact_commit)", flow_commits, dbos_commits))
    rows.append(
        compare(
            "write txns / workflow, remote client",
            flow_writes,
            dbos_writes,
            "<= 6",
            lambda ours, _ratio: ours <= 6,
            additive_noise=not exact_writes,
        )
    )
    rows.append(
        compare(
            "write txns / workflow, eager start",
            series("commits_eager", "flow", per_wf("writes", "flow")),
            [],
            "<= 4",
            lambda ours, _ratio: ours <= 4,
            additive_noise=not exact_writes,
        )
    )
    floor = s.get("floor", "floor")
    rows.append(
        compare(
            "workflows/s vs floor*",
            series("thr", "flow", per_sec(n)),
            [x["n"] / x["seconds"] for x in floor],
            ">= 0.4x",
            ratio_at_least(0.4),
        )
    )
    rows.append(
        compare(
            "sequential p50 ms vs floor*",
            series("seq", "flow", p(50)),
            [pct(x["latencies_ms"], 50) for x in floor],
        )
    )
    floor_events = [args.events / x["published_s"] for x in s.get("publish", "floor")]
    for path, label in (("pool", "publish events/s vs floor*"), ("conn", "  conn= vs floor*")):
        rows.append(
            compare(
                label, series("publish", "flow", events_per_s(path, "published_s")), floor_events
            )
        )
    cached10 = replay[10][1]
    for events in (100, 1_000, 10_000):
        full, cached = replay[events]
        rows.append(Row(f"replay {events:>6} events: full ms", full))
        ratio = cached / cached10
        rows.append(
            Row("  cached pass us (ratio: / event 10)", cached, None, ratio, "<= 2x", ratio <= 2)
        )
    return rows


def top_statements(thr: list[Sample], n: int, k: int = 5) -> list[tuple[str, float, float, float]]:
    """The ``k`` costliest statements of one side's throughput runs: (label, calls /
    workflow, mean ms, total ms / workflow), summed over rounds (statements with one
    label merged)."""
    calls: collections.Counter[str] = collections.Counter()
    ms: collections.Counter[str] = collections.Counter()
    rounds = 0
    for x in thr:
        st = x.get("pg", {}).get("statements")
        if st is None:
            continue
        rounds += 1
        for r in st["rows"]:
            label = statement_label(r["query"])
            calls[label] += r["calls"]
            ms[label] += r["ms"]
    runs = rounds * n
    return [
        (label, calls[label] / runs, total / calls[label] if calls[label] else 0.0, total / runs)
        for label, total in ms.most_common(k)
    ]


def lock_events(thr: list[Sample], n: int) -> str:
    """Lock-wait ms / workflow per wait event, over one side's rounds."""
    waits: collections.Counter[str] = collections.Counter()
    for x in thr:
        waits.update(x.get("pg", {}).get("lock_events", {}))
    runs = len(thr) * n
    return ", ".join(f"{e} {v * 1000 / runs:.2f}" for e, v in waits.most_common()) or "none"


def print_table(
    rows: list[Row],
    s: Samples,
    args: argparse.Namespace,
    background: list[float],
    pgss: bool,
) -> None:
    def num(x: float | None) -> str:
        if x is None:
            return "-"
        return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"

    def times(x: float | None) -> str:
        return f"{x:.2f}x" if x is not None else "-"

    console = Console(width=132, highlight=False)
    table = Table(
        "metric", "azync_flow", "DBOS*", "ratio", "Absurd", "vs A", "target", "met", box=None
    )
    for col in table.columns[1:6]:
        col.justify = "right"
    for r in rows:
        if r.na:
            table.add_row(r.label, "n/a", "n/a", "-", "n/a", "-", r.target, "")
            continue
        met = "" if r.met is None else ("yes" if r.met else "NO")
        table.add_row(
            r.label,
            num(r.ours),
            num(r.other),
            times(r.ratio),
            num(r.absurd),
            times(r.absurd_ratio),
            r.target,
            met,
        )
    console.print(table)

    sides = (("flow", "azync_flow"), ("dbos", "DBOS"), ("absurd", "Absurd"))
    thr = {side: s.get("thr", side) for side, _ in sides}
    if pgss and thr["flow"]:
        top = Table(
            "side",
            "top statements by total time (throughput run)",
            "calls / wf",
            "mean ms",
            "total ms / wf",
            box=None,
        )
        for col in top.columns[2:]:
            col.justify = "right"
        for side, name in sides:
            for label, calls, mean, total in top_statements(thr[side], args.n):
                top.add_row(name, label, f"{calls:.2f}", f"{mean:.3f}", f"{total:.3f}")
        console.print()
        console.print(top)

    evicted = sum(
        (x["pg"]["statements"] or {}).get("evicted", 0)
        for side in thr.values()
        for x in side
        if "pg" in x
    )
    notes = [
        f"Medians over {args.rounds} round(s); ratio = median over rounds of azync_flow / DBOS"
        " (per round, so machine noise falls on both sides)."
        + (" --quick: publish, scale-out and commit rows from round 1 only." if args.quick else ""),
        "* floor rows: the DBOS* column is the floor, plain asyncpg with no engine (workflows:"
        f" 5 commits per workflow; publish: {PRODUCERS} connections inserting an event row and"
        " its delivery row, one statement each).",
        "publish, DBOS: no event ledger; its closest equivalent, a DBOSClient enqueueing"
        " no-op workflows on a queue run by one queue worker (polling every 0.1 s).",
        "PG rows: the 3-activity run, the side's database only (pg_stat_statements top-level"
        " statements; backends' /proc CPU; pg_stat_activity sampled every 5 ms for lock"
        " waits). Lock-wait ms / workflow by wait event: "
        + "; ".join(f"{name} {lock_events(thr[side], args.n)}" for side, name in sides if thr[side])
        + ". Planning: every statement's, PL/pgSQL's nested ones included"
        " (pg_stat_statements.track = all and track_planning = on give the full figure)."
        " HOT share: pg_stat_user_tables over the run; run table*: "
        + ", ".join(f"{name} {RUN_TABLE[side]}" for side, name in sides)
        + ".",
        "Absurd: one process runs its worker loop (concurrency"
        f" {CONCURRENCY}, one shared connection) and its client, which polls for results every"
        " 5 ms (no push); rows without an Absurd figure have no Absurd workload.",
        "write txns: COMMIT records in the WAL of transactions that wrote the side's"
        " database (pg_walinspect)."
        if not background
        else "write txns: txid advance (cluster-wide; minimum over rounds). Other clients'"
        " write txns/s on the server before / after: "
        + " / ".join(f"{b:.0f}" for b in background)
        + ("  <- not idle: the row is unreliable" if max(background) >= 1 else ""),
        f"{os.cpu_count()} CPUs; PostgreSQL shared by all sides.",
    ]
    if not pgss:
        notes.insert(0, PRELOAD_HINT)
    if evicted:
        notes.insert(
            0,
            f"pg_stat_statements evicted {evicted} entries during the runs (a count for the"
            " whole server, pg_stat_statements.max reached): if the side's entries were"
            " among them, the statement rows undercount.",
        )
    console.print()
    for note in notes:
        console.print(note, soft_wrap=True)


async def bench(args: argparse.Namespace) -> None:
    admin, where = (args.dsn, "--dsn") if args.dsn else resolve_dsn()
    with_dbos = not args.no_dbos and importable("import dbos, sqlalchemy, psycopg")
    with_absurd = not args.no_absurd and importable("import absurd_sdk, absurdctl, psycopg")
    env = Env(admin, str(os.getpid()), with_dbos, with_absurd)
    print(f"PostgreSQL: {where}; databases {', '.join(env.db(s) for s in env.sides())}")
    if not with_dbos:
        print("DBOS: not importable (pip install 'azync-flow[bench]') or --no-dbos; no DBOS side")
    if not with_absurd:
        print(
            "Absurd: not importable (pip install 'azync-flow[bench]') or --no-absurd;"
            " no Absurd side"
        )
    for side in env.sides():
        await recreate(admin, env.db(side))
    try:
        await run_rounds(args, env)
    finally:
        conn = await asyncpg.connect(admin)
        try:
            for side in env.sides():
                await conn.execute(f'DROP DATABASE IF EXISTS "{env.db(side)}" WITH (FORCE)')
        finally:
            await conn.close()


async def run_rounds(args: argparse.Namespace, env: Env) -> None:
    t0 = time.perf_counter()
    print("set-up and commit baselines (K = 0 processes) ...", end=" ", flush=True)
    (await open_store(env.dsn("flow"), Config())).pool.terminate()  # migrate once
    floor_conn = await asyncpg.connect(env.dsn("floor"))
    await floor_conn.execute(FLOOR_SCHEMA + FLOOR_EVENTS_SCHEMA)
    await floor_conn.close()
    for side in env.engines():
        if (stmts := await Statements.open(env.dsn(side))) is not None:
            env.statements[side] = stmts
    env.meter = meter = await WriteMeter.open(env.dsn("floor"))
    if env.with_dbos:  # DBOS creates its schema at its first launch: not in a window
        run_json(*env.commits_argv("dbos", 0))
    background = [] if meter.exact else [await background_writes(env.admin)]
    base = await commit_baselines(env)
    print(f"{time.perf_counter() - t0:.0f}s", flush=True)
    samples = Samples()
    for r in range(args.rounds):
        t0 = time.perf_counter()
        print(f"round {r + 1}/{args.rounds}:", end=" ", flush=True)
        got = await one_round(args, env, heavy=not args.quick or r == 0, limited_first=r % 2 == 1)
        for workload, sides in got.by.items():
            for side, xs in sides.items():
                for x in xs:
                    samples.add(workload, side, x)
        print(f"= {time.perf_counter() - t0:.0f}s", flush=True)
    if not meter.exact:
        background.append(await background_writes(env.admin))
    print("replay ...", flush=True)
    rows = build_rows(samples, base, args, replay_times(), meter.exact)
    print()
    print_table(rows, samples, args, background, bool(env.statements))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("AZYNC_DSN"))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (>= 1)")
    parser.add_argument("-n", type=int, default=1000, help="workflows in the throughput runs")
    parser.add_argument("--seq", type=int, default=200, help="sequential workflows")
    parser.add_argument("--signals", type=int, default=100, help="signal -> resume runs")
    parser.add_argument("--gather", type=int, default=200, help="gather-of-10 workflows")
    parser.add_argument("--commit-runs", type=int, default=200, help="workflows per commit count")
    parser.add_argument("--events", type=int, default=2000, help="events per publish run")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"small sizes ({', '.join(f'{k}={v}' for k, v in QUICK.items())}), ~3 min",
    )
    parser.add_argument("--no-dbos", action="store_true", help="skip the DBOS side")
    parser.add_argument("--no-absurd", action="store_true", help="skip the Absurd side")
    parser.add_argument(
        "--limits",
        action="store_true",
        help="add the 3-activity burst under a generous global ConcurrencyLimit, each round"
        " next to the same burst without it (order alternated by round)",
    )
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    sizes = (args.n, args.seq, args.signals, args.gather, args.commit_runs, args.events)
    if min(args.rounds, *sizes) < 1:
        parser.error("--rounds and every size must be >= 1")
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
