"""ConsoleReads: the console's named read queries, and nothing else, run in a
read-only transaction."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from azync_flow import Client
from azync_flow.search import SearchAttr, search_jsonpath
from azync_flow.store.postgres import PostgresStore


async def test_only_console_queries_run(store: PostgresStore) -> None:
    with pytest.raises(ValueError, match="not a console query"):
        await store.console_rows("job_retry", uuid.uuid4())
    with pytest.raises(ValueError, match="not a console query"):
        await store.console_rows("console_no_such_query")


async def test_the_executions_query_filters_and_pages_by_keyset(store: PostgresStore) -> None:
    client = Client(store)
    ids = [
        (await client.start("w", i, idempotency_key=f"k{i}", search_attributes={"n": i})).id
        for i in range(3)
    ]
    await client.start("other", 0)

    async def page(**f: object) -> list[uuid.UUID]:
        args = [f.get(k) for k in ("state", "name", "since", "until", "key", "at", "id")]
        rows = await store.console_rows(
            "console_executions", *args, f.get("limit", 50), f.get("where")
        )
        return [r["id"] for r in rows]

    assert sorted(await page(name="w")) == sorted(ids)
    assert await page(key="k1") == [ids[1]]
    assert await page(where=search_jsonpath([SearchAttr("n") >= 1])) == [ids[2], ids[1]]
    newest = await page(name="w", limit=2)
    row = await store.get_workflow_execution(newest[-1])
    rest = await page(name="w", at=row.created_at, id=row.id)
    assert len(newest) == 2
    assert len(rest) == 1
    assert not set(newest) & set(rest)
    later = row.created_at + timedelta(days=1)
    assert await page(name="w", since=later) == []
    assert len(await page(name="w", until=later)) == 3
    assert len(await page(state="running")) == 4
    assert await page(state="failed") == []
