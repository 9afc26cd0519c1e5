"""Idle cost benchmark: does an idle worker cost more with work parked in the store?

    python bench/idle.py [--parked 100000] [--minutes 0.5] [--rounds 3] [--dsn DSN]
    python bench/idle.py --explain [--parked 100000]

DSN: ``--dsn``, else ``$AZYNC_DSN``, else an embedded server. The bench creates two
databases on that server and drops them at its end: ``azb_<pid>_idle_parked``, holding
``--parked`` executions parked for weeks, and ``azb_<pid>_idle_empty``, the baseline
with none.

Parked executions. A real worker runs one of each workflow of
``bench/_flow_workload.py``'s ``PARKED`` to its wait (one activity, then a wait for a
signal with no timeout; the same wait with a 30-day timeout; a 30-day sleep), so the
store holds what the product writes for them: the running execution row, its history,
its succeeded workflow task and operation, and, for the timed ones, the unfired timer
and the workflow task scheduled at it. Those rows are then cloned in bulk (fresh ids,
times shifted back by up to 14 days so nothing comes due) up to ``--parked``
executions, and the tables are vacuumed and analyzed, as weeks of autovacuum leave them.

Measure. Each round runs, on each database (the order alternates per round), a fresh
worker process (``bench/_flow_workload.py worker``: a real ``Worker`` with the
workflow runtime attached, leader maintenance at its default tick) alone for
``--minutes``, after a warm-up of ``WARMUP_S`` seconds (start-up, leader election and
the stalled-run repair's first sweep are left out: they are once per leadership term,
not per minute). Per side, the median over rounds of: the worker process's CPU
(``time.process_time``) per minute, and PostgreSQL's statement time per minute — the
sum of ``total_exec_time`` over the database's entries in ``pg_stat_statements`` (reset
for that database only at the start of the window) — and the 5 costliest statements of
the parked side with their empty-side time; ratios parked / empty (target ~1x: idle
cost must not grow with parked work).

``pg_stat_statements`` must be preloaded by the server (``shared_preload_libraries =
'pg_stat_statements'`` in postgresql.conf, then a restart); the bench creates the
extension in its databases. Without it the bench stops and says so.

``--explain`` instead prints ``EXPLAIN (ANALYZE, BUFFERS)`` timings of every periodic
statement of an idle worker (leader maintenance and idle lease polls) against the
parked database, planned both as custom plans (the first executions of a prepared
statement) and as the generic plan (what a long-lived pool may settle on).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _flow_workload import PARKED
from workflows import FLOW_SCRIPT, Proc, recreate, with_db

from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.postgres._queries import QUERIES

#: Seconds a fresh worker runs before its window is measured.
WARMUP_S = 10.0
#: The tables holding a parked execution's rows, cloned in this order (FKs).
CLONED = (
    "azync_workflow_executions",
    "azync_workflow_history",
    "azync_jobs",
    "azync_workflow_timers",
    "azync_workflow_signals",
)
#: The column of each table that names the execution.
OWNER = {"azync_workflow_executions": "id", "azync_jobs": "run_id"}

Sample = dict[str, Any]


# --- the parked store -----------------------------------------------------------------------


async def park_templates(dsn: str) -> list[uuid.UUID]:
    """One execution of each ``PARKED`` workflow, run by a real worker to its wait."""
    worker = await Proc.start("worker", str(FLOW_SCRIPT), "worker", "--dsn", dsn)
    store = await open_store(dsn, Config(max_pool_size=2), migrate=False)
    try:
        client = Client(store)
        ids = [(await client.start(wf, i)).id for i, wf in enumerate(PARKED)]
        query = (
            "SELECT count(*) FROM azync_workflow_executions e WHERE e.id = any($1::uuid[])"
            " AND e.state = 'running' AND e.next_seq > 2 AND NOT EXISTS ("
            "  SELECT 1 FROM azync_jobs j WHERE j.run_id = e.id"
            "  AND j.state IN ('pending', 'active'))"
        )
        for _ in range(600):
            if await store.pool.fetchval(query, ids) == len(ids):
                return ids
            await asyncio.sleep(0.1)
        raise TimeoutError("the template executions did not park within 60 s")
    finally:
        await store.close()
        await worker.stop()


async def clone_parked(conn: asyncpg.Connection, templates: list[uuid.UUID], n: int) -> None:
    """Clone the templates' rows into ``n`` parked executions in all (bulk INSERTs)."""
    per = -(-n // len(templates))
    await conn.execute(
        "CREATE TEMP TABLE clone_map AS"
        " SELECT t.id AS tid, gen_random_uuid() AS nid,"
        "        -(random() * interval '14 days') AS shift"
        " FROM unnest($1::uuid[]) AS t(id), generate_series(2, $2::int) AS g(k)"
        " ORDER BY g.k, t.id LIMIT $3",
        templates,
        per,
        max(n - len(templates), 0),
    )
    for table in CLONED:
        cols = await conn.fetch(
            "SELECT column_name AS name, data_type AS type, column_default AS dflt"
            " FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = $1"
            " ORDER BY ordinal_position",
            table,
        )
        owner = OWNER.get(table, "workflow_id")
        names, exprs = [], []
        for c in cols:
            name, kind = c["name"], c["type"]
            if name == owner:
                expr = "m.nid"
            elif (c["dflt"] or "").startswith("nextval("):
                continue  # bigserial ids: fresh from the sequence
            elif table == "azync_jobs" and name in ("id", "lease_token"):
                expr = f"CASE WHEN s.{name} IS NOT NULL THEN gen_random_uuid() END"
            elif table == "azync_jobs" and name == "task_key":
                expr = "replace(s.task_key, m.tid::text, m.nid::text)"
            elif kind == "timestamp with time zone":
                expr = f"s.{name} + m.shift"
            else:
                expr = f"s.{name}"
            names.append(name)
            exprs.append(expr)
        await conn.execute(
            f"INSERT INTO {table} ({', '.join(names)})"
            f" SELECT {', '.join(exprs)} FROM {table} s JOIN clone_map m ON s.{owner} = m.tid"
        )
    await conn.execute("DROP TABLE clone_map")
    for table in CLONED:
        await conn.execute(f"VACUUM ANALYZE {table}")


async def prepare_db(admin: str, db: str, parked: int) -> str:
    """Create ``db`` with the schema, pg_stat_statements and ``parked`` executions."""
    await recreate(admin, db)
    dsn = with_db(admin, db)
    store = await open_store(dsn, Config(max_pool_size=2), migrate=True)
    await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.fetchval("SELECT count(*) FROM pg_stat_statements")  # preloaded?
    except asyncpg.PostgresError as exc:
        await conn.close()
        raise SystemExit(
            f"pg_stat_statements is not usable on this server ({exc}); preload it:"
            " shared_preload_libraries = 'pg_stat_statements' in postgresql.conf, restart"
        ) from exc
    try:
        if parked > 0:
            t0 = time.perf_counter()
            templates = await park_templates(dsn)
            await clone_parked(conn, templates, parked)
            print(f"{db}: {parked} parked executions in {time.perf_counter() - t0:.0f} s")
    finally:
        await conn.close()
    return dsn


# --- one idle window ------------------------------------------------------------------------


async def idle_window(dsn: str, minutes: float) -> Sample:
    """A fresh worker alone on ``dsn``: its CPU and the database's statement time."""
    conn = await asyncpg.connect(dsn)
    worker = await Proc.start("worker", str(FLOW_SCRIPT), "worker", "--dsn", dsn)
    try:
        await asyncio.sleep(WARMUP_S)
        dbid = await conn.fetchval("SELECT oid FROM pg_database WHERE datname = current_database()")
        await conn.execute("SELECT pg_stat_statements_reset(0, $1::oid, 0)", dbid)
        cpu0 = (await worker.ask(cmd="cpu"))["cpu_s"]
        await asyncio.sleep(minutes * 60)
        cpu1 = (await worker.ask(cmd="cpu"))["cpu_s"]
        rows = await conn.fetch(
            "SELECT query, calls, total_exec_time AS ms FROM pg_stat_statements"
            " WHERE dbid = $1 AND query NOT LIKE '%pg_stat_statements%'",
            dbid,
        )
    finally:
        await worker.stop()
        await conn.close()
    statements = {" ".join(r["query"].split()): (float(r["ms"]), int(r["calls"])) for r in rows}
    return {
        "cpu_ms_min": (cpu1 - cpu0) * 1000 / minutes,
        "pg_ms_min": sum(ms for ms, _ in statements.values()) / minutes,
        "calls_min": sum(c for _, c in statements.values()) / minutes,
        "statements": {q: ms / minutes for q, (ms, _) in statements.items()},
    }


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def print_table(parked: int, minutes: float, sides: dict[str, list[Sample]]) -> None:
    full, empty = sides["parked"], sides["empty"]
    print(
        f"\nidle worker, {minutes:g} min windows, median of {len(full)} rounds"
        f" (parked = {parked:,} executions; target ~1x)\n"
    )
    print(f"{'':<44}{'parked':>12}{'empty':>12}{'ratio':>10}")
    for key, label in (
        ("cpu_ms_min", "worker CPU ms / min"),
        ("pg_ms_min", "PostgreSQL statement ms / min"),
        ("calls_min", "statements / min"),
    ):
        a = statistics.median(s[key] for s in full)
        b = statistics.median(s[key] for s in empty)
        print(f"{label:<44}{a:>12.1f}{b:>12.1f}{ratio(a, b):>10}")
    costs: dict[str, tuple[float, float]] = {}
    for q in {q for s in full for q in s["statements"]}:
        a = statistics.median(s["statements"].get(q, 0.0) for s in full)
        b = statistics.median(s["statements"].get(q, 0.0) for s in empty)
        costs[q] = (a, b)
    print("\n5 costliest statements on the parked side, ms / min:")
    for q, (a, b) in sorted(costs.items(), key=lambda kv: -kv[1][0])[:5]:
        print(f"  {a:>8.2f} {b:>8.2f} {ratio(a, b):>8}  {q[:90]}")


# --- EXPLAIN of the periodic statements -----------------------------------------------------

#: Stands for the stalled scan's cursor once caught up (filled in by ``explain``).
HEAD = object()

#: Every statement an idle worker runs periodically: (query name, parameters after $1).
PERIODIC: list[tuple[str, tuple[Any, ...]]] = [
    ("job_promote_due", ("queue", None, "azync_flow")),
    ("job_reap_expired", ("queue", None, 5, "azync_flow")),
    ("job_vacuum_completed", ("queue", timedelta(days=7), 1000)),
    ("workflow_promote_due", (None, "azync_flow")),
    ("workflow_expired", (True, 100)),
    ("workflow_expired", (False, 100)),
    ("workflow_op_expired_nonidempotent", (100,)),
    ("uncertain_list_unreconciled", (["$op:step_a@1"], 100)),
    # the stalled repair: its first batch (once per leadership term), then each
    # run once caught up (the cursor at the newest aged execution)
    ("workflow_stalled_scan", (timedelta(minutes=5), None, None, 1000)),
    ("workflow_stalled_scan", (timedelta(minutes=5), HEAD, HEAD, 1000)),
    ("workflow_vacuum", (timedelta(days=7),)),
    ("workflow_runs_vacuum", (timedelta(days=7),)),
    ("stats_vacuum", ("queue", timedelta(days=90))),
    ("idempotency_vacuum", ("queue",)),
    ("schedule_due", (100,)),
    ("schedule_with_pending_runs", ()),
    ("workflow_task_lease_load", ("$wft", 16, timedelta(seconds=30), [], [])),
    ("job_dequeue", ("workflow", "$op:step_a@1", 16, timedelta(seconds=30), 25, False)),
    ("workflow_query_claim", ([w.name for w in PARKED], 16)),
    ("event_dequeue", ("subscriber", 16, timedelta(seconds=30), 25, False)),
    ("dag_dequeue", (["task"], 16, timedelta(seconds=30), 25)),
    ("dag_reap_expired", (5,)),
    ("dag_complete_due_sleeps", ("azync_flow",)),
    ("job_pending_partitions", ()),
]


async def explain_one(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...]) -> float:
    """Best of 3 ``EXPLAIN ANALYZE`` execution times, ms (each in a rolled-back transaction)."""
    best = float("inf")
    for _ in range(3):
        tx = conn.transaction()
        await tx.start()
        try:
            plan = await conn.fetchval(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", None, *args
            )
        finally:
            await tx.rollback()
        best = min(best, float(json.loads(plan)[0]["Execution Time"]))
    return best


async def explain(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        print(f"\n{'statement':<40}{'custom ms':>12}{'generic ms':>12}")
        head = await conn.fetchrow(
            "SELECT updated_at, id FROM azync_workflow_executions WHERE state = 'running'"
            " AND updated_at <= now() - interval '5 minutes' ORDER BY updated_at DESC, id DESC"
            " LIMIT 1"
        )
        for name, spec in PERIODIC:
            args = tuple(
                (head[0] if i == 1 else head[1]) if a is HEAD else a for i, a in enumerate(spec)
            )
            out = []
            for mode in ("force_custom_plan", "force_generic_plan"):
                await conn.execute(f"SET plan_cache_mode = {mode}")
                out.append(await explain_one(conn, QUERIES[name], args))
            label = name + {"workflow_expired": f" tasks={args[0]}"}.get(name, "")
            if name == "workflow_stalled_scan":
                label += " (caught up)" if HEAD in spec else " (first batch)"
            print(f"{label:<40}{out[0]:>12.3f}{out[1]:>12.3f}")
    finally:
        await conn.close()


# --- main -----------------------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> None:
    admin = args.dsn or resolve_dsn()[0]
    base = f"azb_{os.getpid()}_idle"
    names = {"parked": f"{base}_parked", "empty": f"{base}_empty"}
    try:
        parked_dsn = await prepare_db(admin, names["parked"], args.parked)
        if args.explain:
            await explain(parked_dsn)
            return
        dsns = {"parked": parked_dsn, "empty": await prepare_db(admin, names["empty"], 0)}
        sides: dict[str, list[Sample]] = {"parked": [], "empty": []}
        for r in range(args.rounds):
            order = ["empty", "parked"] if r % 2 == 0 else ["parked", "empty"]
            for side in order:
                sample = await idle_window(dsns[side], args.minutes)
                sides[side].append(sample)
                print(
                    f"round {r + 1} {side:>6}: worker CPU {sample['cpu_ms_min']:.0f} ms/min,"
                    f" PostgreSQL {sample['pg_ms_min']:.1f} ms/min",
                    flush=True,
                )
        print_table(args.parked, args.minutes, sides)
    finally:
        conn = await asyncpg.connect(admin)
        try:
            for db in names.values():
                await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        finally:
            await conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parked", type=int, default=100_000, help="parked executions")
    ap.add_argument("--minutes", type=float, default=0.5, help="measured window per side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dsn", default=os.environ.get("AZYNC_DSN"))
    ap.add_argument("--explain", action="store_true", help="EXPLAIN the periodic statements")
    asyncio.run(bench(ap.parse_args()))


if __name__ == "__main__":
    main()
