"""An activity's outcome whose COMMIT reached PostgreSQL but whose reply was lost
(the connection dropped in between) is this attempt's own: the repeated report is
refused by the fence, and the runner sees that the attempt already settled the
operation instead of calling the report late. No "late outcome ignored" line, no
``azync.operation.late_outcome_ignored`` event; the run completes once."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime

from ._drop_proxy import DropProxy

CALLS: list[str] = []
LATE = "azync.operation.late_outcome_ignored"


@activity(name="lost_reply_wire", idempotent=False)
async def lost_reply_wire(tag: str) -> str:
    CALLS.append(tag)
    return f"wired-{tag}"


@activity(name="lost_reply_pay")
async def lost_reply_pay(tag: str) -> str:
    CALLS.append(tag)
    return f"paid-{tag}"


@workflow(name="lost_reply_wire_wf")
async def lost_reply_wire_wf(ctx: WorkflowContext, tag: str) -> str:
    return await lost_reply_wire(tag)


@workflow(name="lost_reply_pay_wf")
async def lost_reply_pay_wf(ctx: WorkflowContext, tag: str) -> str:
    return await lost_reply_pay(tag)


@pytest.mark.parametrize(
    ("wf", "prefix"), [(lost_reply_wire_wf, "wired"), (lost_reply_pay_wf, "paid")]
)
async def test_a_settle_whose_reply_was_lost_after_commit_is_not_reported_late(
    pg_dsn: str,
    schema: str,
    store: PostgresStore,
    caplog: pytest.LogCaptureFixture,
    wf: object,
    prefix: str,
) -> None:
    CALLS.clear()
    tag = f"tag-{schema}"
    async with DropProxy(pg_dsn) as proxy:
        proxied = await open_store(proxy.dsn, Config(schema=schema))
        try:
            runtime = LocalRuntime(
                proxied,
                Registry(
                    [lost_reply_wire_wf, lost_reply_pay_wf], [lost_reply_wire, lost_reply_pay]
                ),
                cache_size=0,  # the outcome is recorded alone, in one statement
                lease=timedelta(seconds=30),
            )
            handle = await Client(store).start(wf, tag)  # type: ignore[arg-type]
            proxy.drop_reply_to(f"{prefix}-{tag}".encode())
            with caplog.at_level(logging.INFO, logger="azync_flow"):
                await runtime.run_until_idle()
            assert proxy.dropped == 1
            assert await handle.result(timeout=10) == f"{prefix}-{tag}"
            assert runtime.activities.late_ignored == 0
        finally:
            await proxied.close()
    assert [tag] == CALLS
    assert "late outcome ignored" not in caplog.text
    late = await store.pool.fetch("SELECT id FROM azync_events WHERE type = $1", LATE)
    assert late == []
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types.count("ActivityCompleted") == 1
    assert types.count("WorkflowCompleted") == 1
