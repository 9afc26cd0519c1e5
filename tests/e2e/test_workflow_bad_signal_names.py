"""Workflow code that names a signal the store cannot keep (NUL, over 255
characters), forges an update request through the reserved ``$update:`` prefix,
or gives a child an id that is not a UUID fails its run with the product's clear
error at once, instead of a raw driver error in the pass's commit that leaves the
run retrying forever. The client refuses a reserved signal name the same way."""

from __future__ import annotations

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.local_runtime import LocalRuntime


@workflow(name="bsn_kid")
async def bsn_kid(ctx: WorkflowContext) -> str:
    return str(await ctx.wait_signal("go"))


@workflow(name="bsn_parent")
async def bsn_parent(ctx: WorkflowContext, mode: str) -> str:
    if mode == "wait_nul":
        await ctx.wait_signal("a\x00b")
    elif mode == "child_signal_nul":
        await (await ctx.start_child(bsn_kid)).signal("g\x00o", 1)
    elif mode == "child_signal_long":
        await (await ctx.start_child(bsn_kid)).signal("g" * 256, 1)
    elif mode == "child_signal_reserved":
        await (await ctx.start_child(bsn_kid)).signal("$update:add", [1])
    elif mode == "child_id_text":
        await ctx.start_child(bsn_kid, id="order-17")  # type: ignore[arg-type]
    return "unreachable"


@pytest.mark.parametrize(
    ("mode", "needle"),
    [
        ("wait_nul", "ValueError: signal name must not contain NUL"),
        ("child_signal_nul", "ValueError: signal name must not contain NUL"),
        ("child_signal_long", "ValueError: signal name is 256 characters long"),
        ("child_signal_reserved", "ValueError: signal names starting with '$update:'"),
        ("child_id_text", "TypeError: child workflow id must be a uuid.UUID"),
    ],
)
async def test_a_bad_signal_name_or_child_id_in_workflow_code_fails_the_run_clearly(
    store: PostgresStore, mode: str, needle: str
) -> None:
    runtime = LocalRuntime(store, Registry([bsn_parent, bsn_kid], []))
    handle = await Client(store).start(bsn_parent, mode)
    await runtime.run_until_idle()
    view = await handle.describe()
    assert view.state == WorkflowState.FAILED
    assert needle in view.failure_reason


async def test_the_client_refuses_a_signal_that_would_forge_an_update_request(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(bsn_kid)
    with pytest.raises(ValueError, match=r"'\$update:' are reserved"):
        await handle.signal("$update:add", [1], message_id="forged")
    runtime = LocalRuntime(store, Registry([bsn_parent, bsn_kid], []))
    await runtime.run_until_idle()
    assert await handle.signal("go", "real")
    await runtime.run_until_idle()
    assert await handle.result(timeout=10) == "real"
    names = [type(e.event).__name__ for e in await handle.history()]
    assert names == ["SignalReceived", "WorkflowCompleted"]
