"""Named SQL queries loaded once from ``queries/*.sql``.

Each query is introduced by a ``-- name: <entity>_<verb>`` line. By
convention parameter ``$1`` of every query is the clock override
(``timestamptz``, NULL in production) and statements read the time as
``coalesce($1, now())``, so tests can move time without touching the server.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)


def _parse(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"duplicate query name {name!r}")
        queries[name] = body.strip().rstrip(";")
    return queries


def load_queries() -> dict[str, str]:
    """Return every named query of the package, keyed by name."""
    queries: dict[str, str] = {}
    folder = resources.files(__package__).joinpath("queries")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, sql in _parse(entry.read_text(encoding="utf-8")).items():
                if name in queries:
                    raise ValueError(f"duplicate query name {name!r} in {entry.name}")
                queries[name] = sql
    return queries


QUERIES = load_queries()
