"""The pytest plugin as a user gets it: loaded by name (as the pytest11 entry point
loads it), fixtures in pytest-asyncio's auto and strict modes, a fresh schema per
test dropped afterwards, and two test sessions in parallel not seeing each other."""

from __future__ import annotations

import asyncio
import os
import sys
import tomllib
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "azync_flow.testing.pytest_plugin"

USER_TEST = """
import uuid
from datetime import timedelta
from pathlib import Path

from azync_flow import WorkflowContext, activity, workflow

FIXED_ID = uuid.UUID(int=42)  # the same id in both sessions: only schemas keep them apart


@activity(name="stamp")
async def stamp(n: int) -> int:
    return n + 1


@workflow(name="nap")
async def nap(ctx: WorkflowContext, n: int) -> int:
    await ctx.sleep(timedelta(days=1))
    return await stamp(n)


async def test_user_workflow(workflow_env, azync_schema):
    Path(__file__).with_suffix(".schema").write_text(azync_schema)
    env = await workflow_env.start([nap], [stamp])
    handle = await env.client.start(nap, 1, id=FIXED_ID)
    assert await handle.result(timeout=10) == 2
    page = await env.client.list()
    assert [e.id for e in page.executions] == [FIXED_ID]
"""

STRICT_TEST = """
import pytest


@pytest.mark.asyncio
async def test_strict_mode_fixtures(azync_store, azync_clock):
    assert azync_store.now() is None
    azync_clock.advance(__import__("datetime").timedelta(days=1))
    assert azync_store.now() is not None
"""


async def run_pytest(folder: Path, dsn: str, *args: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AZYNC_TEST_DSN": dsn}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        PLUGIN,
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(folder),
        *args,
        str(folder),
        cwd=folder,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode()


async def schema_exists(dsn: str, schema: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema))
    finally:
        await conn.close()


async def test_two_sessions_in_parallel_use_their_own_schemas_and_drop_them(
    tmp_path: Path, pg_dsn: str
) -> None:
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
        (folder / "test_user.py").write_text(USER_TEST)
    results = await asyncio.gather(
        *(run_pytest(f, pg_dsn, "-o", "asyncio_mode=auto") for f in folders)
    )
    for code, out in results:
        assert code == 0, out
        assert "1 passed" in out, out
    schemas = [(f / "test_user.schema").read_text() for f in folders]
    assert schemas[0] != schemas[1]
    for schema in schemas:
        assert not await schema_exists(pg_dsn, schema)


async def test_fixtures_work_in_pytest_asyncio_strict_mode(tmp_path: Path, pg_dsn: str) -> None:
    (tmp_path / "test_strict.py").write_text(STRICT_TEST)
    code, out = await run_pytest(tmp_path, pg_dsn, "-o", "asyncio_mode=strict")
    assert code == 0, out
    assert "1 passed" in out, out


def test_the_package_registers_the_plugin_under_its_module_name() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {PLUGIN: PLUGIN}


async def test_loading_the_plugin_does_not_import_the_runtime() -> None:
    code = (
        "import sys, azync_flow.testing.pytest_plugin; "
        "heavy = [m for m in ('asyncpg', 'azync_flow.worker', 'azync_flow.client', "
        "'azync_flow.store', 'opentelemetry') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out.decode()
