"""What a workflow's ``version`` means, ``""`` (the default) included: it is
recorded on each execution and read back as ``ctx.info.version``, and nothing
else. It routes nothing (a worker registering the name runs executions of
every version), a start by name without ``version=`` records ``""`` rather than
any registered version, one worker holds one definition per name, and replay
does not compare it (docs/workflows.md, "Workflow versions")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from azync_flow import Replayer, WorkflowContext, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.worker import Worker
from azync_flow.workflow import Registry, WorkflowDefinition

FAST: dict[str, Any] = {
    "poll_interval": timedelta(milliseconds=50),
    "maintenance_interval": timedelta(milliseconds=50),
    "handle_signals": False,
}


async def _seen_version(ctx: WorkflowContext) -> str:
    return ctx.info.version


unversioned = workflow(name="ver_seen")(_seen_version)
version_2 = workflow(name="ver_seen", version="2")(_seen_version)


async def _steps(ctx: WorkflowContext, n: int) -> int:
    await ctx.sleep(timedelta(0))
    return n + 1


steps = workflow(name="ver_steps")(_steps)
steps_v7 = workflow(name="ver_steps", version="7")(_steps)


async def _run(store: PostgresStore, *definitions: WorkflowDefinition[Any, Any]) -> None:
    worker = Worker(store, **FAST)
    attach_workflows(worker, definitions)
    await worker.run_until_idle()


async def test_the_default_version_is_empty_recorded_and_seen_as_ctx_info_version(
    store: PostgresStore,
) -> None:
    assert unversioned.version == ""
    handle = await Client(store).start(unversioned)
    assert (await handle.describe()).version == ""
    await _run(store, unversioned)
    assert await handle.result(timeout=10) == ""


async def test_a_start_by_name_without_a_version_records_empty_not_the_registered_one(
    store: PostgresStore,
) -> None:
    by_name = await Client(store).start("ver_seen")
    assert (await by_name.describe()).version == ""
    await _run(store, version_2)  # the only registered definition is version "2"
    assert await by_name.result(timeout=10) == ""  # the execution's version, not the worker's


async def test_a_worker_registering_the_name_runs_executions_of_every_version(
    store: PostgresStore,
) -> None:
    client = Client(store)
    handles = {
        "": await client.start(unversioned),
        "1": await client.start(version_2, version="1"),
        "2": await client.start(version_2),
    }
    await _run(store, unversioned)  # a worker whose definition is unversioned
    for version, handle in handles.items():
        assert (await handle.describe()).version == version
        assert await handle.result(timeout=10) == version


def test_one_worker_holds_one_definition_per_name_whatever_the_versions() -> None:
    with pytest.raises(ValueError, match="two workflows registered under 'ver_seen'"):
        Registry([unversioned, version_2])


async def test_replay_does_not_compare_the_workflow_version(store: PostgresStore) -> None:
    handle = await Client(store).start(steps, 1)
    await _run(store, steps)
    assert await handle.result(timeout=10) == 2
    recorded = await handle.recorded_history()
    assert (await handle.describe()).version == ""
    Replayer([steps_v7]).replay(recorded).raise_for_error()
    Replayer([steps]).replay(recorded).raise_for_error()


async def _branches_on_version(ctx: WorkflowContext, n: int) -> int:
    if ctx.info.version == "1":
        await ctx.sleep(timedelta(0))
    return n


branches_v1 = workflow(name="ver_branches", version="1")(_branches_on_version)
branches_v2 = workflow(name="ver_branches", version="2")(_branches_on_version)


async def test_a_replay_shows_the_recorded_version_as_ctx_info_version(
    store: PostgresStore,
) -> None:
    handle = await Client(store).start(branches_v1, 3)
    await _run(store, branches_v1)
    assert await handle.result(timeout=10) == 3
    recorded = await handle.recorded_history()
    assert recorded.version == "1"
    # code that branches on the version replays the branch the run took,
    # under a definition of another version and from the saved JSON alike
    Replayer([branches_v2]).replay(recorded).raise_for_error()
    Replayer([branches_v2]).replay(recorded.to_json()).raise_for_error()
