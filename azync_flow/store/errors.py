"""The store errors under the path the Postgres driver imports them from; their
home is :mod:`azync_flow.errors`."""

from __future__ import annotations

from azync_flow.errors import (
    AzyncError,
    ConflictError,
    LeadershipLostError,
    MigrationError,
    NotFoundError,
    SchemaNotMigratedError,
    StoreError,
    StoreUnavailableError,
    is_not_found,
)

__all__ = [
    "AzyncError",
    "ConflictError",
    "LeadershipLostError",
    "MigrationError",
    "NotFoundError",
    "SchemaNotMigratedError",
    "StoreError",
    "StoreUnavailableError",
    "is_not_found",
]
