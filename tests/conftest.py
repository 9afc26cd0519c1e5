"""Shared fixtures: a PostgreSQL per session, a fresh schema per test."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from azync_flow.embedded import start_embedded
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.testing import MovableClock, drop_schema, unique_schema


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """``AZYNC_TEST_DSN`` when set, else an embedded server in a temp dir."""
    dsn = os.environ.get("AZYNC_TEST_DSN")
    if dsn:
        return dsn
    data_dir = Path(tempfile.mkdtemp(prefix="azync-test-")) / "pgdata"
    return start_embedded(data_dir)


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
def schema() -> str:
    return unique_schema()


@pytest.fixture
async def store(pg_dsn: str, schema: str, clock: MovableClock) -> AsyncIterator[PostgresStore]:
    s = await open_store(pg_dsn, Config(schema=schema), clock=clock)
    try:
        yield s
    finally:
        await s.close()
        await drop_schema(pg_dsn, schema)
