"""Console page times with 100,000 executions in the schema.

    python bench/console_pages.py [--executions 100000] [--requests 40] [--dsn DSN]
    python bench/console_pages.py --explain

DSN: ``--dsn``, else ``$AZYNC_DSN``, else the embedded server. The bench creates a
schema ``console_bench_<hex>``, fills it with ``--executions`` execution rows in
one statement (20 workflow names; 70 % succeeded, 10 % failed, 10 % running, 5 %
cancelled, 5 % suspended; created over the last 30 days; half with a business
key), analyzes it, starts ``azync-flow ui`` on it in a subprocess (as a user
would), and times ``--requests`` GETs of each page below from this process (the
whole HTTP round trip: the console's queries, rendering, transfer), after two
warm-up requests each. Prints p50 / p95 / max per page; the target is p95 under
200 ms for the executions pages. The schema is dropped at the end.

``--explain`` prints ``EXPLAIN (ANALYZE, BUFFERS)`` of the executions query for
each filter instead (where an index would help, the plan shows it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid

import asyncpg

from azync_flow.embedded import resolve_dsn
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.postgres._queries import QUERIES

FILL = """
INSERT INTO azync_workflow_executions
    (id, name, state, business_idempotency_key, input, result, created_at, updated_at,
     completed_at)
SELECT gen_random_uuid(),
       'workflow_' || (i % 20),
       CASE WHEN i % 20 < 14 THEN 'succeeded' WHEN i % 20 < 16 THEN 'failed'
            WHEN i % 20 < 18 THEN 'running' WHEN i % 20 < 19 THEN 'cancelled'
            ELSE 'suspended' END,
       CASE WHEN i % 2 = 0 THEN 'key-' || i ELSE '' END,
       convert_to('{"order":"o-' || i || '","amount":' || (i % 997) || '}', 'UTF8'),
       CASE WHEN i % 20 < 14 THEN convert_to('"ok"', 'UTF8') END,
       t, t, CASE WHEN i % 20 < 16 OR i % 20 = 18 THEN t + interval '2 seconds' END
FROM generate_series(1, $1::int) AS i,
     LATERAL (SELECT now() - (i::float / $1 * interval '30 days') AS t) AS c
"""

#: (label, path and query) of each page timed.
PAGES = [
    ("executions: newest", "/executions"),
    ("executions: state=failed", "/executions?state=failed"),
    ("executions: state=suspended", "/executions?state=suspended"),
    ("executions: workflow name", "/executions?name=workflow_7"),
    ("executions: name + state", "/executions?name=workflow_3&state=running"),
    ("executions: business key", "/executions?key=key-50000"),
    ("executions: last 2 hours", "/executions?since=2h"),
    ("executions: 10 days ago, 1 day", "/executions?since=10d&until=9d"),
    ("executions: keyset page deep", "CURSOR"),
    ("overview", "/"),
]

#: The executions query's arguments per filter, for --explain (state, name, since, key).
EXPLAINED = [
    ("newest", (None, None, None, None)),
    ("state=failed", ("failed", None, None, None)),
    ("state=suspended", ("suspended", None, None, None)),
    ("name", (None, "workflow_7", None, None)),
    ("name + state", ("running", "workflow_3", None, None)),
    ("business key", (None, None, None, "key-50000")),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()
        assert r.status == 200, (url, r.status)
    return (time.perf_counter() - t0) * 1000


async def _fill(dsn: str, schema: str, n: int) -> None:
    store = await open_store(dsn, Config(schema=schema), migrate=True)
    await store.close()
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'SET search_path TO "{schema}"')
        t0 = time.perf_counter()
        await conn.execute(FILL, n)
        await conn.execute("ANALYZE azync_workflow_executions")
        print(f"filled {n:,} executions in {time.perf_counter() - t0:.1f} s")
    finally:
        await conn.close()


async def _explain(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'SET search_path TO "{schema}"')
        for label, (state, name, since, key) in EXPLAINED:
            rows = await conn.fetch(
                "EXPLAIN (ANALYZE, BUFFERS) " + QUERIES["console_executions"],
                None, state, name, since, None, key, None, None, 51,
            )  # fmt: skip
            print(f"--- {label}")
            print("\n".join(r[0] for r in rows))
    finally:
        await conn.close()


async def _deep_cursor(dsn: str, schema: str, n: int) -> str:
    """The executions URL of the page that starts halfway down the list (its keyset cursor)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'SET search_path TO "{schema}"')
        row = await conn.fetchrow(
            "SELECT created_at, id FROM azync_workflow_executions "
            "ORDER BY created_at DESC, id DESC OFFSET $1 LIMIT 1",
            n // 2,
        )
    finally:
        await conn.close()
    assert row is not None
    query = {"before_at": row["created_at"].isoformat(), "before_id": str(row["id"])}
    return "/executions?" + urllib.parse.urlencode(query)


def _time_pages(base: str, requests: int, deep: str) -> None:
    print(f"{'page':<34} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for label, path in PAGES:
        url = base + (deep if path == "CURSOR" else path)
        for _ in range(2):
            _get(url)
        times = sorted(_get(url) for _ in range(requests))
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        print(f"{label:<34} {statistics.median(times):8.1f} {p95:8.1f} {times[-1]:8.1f}")


async def _drop(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--dsn")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    dsn = args.dsn or resolve_dsn()[0]
    schema = f"console_bench_{uuid.uuid4().hex[:8]}"
    asyncio.run(_fill(dsn, schema, args.executions))
    try:
        if args.explain:
            asyncio.run(_explain(dsn, schema))
            return
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "AZYNC_UI_TOKEN"}
        server = subprocess.Popen(
            [sys.executable, "-m", "azync_flow.cli", "ui", "--dsn", dsn, "--schema", schema,
             "--port", str(port)],
            env=env,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    _get(base + "/executions")
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    time.sleep(0.2)
            deep = asyncio.run(_deep_cursor(dsn, schema, args.executions))
            _time_pages(base, args.requests, deep)
        finally:
            server.terminate()
            server.wait()
    finally:
        asyncio.run(_drop(dsn, schema))


if __name__ == "__main__":
    main()
