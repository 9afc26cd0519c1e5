"""The storage contract: value types, errors and Protocols, plus the Postgres driver."""

from .errors import (
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
from .protocols import *
from .protocols import __all__ as _protocols_all
from .types import *
from .types import __all__ as _types_all

__all__ = sorted(
    [
        "AzyncError",
        "ConflictError",
        "LeadershipLostError",
        "MigrationError",
        "NotFoundError",
        "SchemaNotMigratedError",
        "StoreError",
        "StoreUnavailableError",
        "is_not_found",
        *_protocols_all,
        *_types_all,
    ]
)
