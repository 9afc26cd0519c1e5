"""The check every verb taking the caller's ``conn=`` makes first."""

from __future__ import annotations

from typing import Any

import asyncpg

__all__ = ["check_transaction"]


def check_transaction(conn: Any, verb: str) -> None:
    """``conn`` must be one asyncpg connection inside an open transaction: a
    pool, or a connection in autocommit, would commit the write on its own.

    Args:
        conn: what the caller passed as ``conn``.
        verb: the method's name, for the message.

    Raises:
        TypeError: ``conn`` is not an asyncpg connection.
        ValueError: ``conn`` has no open transaction.
    """
    if isinstance(conn, asyncpg.Pool) or not callable(getattr(conn, "is_in_transaction", None)):
        raise TypeError(
            f"conn must be an asyncpg connection inside your transaction, not {type(conn).__name__}"
        )
    if not conn.is_in_transaction():
        raise ValueError(
            f"conn has no open transaction: {verb} inside `async with conn.transaction():` "
            f"(or call {verb} without conn)"
        )
