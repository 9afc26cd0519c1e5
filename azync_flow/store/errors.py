"""Errors raised by store drivers.

Tree::

    AzyncError
    └── StoreError
        ├── NotFoundError      (contract IsNotFound: missing row, stale lease token,
        │                       wrong state for the verb)
        ├── ConflictError      (the row exists but another writer won)
        ├── LeadershipLostError (a fenced maintenance write of a lapsed leadership term)
        └── MigrationError
"""

from __future__ import annotations


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


def is_not_found(err: BaseException | None) -> bool:
    """Return True when ``err`` is (or wraps) a :class:`NotFoundError`."""
    while err is not None:
        if isinstance(err, NotFoundError):
            return True
        err = err.__cause__
    return False
