"""A real SIGKILL of the worker while an accepted update's handler waits on its
activity: the next worker re-runs the activity after its lease expired,
finishes the handler once and the caller gets the result. Both cache modes."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest

from azync_flow.client import Client
from azync_flow.replay import Replayer
from azync_flow.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("_update_kill_app.py")


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_update_kill_app", APP)
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


async def run_worker(pg_dsn: str, schema: str, args: list[str], ledger: Path, mode: str) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(APP),
        pg_dsn,
        schema,
        *args,
        env={**os.environ, "KILL_LEDGER": str(ledger), "KILL_MODE": mode, "PYTHONPATH": str(ROOT)},
    )
    return await asyncio.wait_for(proc.wait(), 60)


async def test_an_update_survives_a_sigkill_in_its_handler_and_completes_once(
    store: PostgresStore, schema: str, pg_dsn: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    client = Client(store)
    handle = await client.start(APP_MODULE.tab)
    caller = asyncio.create_task(handle.update("pay", 7, update_id="pay-1", timeout=60))
    async with asyncio.timeout(10):  # the request is in the inbox before any worker runs
        while not await store.pool.fetchval(  # noqa: ASYNC110 - a row, not an event
            "SELECT count(*) FROM azync_workflow_signals WHERE name = '$update:pay'"
        ):
            await asyncio.sleep(0.01)
    args = [str(handle.id), "pay-1"]
    assert await run_worker(pg_dsn, schema, args, ledger, "during:charge") == -signal.SIGKILL
    assert ledger.read_text().splitlines() == ["start:7"]
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types == ["UpdateAccepted", "ActivityScheduled"]  # accepted before the kill
    assert await run_worker(pg_dsn, schema, args, ledger, "") == 0
    assert await caller == 700
    assert ledger.read_text().splitlines() == ["start:7", "start:7", "done:7"]
    types = [type(e.event).__name__ for e in await handle.history()]
    assert types.count("UpdateAccepted") == 1
    assert types.count("UpdateCompleted") == 1
    # a retry with the same id gets the recorded result; nothing runs again
    assert await handle.update("pay", 7, update_id="pay-1") == 700
    verdict = Replayer([APP_MODULE.tab]).replay(await handle.recorded_history())
    assert verdict.ok, verdict.error
