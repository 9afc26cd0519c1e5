"""Real SIGKILLs of a worker process (1.5 s leases) around the commits that start
child executions and that continue a run as new, in both cache modes: no child
is started twice, no signal is lost or delivered twice across the new run."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from azync_flow.client import Client
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowState

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_children_kill_app.py")


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_children_kill_app", APP)
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app


APP_MODULE = load_app()


@pytest.fixture(autouse=True, params=["1000", "0"], ids=["sticky", "full"])
def cache_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CACHE_SIZE", request.param)
    return str(request.param)


async def run_worker(pg_dsn: str, schema: str, run_id: Any, ledger: Path, mode: str = "") -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        str(run_id),
        env={**os.environ, "KILL_LEDGER": str(ledger), "KILL_MODE": mode, "PYTHONPATH": str(ROOT)},
    )
    return await asyncio.wait_for(proc.wait(), 60)


def done(ledger: Path) -> list[str]:
    return sorted(ledger.read_text().splitlines()) if ledger.exists() else []


@pytest.mark.parametrize("mode", ["in_pass:1", "after_pass:1"])
async def test_kill_around_the_commit_that_starts_children_never_starts_one_twice(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path, mode: str
) -> None:
    ledger = tmp_path / "ledger"
    client = Client(store)
    handle = await client.start(APP_MODULE.two_kids, "o1")
    assert await run_worker(pg_dsn, schema, handle.id, ledger, mode) == -signal.SIGKILL
    kids = await store.list_child_workflows(handle.id)
    # before the commit: nothing was started; after it: both children exist
    assert len(kids) == (0 if mode.startswith("in_pass") else 2)
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ["pay-o1-done", "ship-o1-done"]
    kids = await store.list_child_workflows(handle.id)
    assert len(kids) == 2
    assert {k.state for k in kids} == {WorkflowState.SUCCEEDED}
    starts = [e for e in await handle.history() if type(e.event).__name__ == "ChildStarted"]
    assert len(starts) == 2
    assert done(ledger) == ["done:pay-o1", "done:ship-o1"]


@pytest.mark.parametrize("mode", ["in_pass:2", "after_pass:2"])
async def test_kill_around_continue_as_new_loses_no_signal_and_doubles_none(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path, mode: str
) -> None:
    ledger = tmp_path / "ledger"
    handle = await Client(store).start(APP_MODULE.drain, [])
    for i, item in enumerate(["a", "b", "c", "stop"]):
        assert await handle.signal("item", item, message_id=f"m{i}")
    # pass 1 consumes 'a' and continues as new; pass 2 (run 2) consumes 'b'
    assert await run_worker(pg_dsn, schema, handle.id, ledger, mode) == -signal.SIGKILL
    runs = await handle.runs()
    assert len(runs) == (2 if mode.startswith("in_pass") else 3)
    assert await run_worker(pg_dsn, schema, handle.id, ledger) == 0
    assert await handle.result(timeout=10) == ["a", "b", "c", "stop"]
    assert [r.run_no for r in await handle.runs()] == [1, 2, 3, 4]
    view = await handle.describe()
    assert view.signals_undelivered == 0
    consumed = await store.pool.fetchval(
        "SELECT count(*) FROM azync_workflow_signals WHERE consumed_seq IS NOT NULL"
    )
    assert consumed == 4
