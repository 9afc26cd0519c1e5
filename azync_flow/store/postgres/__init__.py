"""PostgreSQL driver of the storage contract (asyncpg)."""

from ._base import validate_identifier
from .driver import PostgresStore, open_store

__all__ = ["PostgresStore", "open_store", "validate_identifier"]
