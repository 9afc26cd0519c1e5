"""A minimal app for running ``azync-flow worker`` in a subprocess (the factory
reads ``AZYNC_DSN`` and ``AZYNC_SCHEMA``)."""

from __future__ import annotations

import os

from azync_flow import WorkflowContext, attach_workflows, workflow
from azync_flow.store import Config
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker


@workflow(name="schema_app_echo")
async def schema_app_echo(ctx: WorkflowContext, x: int) -> int:
    return x


async def make_worker() -> Worker:
    schema = os.environ["AZYNC_SCHEMA"]
    store = await open_store(os.environ["AZYNC_DSN"], Config(schema=schema), migrate=False)
    worker = Worker(store)
    attach_workflows(worker, [schema_app_echo])
    return worker
