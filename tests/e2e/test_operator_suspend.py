"""An operator's suspend on a real worker: the execution does not progress on a
signal until resumed, then completes (client and CLI)."""

from __future__ import annotations

from typing import Any

import pytest

from azync_flow import workflow
from azync_flow.client import Client, WorkflowHandle
from azync_flow.errors import NotFoundError
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.cli_runner import Cli
from tests.local_runtime import LocalRuntime


@workflow(name="held_greeter")
async def held_greeter(ctx: WorkflowContext, name: str) -> str:
    greeting = await ctx.wait_signal("greeting")
    return f"{greeting}, {name}"


@pytest.fixture
def runtime(store: PostgresStore) -> LocalRuntime:
    return LocalRuntime(store, Registry([held_greeter], []))


async def _event_types(handle: WorkflowHandle[Any]) -> list[str]:
    return [type(e.event).__name__ for e in await handle.history()]


async def test_a_suspended_execution_ignores_a_signal_until_resumed_then_completes(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(held_greeter, "ann")
    await runtime.run_until_idle()  # waiting for the signal
    await handle.suspend("vendor outage")
    view = await handle.describe()
    assert view.state == WorkflowState.SUSPENDED
    assert view.suspend_reason == "suspended by an operator: vendor outage"
    assert await handle.signal("greeting", "hello")
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    assert "SignalReceived" not in await _event_types(handle)  # no pass ran
    with pytest.raises(NotFoundError, match="is suspended"):
        await handle.suspend("again")
    await handle.resume()
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "hello, ann"


async def test_a_suspend_before_the_first_pass_holds_the_start(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(held_greeter, "bo")
    await handle.suspend("not yet")
    await handle.signal("greeting", "hi")
    await runtime.run_until_idle()
    assert await handle.history() == []  # the code never ran
    await handle.resume()
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "hi, bo"


async def test_cli_suspend_and_resume_hold_and_release_an_execution(
    store: PostgresStore, runtime: LocalRuntime, cli: Cli
) -> None:
    handle = await Client(store).start(held_greeter, "cy")
    await runtime.run_until_idle()
    code, out, _ = await cli("workflows", "suspend", str(handle.id), "--reason", "audit")
    assert (code, out) == (0, {"id": str(handle.id), "suspended": True})
    code, _, err = await cli("workflows", "suspend", str(handle.id), "--reason", "audit")
    assert code == 3
    assert "is suspended" in err
    code, _, err = await cli("workflows", "suspend", str(handle.id), "--reason", "")
    assert code == 2
    assert "reason must not be empty" in err
    code, _, err = await cli("workflows", "suspend", "nope", "--reason", "x")
    assert code == 2
    await handle.signal("greeting", "hey")
    await runtime.run_until_idle()
    assert (await handle.describe()).state == WorkflowState.SUSPENDED
    code, out, _ = await cli("workflows", "resume", str(handle.id))
    assert (code, out) == (0, {"resumed": True})
    await runtime.run_until_idle()
    assert await handle.result(timeout=5) == "hey, cy"
