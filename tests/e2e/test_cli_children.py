"""`azync-flow workflows list/show` name a child's parent and a continued
execution's run chain."""

from __future__ import annotations

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry
from tests.local_runtime import LocalRuntime

from . import test_child_workflows as kids
from . import test_continue_as_new as loops
from .test_cli_commands import Cmd, cmd  # noqa: F401


async def test_workflows_list_and_show_name_the_parent_and_the_run_chain(
    cmd: Cmd,  # noqa: F811
    store: PostgresStore,
) -> None:
    runtime = LocalRuntime(
        store, Registry([*kids.WORKFLOWS, loops.counter], [kids.double, loops.add])
    )
    client = Client(store)
    parent = await client.start(kids.parent_one, 3)
    looped = await client.start(loops.counter, loops.Loop(0, 3))
    await runtime.run_until_idle()
    (child,) = await store.list_child_workflows(parent.id)
    listed = (await cmd("workflows", "list", "--json")).json["items"]
    by_id = {i["id"]: i for i in listed}
    assert by_id[str(child.id)]["parent_id"] == str(parent.id)
    assert by_id[str(parent.id)]["parent_id"] is None
    assert by_id[str(looped.id)]["run_no"] == 3
    table = await cmd("workflows", "list")
    assert "PARENT" in table.out
    shown = await cmd("workflows", "show", str(child.id))
    assert shown.code == 0
    assert str(parent.id) in shown.out
    assert "terminate" in shown.out  # its parent-close policy
    chain = (await cmd("workflows", "show", str(looped.id), "--json")).json
    assert [r["run_no"] for r in chain["runs"]] == [1, 2, 3]
    assert chain["runs"][0]["run_id"] == str(looped.id)
    assert chain["run_no"] == 3
    text = await cmd("workflows", "show", str(looped.id))
    assert "earlier runs" in text.out


async def test_history_and_export_take_the_run_number_of_a_continued_execution(
    cmd: Cmd,  # noqa: F811
    store: PostgresStore,
) -> None:
    looped = await Client(store).start(loops.counter, loops.Loop(0, 3))
    await LocalRuntime(store, Registry([loops.counter], [loops.add])).run_until_idle()
    wid = str(looped.id)
    first = await cmd("workflows", "history", wid, "--run", "1")
    assert first.code == 0, first.err
    assert "WorkflowContinuedAsNew" in first.out
    current = await cmd("workflows", "history", wid, "--run", "3")
    assert "WorkflowCompleted" in current.out
    assert "WorkflowContinuedAsNew" not in current.out
    exported = await cmd("workflows", "export", wid, "--run", "2")
    assert exported.code == 0, exported.err
    assert "WorkflowContinuedAsNew" in exported.out
    assert '"input":{"i":1' in exported.out.replace(" ", "")
    missing = await cmd("workflows", "export", wid, "--run", "9")
    assert (missing.code, "has no run 9 (runs 1..3)" in missing.err) == (3, True)
