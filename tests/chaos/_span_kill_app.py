"""Worker process for the span-loss test: exports spans with configure_otlp's
defaults (no flush anywhere) and runs ``span_order`` until it is killed.

    python _span_kill_app.py DSN SCHEMA OTLP_ENDPOINT
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from azync_flow import WorkflowContext, activity, attach_workflows, workflow
from azync_flow.otlp import configure_otlp
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker


@activity(name="span_charge")
def span_charge(order_id: str) -> str:
    return f"charged {order_id}"


@workflow(name="span_order")
async def span_order(ctx: WorkflowContext, order_id: str) -> str:
    charged = await span_charge(order_id)
    await ctx.sleep(timedelta(hours=1))  # keeps the run open: the test kills the worker
    return charged


async def main(dsn: str, schema: str, endpoint: str) -> None:
    configure_otlp(service_name="span-kill-worker", endpoint=endpoint)
    store = await open_store(dsn, Config(schema=schema), migrate=False)
    worker = Worker(store, poll_interval=timedelta(milliseconds=100), handle_signals=False)
    attach_workflows(worker, [span_order], [span_charge])
    async with worker:
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
