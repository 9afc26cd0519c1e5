"""An unmigrated schema is one clear error at once, with the migrate hint: the
worker (library and CLI) refuses to start, client calls raise SchemaNotMigratedError;
`azync-flow worker --migrate` migrates it first and runs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from azync_flow import SchemaNotMigratedError, WorkflowContext, attach_workflows, workflow
from azync_flow.client import Client
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.testing import drop_schema, unique_schema
from azync_flow.worker import Worker

ROOT = Path(__file__).resolve().parents[2]
HINT = "run `azync-flow migrate` first"
WORKER_HINT = "start the worker with `azync-flow worker --migrate`"
CLI = (sys.executable, "-m", "azync_flow.cli")


@workflow(name="um_echo")
async def um_echo(ctx: WorkflowContext, x: int) -> int:
    return x


@pytest.fixture
async def bare(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    """A store on a schema nobody migrated."""
    schema = unique_schema()
    store = await open_store(pg_dsn, Config(schema=schema), migrate=False)
    try:
        yield store
    finally:
        await store.close()
        await drop_schema(pg_dsn, schema)


def test_worker_cli_on_an_unmigrated_schema_exits_at_once_with_the_migrate_hint(
    pg_dsn: str,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    proc = subprocess.run(
        [*CLI, "worker", "tests.e2e._schema_app", "--dsn", pg_dsn, "--schema", unique_schema()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 5, proc.stderr
    assert HINT in proc.stderr
    assert WORKER_HINT in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "UndefinedTableError" not in proc.stderr
    assert time.monotonic() - started < 30


def test_worker_cli_from_the_environment_on_an_unmigrated_schema_exits_with_one_line(
    pg_dsn: str,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AZYNC_DSN": pg_dsn}
    env["AZYNC_SCHEMA"] = unique_schema()
    proc = subprocess.run(
        [*CLI, "worker", "tests.e2e._schema_app:make_worker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 5, proc.stderr
    assert HINT in proc.stderr
    assert "Traceback" not in proc.stderr


async def test_worker_refuses_to_start_on_an_unmigrated_schema(bare: PostgresStore) -> None:
    worker = Worker(bare, handle_signals=False)
    attach_workflows(worker, [um_echo])
    async with asyncio.timeout(10):
        with pytest.raises(SchemaNotMigratedError, match="azync-flow migrate"):
            async with worker:
                pass
        with pytest.raises(SchemaNotMigratedError):
            await worker.run_until_idle()
    assert not worker.running


async def test_client_calls_on_an_unmigrated_schema_raise_schema_not_migrated(
    bare: PostgresStore,
) -> None:
    client = Client(bare)
    with pytest.raises(SchemaNotMigratedError, match=HINT) as info:
        await client.start(um_echo, 1)
    assert info.value.schema == bare.schema
    with pytest.raises(SchemaNotMigratedError, match=HINT):
        await client.start("um_echo", 1)
    with pytest.raises(SchemaNotMigratedError, match=HINT):
        await client.get_handle(uuid.uuid4()).describe()
    with pytest.raises(SchemaNotMigratedError, match=HINT):
        await client.enqueue("um.kind", 1)


async def test_schema_check_names_migrations_missing_from_a_partly_migrated_schema(
    store: PostgresStore,
) -> None:
    await store.check_schema()
    last = await store.pool.fetchval("SELECT max(version) FROM azync_migrations")
    await store.pool.execute("DELETE FROM azync_migrations WHERE version = $1", last)
    with pytest.raises(SchemaNotMigratedError, match=rf"migrations not applied: {last:04d}_"):
        await store.check_schema()


async def _migrated(dsn: str, schema: str, within: float = 60.0) -> None:
    """Wait until ``schema`` holds every migration (what ``--migrate`` applies)."""
    store = await open_store(dsn, Config(schema=schema), migrate=False)
    try:
        async with asyncio.timeout(within):
            while True:
                try:
                    await store.check_schema()
                    return
                except SchemaNotMigratedError:
                    await asyncio.sleep(0.1)
    finally:
        await store.close()


@pytest.mark.parametrize(
    "app", ["tests.e2e._schema_app", "tests.e2e._schema_app:make_worker"], ids=["module", "worker"]
)
async def test_worker_cli_with_migrate_migrates_a_fresh_schema_then_runs_a_workflow(
    pg_dsn: str, app: str
) -> None:
    schema = unique_schema()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AZYNC_DSN": pg_dsn, "AZYNC_SCHEMA": schema}
    worker = await asyncio.create_subprocess_exec(
        *CLI, "worker", app, "--migrate", cwd=ROOT, env=env, stderr=asyncio.subprocess.PIPE
    )
    try:
        await _migrated(pg_dsn, schema)
        store = await open_store(pg_dsn, Config(schema=schema), migrate=False)
        try:
            handle = await Client(store).start("schema_app_echo", 7)
            assert await handle.result(timeout=60) == 7
        finally:
            await store.close()
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(worker.communicate(), 30)
        await drop_schema(pg_dsn, schema)
    assert worker.returncode == 0, err.decode()
    assert "--migrate: applied migration(s)" in err.decode()
    assert "Traceback" not in err.decode()


def test_worker_cli_with_migrate_on_an_up_to_date_schema_says_so_and_runs(
    pg_dsn: str, store: PostgresStore
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AZYNC_DSN": pg_dsn}
    proc = subprocess.Popen(
        [*CLI, "worker", "tests.e2e._schema_app", "--migrate", "--schema", store.schema],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        lines = iter(proc.stderr.readline, "")
        line = next((text for text in lines if "--migrate:" in text), "")
        assert "was already up to date" in line, line
        # then the worker starts (and handles SIGTERM from here on)
        assert any("worker serving" in text for text in lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0, rest
