"""PostgreSQL driver of the storage contract (asyncpg)."""

from .driver import PostgresStore, open_store

__all__ = ["PostgresStore", "open_store"]
