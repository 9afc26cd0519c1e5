"""Search attribute filter latency: ``client.list(where=...)`` over N executions.

    python bench/search_attributes.py [--executions 10000] [--rounds 30] [--dsn DSN]
    python bench/search_attributes.py --explain

DSN: ``--dsn``, else ``$AZYNC_DSN``, else the embedded server. The bench creates
a schema ``search_bench_<hex>``, starts ``--executions`` executions with
``client.start_many`` (no worker runs them), each with five attributes:
``customer`` (100 keywords), ``amount`` (int, 0..N-1), ``vip`` (bool, one in
seven), ``placed`` (a datetime a minute apart) and ``ratio`` (float), analyzes
the table, then times ``--rounds`` calls of ``client.list(where=..., limit=50)``
per filter below (the whole call: query, decoding, from this process) after
two warm-up calls, and prints p50 / p95 / max per filter; the target is under
100 ms on 10,000 executions. ``--explain`` prints ``EXPLAIN ANALYZE`` of the
listing query for each filter instead. The schema is dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg

from azync_flow.client import Client
from azync_flow.embedded import resolve_dsn
from azync_flow.search import SearchAttr, SearchFilter, parse_search_filter, search_jsonpath
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.store.postgres._queries import QUERIES

BASE = datetime(2026, 1, 1, tzinfo=UTC)

#: (label, filters) of each listing timed.
FILTERS: list[tuple[str, list[SearchFilter]]] = [
    ("keyword =", [SearchAttr("customer") == "c-17"]),
    (
        "keyword = AND int >",
        [parse_search_filter('customer = "c-17"'), SearchAttr("amount") > 1000],
    ),
    ("int > (range only, 1 %)", [SearchAttr("amount") > 9_900]),
    ("int < (range only, first page)", [SearchAttr("amount") < 5_000]),
    ("bool = AND float <", [SearchAttr("vip") == True, SearchAttr("ratio") < 100.0]),  # noqa: E712
    ("datetime >", [SearchAttr("placed") > BASE + timedelta(minutes=9_950)]),
    ("keyword in (3)", [SearchAttr("customer").in_(["c-1", "c-2", "c-3"])]),
    ("no match", [SearchAttr("customer") == "nobody"]),
]


async def _fill(dsn: str, schema: str, n: int) -> None:
    store = await open_store(dsn, Config(schema=schema), migrate=True)
    try:
        client = Client(store)
        for start in range(0, n, 5_000):
            chunk = range(start, min(n, start + 5_000))
            await client.start_many(
                "bench_order",
                list(chunk),
                search_attributes=[
                    {
                        "customer": f"c-{i % 100}",
                        "amount": i,
                        "vip": i % 7 == 0,
                        "placed": BASE + timedelta(minutes=i),
                        "ratio": i / 10,
                    }
                    for i in chunk
                ],
            )
        async with store.pool.acquire() as conn:
            await conn.execute(f'ANALYZE "{schema}".azync_workflow_executions')
            await conn.execute(f'ANALYZE "{schema}".azync_jobs')
    finally:
        await store.close()


async def _time(dsn: str, schema: str, rounds: int) -> None:
    store = await open_store(dsn, Config(schema=schema))
    try:
        client = Client(store)
        print(f"{'filter':<34} {'rows':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for label, where in FILTERS:
            for _ in range(2):
                await client.list(where=where)
            times = []
            rows = 0
            for _ in range(rounds):
                t0 = time.perf_counter()
                page = await client.list(where=where)
                times.append((time.perf_counter() - t0) * 1000)
                rows = len(page.executions)
            times.sort()
            p95 = times[max(0, int(len(times) * 0.95) - 1)]
            print(
                f"{label:<34} {rows:>5} {statistics.median(times):>8.1f} {p95:>8.1f} "
                f"{times[-1]:>8.1f}"
            )
    finally:
        await store.close()


async def _explain(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'SET search_path TO "{schema}"')
        sql = QUERIES["workflow_list_search"]
        for label, where in FILTERS:
            plan = await conn.fetch(
                "EXPLAIN (ANALYZE, BUFFERS) " + sql,
                None, None, None, 51, None, None, search_jsonpath(where),
            )  # fmt: skip
            print(f"--- {label}")
            print("\n".join(r[0] for r in plan))
    finally:
        await conn.close()


async def _drop(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    dsn = args.dsn or resolve_dsn()[0]
    schema = f"search_bench_{uuid.uuid4().hex[:8]}"
    try:
        asyncio.run(_fill(dsn, schema, args.executions))
        if args.explain:
            asyncio.run(_explain(dsn, schema))
        else:
            print(f"{args.executions} executions, list(where=..., limit=50)")
            asyncio.run(_time(dsn, schema, args.rounds))
    finally:
        asyncio.run(_drop(dsn, schema))


if __name__ == "__main__":
    main()
