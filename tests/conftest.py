"""Shared fixtures: the azync_flow pytest plugin's, under the names the suite uses
(a PostgreSQL per session, a fresh schema per test, its store and movable clock)."""

from __future__ import annotations

import pytest

from azync_flow.store.postgres import PostgresStore
from azync_flow.testing import MovableClock
from tests.cli_runner import cli  # noqa: F401  (a fixture)

# Also registered by the package's pytest11 entry point under this same name,
# so an installed package does not load it twice.
pytest_plugins = ["azync_flow.testing.pytest_plugin"]


@pytest.fixture(scope="session")
def pg_dsn(azync_dsn: str) -> str:
    return azync_dsn


@pytest.fixture
def clock(azync_clock: MovableClock) -> MovableClock:
    return azync_clock


@pytest.fixture
def schema(azync_schema: str) -> str:
    return azync_schema


@pytest.fixture
def store(azync_store: PostgresStore) -> PostgresStore:
    return azync_store
