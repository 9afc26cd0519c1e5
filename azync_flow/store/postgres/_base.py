"""Connection pool, clock override and query helpers shared by the driver mixins."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import msgspec

from ...errors import NotFoundError
from .. import Config, default_channel
from ..queue import DEFAULT_TASK_QUEUE, EventRecord, Job, JobState, Source
from ._fence import CURRENT_FENCE
from ._guard import Availability, GuardedPool
from ._holder import HolderSetting
from ._queries import QUERIES
from ._wake import PostCommitWakes

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: Returns the time statements should use, or None for the backend clock.
Clock = Callable[[], datetime | None]


def validate_identifier(value: str, what: str) -> str:
    """Return ``value`` if it is a safe lower-case SQL identifier, else raise ValueError.

    Names starting with ``pg_`` (``pg_catalog``, ``pg_temp`` ...) are reserved by
    PostgreSQL and refused too.
    """
    if not _IDENT.match(value):
        raise ValueError(
            f"invalid {what} {value!r}: use 1-63 lower-case letters, digits or '_', "
            "starting with a letter or '_'"
        )
    if value.startswith("pg_"):
        raise ValueError(
            f"invalid {what} {value!r}: names starting with 'pg_' are reserved by PostgreSQL"
        )
    return value


class PgBase:
    """State and helpers every driver mixin uses."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        config: Config,
        clock: Clock | None,
        holder: HolderSetting | None = None,
    ) -> None:
        self.dsn = dsn
        self.config = config
        self.schema = config.schema or "public"
        #: Reachability of the database, shared by the pool and dedicated connections.
        self.availability = Availability()
        #: Every statement goes through it: driver errors become product errors.
        self.pool = GuardedPool(pool, self.schema, self.availability)
        self.channel = config.notify_channel or default_channel(self.schema)
        #: Wake-ups of committed hot statements: local listeners, then NOTIFY.
        self.wakes = PostCommitWakes(dsn, self.channel)
        # Wake-ups recorded in a transaction of :meth:`transaction`, by connection.
        self._tx_wakes: dict[int, list[str]] = {}
        self.migrations_table = config.migrations_table or "azync_migrations"
        self._clock = clock
        #: The worker identity's token prefix the pooled connections carry.
        self.holder_setting = holder or HolderSetting()

    async def _wake_after(self, payloads: list[str], conn: asyncpg.Connection | None) -> None:
        """Deliver the wake-ups a statement recorded: once it committed when it
        ran on its own (``conn`` None) or when the :meth:`transaction` it ran
        in commits, else (the caller's own transaction) by NOTIFY in it."""
        if conn is None:
            self.wakes.send(payloads)
        elif (deferred := self._tx_wakes.get(id(conn))) is not None:
            deferred.extend(payloads)  # sent when this store's transaction commits
        else:
            await self.wakes.send_within(conn, payloads)

    def target(self) -> str:
        """Where this store points, for logs: the DSN without any password, and
        the schema (``postgresql://app@db:5432/prod, schema "orders"``)."""
        return f'{redact_dsn(self.dsn)}, schema "{self.schema}"'

    def now(self) -> datetime | None:
        """The clock override for ``$1`` of every query (None = backend clock)."""
        return self._clock() if self._clock is not None else None

    async def _fetch(
        self, name: str, *args: Any, conn: asyncpg.Connection | None = None
    ) -> list[asyncpg.Record]:
        if conn is None and CURRENT_FENCE.get() is not None:
            return await self._fenced("fetch", name, args)  # type: ignore[no-any-return]
        rows: list[asyncpg.Record] = await (conn or self.pool).fetch(
            QUERIES[name], self.now(), *args
        )
        return rows

    async def _fetchrow(
        self, name: str, *args: Any, conn: asyncpg.Connection | None = None
    ) -> asyncpg.Record | None:
        if conn is None and CURRENT_FENCE.get() is not None:
            return await self._fenced("fetchrow", name, args)
        return await (conn or self.pool).fetchrow(QUERIES[name], self.now(), *args)

    async def _fetchval(self, name: str, *args: Any, conn: asyncpg.Connection | None = None) -> Any:
        if conn is None and CURRENT_FENCE.get() is not None:
            return await self._fenced("fetchval", name, args)
        return await (conn or self.pool).fetchval(QUERIES[name], self.now(), *args)

    async def _fenced(self, method: str, name: str, args: tuple[Any, ...]) -> Any:
        """A lone statement of a fenced task: run it in its own fenced transaction."""
        async with self.transaction() as conn:
            return await getattr(conn, method)(QUERIES[name], self.now(), *args)

    async def _must(
        self, name: str, *args: Any, what: str, conn: asyncpg.Connection | None = None
    ) -> asyncpg.Record:
        """Run a fenced statement; raise NotFoundError when it touched no row."""
        row = await self._fetchrow(name, *args, conn=conn)
        if row is None:
            raise NotFoundError(what)
        return row

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """Yield a pooled connection (autocommit); under a leadership fence, one
        inside a fenced :meth:`transaction` instead."""
        if CURRENT_FENCE.get() is not None:
            async with self.transaction() as conn:
                yield conn
            return
        async with self.pool.acquire() as conn:
            yield conn

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """Yield a pooled connection inside one transaction.

        Under a leadership fence (see ``_fence``) the transaction opens with the
        fence check and raises LeadershipLostError when the term no longer leads.
        """
        deferred: list[str] = []
        async with self.pool.acquire() as conn:
            self._tx_wakes[id(conn)] = deferred
            try:
                async with conn.transaction():
                    fence = CURRENT_FENCE.get()
                    if fence is not None:
                        await fence.check(conn, self.now())
                    yield conn
            finally:
                del self._tx_wakes[id(conn)]
        self.wakes.send(deferred)  # committed: the wake-ups its statements recorded


_S = TypeVar("_S", bound=msgspec.Struct)


def struct_from_row(cls: type[_S], row: asyncpg.Record) -> _S:
    """A ``cls`` whose every field is the row's column of the same name, as is."""
    return cls(**{name: row[name] for name in cls.__struct_fields__})


def stale_lease(id: uuid.UUID, what: str = "job") -> str:
    """The error message of a lease-fenced write whose lease is gone: ``what``
    (``"job"``, ``"dag task"``, ``"workflow task"``, ``"operation"``) ``id`` is
    no longer active under the caller's lease token."""
    return (
        f"{what} {id} is not active under this lease token (it was settled, reaped, "
        "cancelled or re-leased); nothing was written"
    )


def job_from_row(row: asyncpg.Record) -> Job:
    """Build a :class:`Job` from a ``azync_jobs`` row (plus optional ``ev_*`` columns)."""
    event = None
    if row.get("ev_type") is not None:
        event = EventRecord(
            id=row["event_id"],
            type=row["ev_type"],
            aggregate_type=row["ev_aggregate_type"],
            aggregate_id=row["ev_aggregate_id"],
            version=row["ev_version"],
            occurred_at=row["ev_occurred_at"],
            payload=bytes(row["ev_payload"]),
            meta=decode_meta(row["ev_meta"]),
        )
    return Job(
        id=row["id"],
        source=_SOURCES[row["source"]],
        kind=row["kind"],
        state=_STATES[row["state"]],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        reap_count=row["reap_count"],
        payload=None if row["payload"] is None else bytes(row["payload"]),
        meta=decode_meta(row["meta"]),
        run_at=row["run_at"],
        lease_until=row["lease_until"],
        lease_token=row["lease_token"],
        last_error=row["last_error"],
        event_id=row["event_id"],
        replay=row["replay"],
        event=event,
        dag_id=row["dag_id"],
        run_id=row["run_id"],
        task_key=row["task_key"],
        result=None if row["result"] is None else bytes(row["result"]),
        signal_name=row["signal_name"],
        compensation_kind=row["compensation_kind"],
        ignore_dead_deps=row["ignore_dead_deps"],
        snooze_budget=row["snooze_budget"] or _ZERO,
        deadline_at=row["deadline_at"],
        enqueued_at=row["enqueued_at"],
        failed_at=row["failed_at"],
        completed_at=row["completed_at"],
        started_at=row["started_at"],
        task_queue=row.get("task_queue") or DEFAULT_TASK_QUEUE,
        blocked_reason=_blocked(row),
        priority=row.get("priority") or 0,
        limit_key=row.get("limit_key"),
    )


def _blocked(row: asyncpg.Record) -> str:
    """Why a worker left the job, then the full limits it waits for (when read with them)."""
    return "; ".join(r for r in (row.get("blocked_reason"), row.get("limit_waits")) if r)


def lease_order(job: Job) -> tuple[datetime, uuid.UUID]:
    """The order a lease takes due jobs in (``azync_due_order`` of migration
    0027): ``run_at`` moved earlier by the priority in minutes, then id."""
    assert job.run_at is not None
    return job.run_at - timedelta(minutes=job.priority), job.id


_ZERO = timedelta(0)
#: Enum members by value: a dict lookup per row instead of an Enum call (the lease hot path).
_SOURCES = {s.value: s for s in Source}
_STATES = {s.value: s for s in JobState}
_meta_decoder = msgspec.json.Decoder(dict[str, str])


def decode_meta(value: Any) -> dict[str, str]:
    """Decode a jsonb meta column (asyncpg returns it as text) to a dict."""
    if value is None or value == "{}":
        return {}
    if isinstance(value, dict):
        return value
    return _meta_decoder.decode(value)


def encode_meta(meta: dict[str, str] | None) -> str:
    return msgspec.json.encode(meta or {}).decode()


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password removed (URL userinfo, ``password=`` in a URL
    query or in the ``key=value`` form)."""
    if "://" not in dsn:
        return re.sub(r"\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|\S*)\s*", "", dsn).strip()
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = "&".join(
        q for q in parts.query.split("&") if q and not q.lower().startswith("password=")
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
