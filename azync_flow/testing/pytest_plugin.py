"""The azync_flow pytest plugin (entry point ``pytest11``; loaded automatically).

Fixtures:

* ``azync_dsn`` (session): ``$AZYNC_TEST_DSN`` when set, else an embedded
  PostgreSQL (the ``embedded`` extra) started once per session in a temp dir
  (shared by the workers of a ``pytest-xdist`` run; stopped and removed when
  the session ends, and when SIGTERM ends it).
* ``azync_schema``: a fresh schema name per test, dropped after the test.
* ``azync_clock``: the :class:`~azync_flow.testing.MovableClock` of the test's store.
* ``azync_store``: a ``PostgresStore`` on ``azync_schema`` reading ``azync_clock``.
* ``workflow_env``: a :class:`~azync_flow.testing.WorkflowEnvironment` on that
  store; ``env = await workflow_env.start(workflows=[...], activities=[...])``.

Async fixtures need pytest-asyncio (``asyncio_mode = "auto"`` recommended; see
docs/testing.md). This module imports nothing heavy: the product is imported
when a fixture is first used, so projects pay nothing in test sessions that do
not use it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

__all__ = [
    "DSN_VARIABLE",
    "azync_clock",
    "azync_dsn",
    "azync_schema",
    "azync_store",
    "workflow_env",
]

if TYPE_CHECKING:
    from azync_flow.store.postgres import PostgresStore

    from ._clock import MovableClock
    from ._env import WorkflowEnvironment

try:  # async fixtures must be pytest-asyncio's in its strict mode
    import pytest_asyncio

    _async_fixture: Callable[..., Any] = pytest_asyncio.fixture
except ImportError:  # pragma: no cover - without pytest-asyncio async fixtures cannot run
    _async_fixture = pytest.fixture

#: Environment variable naming the PostgreSQL the tests use.
DSN_VARIABLE = "AZYNC_TEST_DSN"


#: Where the session's embedded server keeps its data: chosen by the process
#: that configures the session and inherited by its pytest-xdist workers.
_EMBEDDED_DIR_VARIABLE = "AZYNC_TEST_EMBEDDED_DIR"
_owned_dir = pytest.StashKey[Path]()
_previous_sigterm = pytest.StashKey[Any]()


def pytest_configure(config: pytest.Config) -> None:
    # Only the outermost process picks the directory (xdist workers and test
    # sessions run inside a test inherit it), and only when a server may be needed.
    if os.environ.get(DSN_VARIABLE) or os.environ.get(_EMBEDDED_DIR_VARIABLE):
        return
    root = Path(tempfile.gettempdir()) / f"azync-test-{uuid.uuid4().hex[:16]}"
    os.environ[_EMBEDDED_DIR_VARIABLE] = str(root)
    config.stash[_owned_dir] = root
    _clean_up_on_sigterm(config, root)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Each process (an xdist worker too) drops the schemas it kept for reuse,
    # before the session's embedded server stops.
    import asyncio
    import sys

    from ._schema import drop_pooled

    try:
        asyncio.run(drop_pooled())
    except Exception as exc:  # the session's result stands; say what stays behind
        print(f"azync_flow: test schemas kept for reuse were not dropped: {exc}", file=sys.stderr)


def pytest_unconfigure(config: pytest.Config) -> None:
    # Stop the server here, after every worker has gone: a worker's own stop at
    # exit is cut short when xdist kills it at teardown, leaving the server running.
    root = config.stash.get(_owned_dir, None)
    if root is None:
        return
    del config.stash[_owned_dir]
    os.environ.pop(_EMBEDDED_DIR_VARIABLE, None)
    previous = config.stash.get(_previous_sigterm, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
        del config.stash[_previous_sigterm]
    _remove_embedded(root)


def _remove_embedded(root: Path) -> None:
    """Stop the session's embedded server (if it started) and delete its directory."""
    if (root / "pgdata" / "PG_VERSION").exists():
        from azync_flow.embedded import stop_embedded

        stop_embedded(root / "pgdata", force=True)
    shutil.rmtree(root, ignore_errors=True)


def _clean_up_on_sigterm(config: pytest.Config, root: Path) -> None:
    """SIGTERM kills a process without running its exit hooks: the session's
    server and data would stay behind. Clean up first, then die of SIGTERM as
    before (same exit status); a handler the user installed still runs."""
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except ValueError:  # pragma: no cover - not the main thread: leave signals alone
        return
    if previous is None or previous == signal.SIG_IGN:  # not ours to change
        return

    def on_sigterm(signum: int, frame: Any) -> None:
        with contextlib.suppress(Exception):
            _remove_embedded(root)
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # pragma: no cover - not the main thread
        return
    config.stash[_previous_sigterm] = previous


@pytest.fixture(scope="session")
def azync_dsn() -> str:
    """``$AZYNC_TEST_DSN`` when set, else an embedded server started once per session.

    The embedded server lives in a temp dir of the session: the worker
    processes of a ``pytest-xdist`` run share it (the first to need it starts
    it), and the session stops it and removes the dir at its end.

    Raises:
        RuntimeError: no DSN is set and the ``embedded`` extra is not installed.
    """
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        return dsn
    from azync_flow.embedded import start_embedded

    configured = os.environ.get(_EMBEDDED_DIR_VARIABLE)
    root = Path(configured) if configured else Path(tempfile.mkdtemp(prefix="azync-test-"))
    root.mkdir(parents=True, exist_ok=True)
    return start_embedded(root / "pgdata")


@_async_fixture
async def azync_schema(azync_dsn: str) -> AsyncIterator[str]:
    """A schema of this test's own: new, or one an earlier test of the session
    used, emptied (its objects exactly a migrated schema's, its rows deleted,
    sequences restarted). Afterwards it is emptied for the next test, or
    dropped if the test changed its objects or filled it; the session drops
    every schema it kept at its end."""
    from ._schema import release_schema, take_schema

    schema = take_schema()
    try:
        yield schema
    finally:
        await release_schema(azync_dsn, schema)


@pytest.fixture
def azync_clock() -> MovableClock:
    """The test's movable clock (None until set: the backend clock rules)."""
    from ._clock import MovableClock

    return MovableClock()


@_async_fixture
async def azync_store(
    azync_dsn: str, azync_schema: str, azync_clock: MovableClock
) -> AsyncIterator[PostgresStore]:
    """A migrated ``PostgresStore`` on the test's schema, reading the test's clock."""
    from azync_flow.store import Config
    from azync_flow.store.postgres import open_store

    store = await open_store(azync_dsn, Config(schema=azync_schema), clock=azync_clock)
    try:
        yield store
    finally:
        await store.close()


@_async_fixture
async def workflow_env(
    azync_store: PostgresStore, azync_clock: MovableClock
) -> AsyncIterator[WorkflowEnvironment]:
    """An unstarted :class:`~azync_flow.testing.WorkflowEnvironment` on the test's
    store; call ``await workflow_env.start(workflows=..., activities=...)``.
    Stopped after the test."""
    from ._env import WorkflowEnvironment

    env = WorkflowEnvironment(azync_store, azync_clock)
    try:
        yield env
    finally:
        await env.close()
