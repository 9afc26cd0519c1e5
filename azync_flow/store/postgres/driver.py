"""The PostgreSQL store: every contract mixin over one asyncpg pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncpg

from ...errors import SchemaNotMigratedError, StoreDsnError, StoreError, StoreUnavailableError
from .. import Config
from ._base import Clock, PgBase, validate_identifier
from ._guard import is_unavailable, login_refused
from ._holder import HolderSetting
from ._migrate import migrate, pending_migrations
from .admin import AdminMixin, ChangeMixin
from .dags import DAGMixin
from .events import EventMixin
from .identity import IdentityMixin
from .leadership import LeaderMixin, WorkerRegistryMixin
from .queue import LimitMixin, NotifyMixin, QueueMixin
from .schedules import ScheduleMixin
from .workflows import WorkflowMixin

__all__ = [
    "PostgresStore",
    "open_store",
]


class PostgresStore(
    QueueMixin,
    LimitMixin,
    DAGMixin,
    AdminMixin,
    EventMixin,
    NotifyMixin,
    ChangeMixin,
    LeaderMixin,
    WorkflowMixin,
    ScheduleMixin,
    WorkerRegistryMixin,
    IdentityMixin,
    PgBase,
):
    """asyncpg implementation of the storage contract.

    Create it with :func:`open_store`; close it with :meth:`close`.
    """

    async def migrate(self) -> list[int]:
        """Contract ``Migrator.Migrate``: apply pending migrations; return versions applied."""
        async with self.pool.acquire() as conn:
            return await migrate(conn, self.schema, self.migrations_table)

    async def check_schema(self) -> None:
        """Implements ``Migrator.check_schema`` (documented there)."""
        async with self.pool.acquire() as conn:
            missing = await pending_migrations(conn, self.schema, self.migrations_table)
        if missing is None:
            raise SchemaNotMigratedError(self.schema)
        if missing:
            raise SchemaNotMigratedError(
                self.schema, f"migrations not applied: {', '.join(missing)}"
            )

    async def close(self) -> None:
        """Send the queued wake-ups, close the store's listening subscriptions
        of this process, then release the pool. Safe to call more than once."""
        await self.wakes.close()
        await self.drop_identity()
        await self.pool.close()


async def _no_reset(conn: asyncpg.Connection) -> None:
    return None


async def open_store(
    dsn: str,
    config: Config | None = None,
    *,
    clock: Clock | None = None,
    migrate: bool = True,
) -> PostgresStore:
    """Connect to PostgreSQL and return a ready :class:`PostgresStore`.

    Args:
        dsn: libpq connection URI, e.g. ``postgresql://user@host:5432/db``.
        config: schema, notify channel, migrations table, pool size.
        clock: test hook returning the time statements should use; None (the
            default) lets the backend clock rule.
        migrate: apply pending migrations before returning.

    Raises:
        ValueError: ``dsn`` is empty, or a Config identifier is not a safe SQL
            identifier (or starts with the reserved ``pg_``).
        StoreDsnError: the driver refuses the DSN before connecting (not a URI
            it parses, an unknown ``sslmode``...); also a ValueError.
        StoreLoginRefusedError: the server refused the connection (unknown
            role or database, wrong password, no CONNECT privilege, no
            ``pg_hba.conf`` entry); not retryable, the message says what to fix.
        StoreUnavailableError: the server cannot be reached right now (retryable).
    """
    if not dsn or not dsn.strip():
        raise ValueError(
            "open_store needs a DSN, got an empty string: pass a libpq URI such as "
            "'postgresql://user@host:5432/db' or set AZYNC_DSN and use "
            "azync_flow.embedded.resolve_dsn()"
        )
    config = config or Config()
    schema = validate_identifier(config.schema or "public", "schema")
    if config.notify_channel:
        validate_identifier(config.notify_channel, "notify channel")
    validate_identifier(config.migrations_table or "azync_migrations", "migrations table")
    holder = HolderSetting()
    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=config.min_pool_size,
            max_size=config.max_pool_size,
            server_settings={"search_path": f'"{schema}"'},
            # The default reset (RESET ALL, UNLISTEN, unlock advisory locks) costs a
            # round trip per release; pooled connections never LISTEN, lock or SET
            # (LISTEN uses a dedicated connection; the leadership fence's setting is
            # transaction-local), so skip it.
            reset=_no_reset,
            # Marks lease tokens with the worker identity, once per connection.
            setup=holder.apply,
        )
    except asyncpg.ClientConfigurationError as exc:  # refused before connecting
        raise StoreDsnError(
            f"the driver refused the DSN: {exc}; check AZYNC_DSN / the dsn argument "
            "(a DSN looks like postgresql://user@host:5432/db?sslmode=require)"
        ) from exc
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        if refused := login_refused(exc, connecting=True):
            raise refused from exc
        error = StoreUnavailableError if is_unavailable(exc) else StoreError
        raise error(
            f"cannot connect to PostgreSQL with the given DSN ({type(exc).__name__}: {exc}); "
            "check AZYNC_DSN / the dsn argument and that the server is running"
        ) from exc
    store = PostgresStore(pool, dsn, config, clock, holder)
    if migrate:
        try:
            await store.migrate()
        except BaseException:
            await pool.close()
            raise
    return store


if TYPE_CHECKING:
    from .. import Store

    def _satisfies_every_protocol(s: PostgresStore) -> Store[asyncpg.Connection]:
        """mypy checks here that the driver implements the whole contract."""
        return s
