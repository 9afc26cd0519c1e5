"""The storage contract: value types, errors and Protocols, plus the Postgres driver."""

from .errors import (
    AzyncError,
    ConflictError,
    MigrationError,
    NotFoundError,
    StoreError,
    is_not_found,
)
from .types import *
from .types import __all__ as _types_all

__all__ = sorted(
    [
        "AzyncError",
        "ConflictError",
        "MigrationError",
        "NotFoundError",
        "StoreError",
        "is_not_found",
        *_types_all,
    ]
)
