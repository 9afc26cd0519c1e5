"""Driver errors become product errors at one boundary: the pool every statement uses.

* A connection-class failure (refused or reset socket, the server starting up
  or shutting down, a connection closed mid-call, too many connections) raises
  :class:`StoreUnavailableError`;
* a connection the server refused at login (unknown role or database, wrong
  password) raises :class:`StoreLoginRefusedError`, not retryable;
* a missing table raises :class:`SchemaNotMigratedError` with the migrate hint;
* an operation's report refused after its schedule-to-close deadline raises
  :class:`NotFoundError` (a report that came too late, like a stale lease's).

Both keep the driver error as ``__cause__``. The pool also reports outages
once: one WARNING when the database becomes unreachable and one INFO when a
statement started after that succeeds ("reconnected after 0.4 s"), so the
loops of a worker retrying through a restart do not each log a traceback.
"""

from __future__ import annotations

import logging
import re
import time
from types import TracebackType
from typing import Any

import asyncpg

from ...errors import (
    AzyncError,
    NotFoundError,
    SchemaNotMigratedError,
    StoreLoginRefusedError,
    StoreUnavailableError,
)

__all__ = [
    "Availability",
    "GuardedPool",
    "describe_outage",
    "is_unavailable",
    "login_refused",
    "outage_cause",
    "translate",
]

log = logging.getLogger("azync_flow.store")

#: admin_shutdown, crash_shutdown, cannot_connect_now, idle_session_timeout,
#: idle_in_transaction_session_timeout (the server ended the session; a fresh
#: one works), too_many_connections. Class 08 (connection exceptions) is
#: matched by its prefix.
#: An operation's report refused after its schedule-to-close deadline
#: (migration 0042): nothing was written, the call times out.
LATE_COMPLETION_SQLSTATE = "AZ408"

_UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03", "53300"})


def is_unavailable(exc: BaseException, *, in_body: bool = False) -> bool:
    """True when ``exc`` means the database cannot be reached right now.

    ``in_body``: ``exc`` was raised inside ``async with pool.acquire()``, where
    asyncpg reports a connection the server closed as "released back to the pool".
    """
    if isinstance(exc, TimeoutError):  # a statement timeout, not a lost server
        return False
    # InternalClientError: the protocol state of a connection the server ended while
    # it sat idle in the pool ("another operation is in progress"); a fresh one works.
    if isinstance(exc, OSError | asyncpg.PostgresConnectionError | asyncpg.InternalClientError):
        return True
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate in _UNAVAILABLE_SQLSTATES or sqlstate.startswith("08"):
        return True
    # asyncpg's InterfaceError also covers misuse; only a closed connection counts.
    if not isinstance(exc, asyncpg.InterfaceError):
        return False
    text = str(exc)
    return "closed" in text or (in_body and "released back to the pool" in text)


#: What an unavailable database's SQLSTATE means, in the product's words.
_OUTAGE_WORDS = {
    "57P01": "the server ended the session (it is shutting down or restarting, "
    "or an administrator terminated the session)",
    "57P02": "the server crashed and ended every session",
    "57P03": "the server is starting up and does not accept connections yet",
    "57P05": "the server ended a session that sat idle too long",
    "25P03": "the server ended a session left idle inside a transaction",
    "53300": "the server has no connection slots left (too many connections)",
}


#: Driver errors of a connection that died under a statement (its protocol state
#: machine, a closed transaction, a closed socket).
_LOST_MID_STATEMENT = (
    asyncpg.InternalClientError | asyncpg.InterfaceError | asyncpg.ConnectionDoesNotExistError
)


def describe_outage(exc: BaseException) -> str:
    """What an unavailable-database driver error means, in the product's words
    (the driver's own text is kept apart, as the cause)."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate in _OUTAGE_WORDS:
        return _OUTAGE_WORDS[sqlstate]
    if isinstance(exc, ConnectionRefusedError):
        return "the server refused the connection (is it running and listening?)"
    if isinstance(exc, _LOST_MID_STATEMENT):
        return "the connection to the server was lost while a statement was in progress"
    if sqlstate.startswith("08"):
        return "the connection to the server failed"
    if isinstance(exc, OSError):
        return "the server cannot be reached"
    return "the connection to the server was lost"


def outage_cause(exc: BaseException) -> str:
    """The driver's own account of an outage: ``Type: text``."""
    return f"{type(exc).__name__}: {exc}"


#: SQLSTATEs of a connection the server refused at login: invalid_authorization_specification
#: (unknown role, role without LOGIN, no pg_hba.conf entry), invalid_password,
#: invalid_catalog_name (unknown database).
_REFUSED_SQLSTATES = frozenset({"28000", "28P01", "3D000"})
#: insufficient_privilege: refused at login only (no CONNECT privilege on the database).
_NO_CONNECT_PRIVILEGE = "42501"

_NAMED = re.compile(r'(role|user|database) "([^"]*)"')


def login_refused(exc: BaseException, *, connecting: bool = False) -> StoreLoginRefusedError | None:
    """The product error for a connection the server refused at login, or None.

    ``connecting``: ``exc`` was raised while opening a connection, where a
    missing privilege can only mean the database's CONNECT privilege.

    The message keeps the server's own words (they name the role or database,
    never a password) and says how to fix it.
    """
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate not in _REFUSED_SQLSTATES and not (
        connecting and sqlstate == _NO_CONNECT_PRIVILEGE
    ):
        return None
    said = str(getattr(exc, "message", "") or exc).strip()
    named = _NAMED.search(said)
    name = named.group(2) if named else ""
    if sqlstate == "28P01":
        refused = "password"
        fix = (
            f"check the password for role {name!r} in the DSN "
            "(postgresql://user:PASSWORD@host/db), "
            "$PGPASSWORD or ~/.pgpass"
        )
    elif sqlstate == "3D000":
        refused = "database"
        fix = (
            f"check the database name at the end of the DSN (postgresql://user@host:port/DB), "
            f"or create it (createdb {name or 'DB'})"
        )
    elif sqlstate == _NO_CONNECT_PRIVILEGE:
        refused = "database"
        fix = "grant the role CONNECT on the database, or connect as a role that has it"
    elif named and named.group(1) in ("role", "user") and "pg_hba.conf" not in said:
        refused = "role"
        fix = (
            "check the user name in the DSN (postgresql://USER@host:port/db), or create the role "
            f"with LOGIN (CREATE ROLE {name or 'USER'} LOGIN, or ALTER ROLE ... LOGIN)"
        )
    else:
        refused = "connection"
        fix = (
            "the server's pg_hba.conf admits no such connection: check the user, database and host"
        )
    return StoreLoginRefusedError(
        refused, name, f"PostgreSQL refused the connection: {said}; {fix}"
    )


def translate(exc: BaseException, schema: str, *, in_body: bool = False) -> AzyncError | None:
    """The product error for a driver error, or None to let ``exc`` through
    (``in_body``: see :func:`is_unavailable`). An unavailable database says
    what happened in the product's words; the driver error stays its
    ``__cause__``."""
    if isinstance(exc, AzyncError):
        return None
    if is_unavailable(exc, in_body=in_body):
        return StoreUnavailableError(f"database unavailable: {describe_outage(exc)}")
    if refused := login_refused(exc):  # a new pool connection after the role or grants changed
        return refused
    if isinstance(exc, asyncpg.UndefinedTableError):
        return SchemaNotMigratedError(schema, str(exc))
    if getattr(exc, "sqlstate", None) == LATE_COMPLETION_SQLSTATE:
        return NotFoundError(str(exc))
    return None


class _QuietPoolFloor(logging.Filter):
    """asyncpg's pool logs a WARNING with a traceback each time it fails to
    reconnect its minimum connections; during an outage that is noise next to
    the one WARNING :class:`Availability` logs, so those records become DEBUG,
    dropped unless that logger logs DEBUG (its level was checked as a WARNING)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and is_unavailable(exc):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            record.exc_info = record.exc_text = None
            record.msg = f"{record.msg} ({type(exc).__name__}: {exc})"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


logging.getLogger("asyncpg.pool").addFilter(_QuietPoolFloor())


class Availability:
    """Whether the database answered the last statements; logs the transitions.

    ``epoch`` grows at each outage, so a statement that started before the
    outage and finished after it does not count as a reconnection.

    Attributes:
        outages: outages seen so far (a test hook).
    """

    def __init__(self) -> None:
        self.down_since: float | None = None
        self.epoch = 0
        self.outages = 0

    def failed(self, exc: BaseException) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
            self.epoch += 1
            self.outages += 1
            log.warning(
                "database unavailable, retrying: %s (cause: %s)",
                describe_outage(exc),
                outage_cause(exc),
            )

    def succeeded(self, epoch: int) -> None:
        if self.down_since is not None and epoch == self.epoch:
            log.info("database reconnected after %.1f s", time.monotonic() - self.down_since)
            self.down_since = None


class GuardedPool:
    """An ``asyncpg.Pool`` whose statements and acquired connections raise product errors.

    ``fetch``/``fetchrow``/``fetchval``/``execute``/``executemany`` and the body
    of ``async with pool.acquire() as conn`` are translated by :func:`translate`;
    any other attribute is the pool's own.
    """

    def __init__(self, pool: Any, schema: str, availability: Availability) -> None:
        self.raw = pool
        self.schema = schema
        self.availability = availability

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    def fail(self, exc: BaseException, *, in_body: bool = False) -> AzyncError | None:
        """Translate ``exc``; an unavailable database is reported to ``availability``.

        The pool replaces connections the server closed by itself on their next
        acquire (``expire_connections`` is not used: asyncpg closes expired ones
        in tasks whose errors on a dead socket are never retrieved).
        """
        err = translate(exc, self.schema, in_body=in_body)
        if isinstance(err, StoreUnavailableError):
            self.availability.failed(exc)
        return err

    async def _call(self, method: Any, query: str, args: Any, kwargs: Any) -> Any:
        epoch = self.availability.epoch
        try:
            result = await method(query, *args, **kwargs)
        except Exception as exc:
            if (err := self.fail(exc)) is None:
                raise
            raise err from exc
        self.availability.succeeded(epoch)
        return result

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self._call(self.raw.fetch, query, args, kwargs)

    async def fetchrow(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self._call(self.raw.fetchrow, query, args, kwargs)

    async def fetchval(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self._call(self.raw.fetchval, query, args, kwargs)

    async def execute(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self._call(self.raw.execute, query, args, kwargs)

    async def executemany(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self._call(self.raw.executemany, query, args, kwargs)

    def acquire(self, *, timeout: float | None = None) -> _Acquire:
        """``async with pool.acquire() as conn:``; errors in the body are translated."""
        return _Acquire(self, self.raw.acquire(timeout=timeout))


class _Acquire:
    __slots__ = ("_cm", "_epoch", "_guard")

    def __init__(self, guard: GuardedPool, cm: Any) -> None:
        self._guard = guard
        self._cm = cm
        self._epoch = 0

    def __await__(self) -> Any:
        """``conn = await pool.acquire()`` (release it with ``pool.release(conn)``):
        acquiring is translated, the statements on ``conn`` are not."""
        return self.__aenter__().__await__()

    async def __aenter__(self) -> Any:
        self._epoch = self._guard.availability.epoch
        try:
            return await self._cm.__aenter__()
        except Exception as exc:
            if (err := self._guard.fail(exc)) is None:
                raise
            raise err from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._cm.__aexit__(exc_type, exc, tb)
        except Exception as release_exc:  # releasing a broken connection
            if (err := self._guard.fail(release_exc)) is None:
                raise
            raise err from release_exc
        if exc is None:
            self._guard.availability.succeeded(self._epoch)
        elif isinstance(exc, Exception) and (err := self._guard.fail(exc, in_body=True)):
            raise err from exc
