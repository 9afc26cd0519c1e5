"""An operator closes an execution a real worker serves (client and CLI): the
result or failure is recorded, the code never runs again, replay accepts it."""

from __future__ import annotations

import pytest

from azync_flow import workflow
from azync_flow.client import Client
from azync_flow.errors import NotFoundError, WorkflowFailedError
from azync_flow.replay import Replayer, WorkflowClosedByOperator
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState
from azync_flow.workflow import Registry, WorkflowContext
from tests.cli_runner import Cli
from tests.local_runtime import LocalRuntime

RAN: list[str] = []


@workflow(name="closable_wait")
async def closable_wait(ctx: WorkflowContext, name: str) -> str:
    got = await ctx.wait_signal("go")
    RAN.append(name)
    return f"{got}, {name}"


@pytest.fixture
def runtime(store: PostgresStore) -> LocalRuntime:
    RAN.clear()
    return LocalRuntime(store, Registry([closable_wait], []))


async def test_complete_records_the_result_and_who_and_the_code_never_resumes(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(closable_wait, "ann")
    await runtime.run_until_idle()
    await handle.complete("settled by hand", reason="paid by phone", closed_by="ops@desk")
    assert await handle.result(timeout=5) == "settled by hand"
    with pytest.raises(NotFoundError, match="finished"):
        await handle.signal("go", "hi")
    await runtime.run_until_idle()
    assert RAN == []
    last = (await handle.history())[-1].event
    assert isinstance(last, WorkflowClosedByOperator)
    assert (last.outcome, last.reason, last.closed_by) == ("succeeded", "paid by phone", "ops@desk")
    assert Replayer([closable_wait]).replay(await handle.recorded_history()).ok


async def test_fail_makes_result_raise_with_who_and_why(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(closable_wait, "bo")
    await runtime.run_until_idle()
    await handle.fail("order voided", closed_by="ops@desk")
    with pytest.raises(WorkflowFailedError, match="failed by ops@desk: order voided"):
        await handle.result(timeout=5)
    with pytest.raises(ValueError, match="reason must not be empty"):
        await handle.fail(" ")


async def test_cli_complete_and_fail_with_their_errors(
    store: PostgresStore, runtime: LocalRuntime, cli: Cli
) -> None:
    client = Client(store)
    a = await client.start(closable_wait, "a")
    b = await client.start(closable_wait, "b")
    await runtime.run_until_idle()
    code, _, err = await cli(
        "workflows", "complete", str(a.id), "--result", "{bad", "--reason", "x"
    )
    assert code == 2
    assert "--result" in err
    code, out, _ = await cli(
        "workflows", "complete", str(a.id), "--result", '"ok"', "--reason", "by hand"
    )
    assert (code, out) == (0, {"id": str(a.id), "state": "succeeded"})
    assert await a.result(timeout=5) == "ok"
    code, _, err = await cli("workflows", "complete", str(a.id), "--result", "1", "--reason", "x")
    assert code == 3
    assert "finished" in err
    code, _, err = await cli("workflows", "fail", str(b.id), "--reason", "")
    assert code == 2
    code, out, _ = await cli("workflows", "fail", str(b.id), "--reason", "voided")
    assert (code, out) == (0, {"id": str(b.id), "state": "failed"})
    assert (await b.describe()).state == WorkflowState.FAILED
    code, _, err = await cli("workflows", "fail", "nope", "--reason", "x")
    assert code == 2
