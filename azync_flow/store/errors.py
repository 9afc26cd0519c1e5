"""Errors raised by store drivers.

Tree::

    AzyncError
    └── StoreError
        ├── NotFoundError      (contract IsNotFound: missing row, stale lease token,
        │                       wrong state for the verb)
        ├── ConflictError      (the row exists but another writer won)
        ├── LeadershipLostError (a fenced maintenance write of a lapsed leadership term)
        ├── MigrationError
        ├── SchemaNotMigratedError (the schema lacks the tables: run the migrations)
        └── StoreUnavailableError  (the database cannot be reached right now; retryable)
"""

from __future__ import annotations

from typing import Any


class AzyncError(Exception):
    """Root of every error azync_flow raises on purpose."""

    code = "azync"

    def __str__(self) -> str:
        return f"[{self.code}] {super().__str__()}"


class StoreError(AzyncError):
    code = "store"


class NotFoundError(StoreError):
    """The target row does not exist, is in the wrong state, or the lease token
    no longer owns it. Nothing was changed."""

    code = "not_found"


class ConflictError(StoreError):
    """A concurrent writer already applied a conflicting change. Nothing was changed."""

    code = "conflict"


class LeadershipLostError(StoreError):
    """The leadership term a maintenance write was fenced by is no longer held
    (its lease expired on the backend clock or another holder took over).
    Nothing was changed; stop acting as leader."""

    code = "leadership_lost"


class MigrationError(StoreError):
    code = "migration"


class SchemaNotMigratedError(StoreError):
    """The schema has no azync_flow tables, or lacks migrations this version needs.

    Not retryable: run ``azync-flow migrate`` (or ``open_store(..., migrate=True)``)
    against the schema, or point ``Config.schema`` / ``--schema`` at the right one.

    Attributes:
        schema: the schema the store was opened on.
    """

    code = "schema_not_migrated"

    def __init__(self, schema: str, detail: str = "it has no azync_flow tables") -> None:
        self.schema = schema
        self.detail = detail
        super().__init__(
            f"schema {schema!r} is not migrated ({detail}); "
            "run `azync-flow migrate` first (or check the schema name)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.schema, self.detail))


class StoreUnavailableError(StoreError):
    """The database cannot be reached right now: refused or dropped connection,
    server starting up or shutting down, too many connections.

    Retryable. A call that failed while reading changed nothing; a write whose
    connection broke mid-commit may or may not have been applied, so retry with
    the same ids, idempotency keys and message ids (the client verbs are
    idempotent under them). The driver error is kept as ``__cause__``.
    """

    code = "store_unavailable"
    retryable = True


def is_not_found(err: BaseException | None) -> bool:
    """Return True when ``err`` is (or wraps) a :class:`NotFoundError`."""
    while err is not None:
        if isinstance(err, NotFoundError):
            return True
        err = err.__cause__
    return False
