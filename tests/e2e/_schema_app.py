"""A minimal app for running ``azync-flow worker`` in a subprocess."""

from __future__ import annotations

from azync_flow import WorkflowContext, workflow


@workflow(name="schema_app_echo")
async def schema_app_echo(ctx: WorkflowContext, x: int) -> int:
    return x
