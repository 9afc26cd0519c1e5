"""The schema a fresh migrate produces, rendered from the catalog: ``schema.sql``.

The migrations are the schema's only source; replaying 20-odd files in your
head to know what a table looks like is error-prone, so ``schema.sql`` (next
to this module) holds the result: types, sequences, tables with their columns
and constraints, indexes, functions and triggers, each kind in name order, the
schema name removed (``<schema>`` where it cannot be dropped, as in a
function's pinned ``search_path``). A test fails with a unified diff when a
migration changes the schema and the snapshot was not regenerated::

    python -m azync_flow.store.postgres.schema_dump            # rewrite schema.sql
    python -m azync_flow.store.postgres.schema_dump --check    # diff, exit 1 when stale

The DSN is ``--dsn``, else ``$AZYNC_DSN``, else the embedded server. A fresh
schema is migrated, rendered and dropped; nothing else is touched.

Rendering reads ``pg_catalog`` and the server's own deparsers
(``pg_get_constraintdef``, ``pg_get_indexdef``, ``pg_get_functiondef``,
``pg_get_triggerdef``) rather than ``pg_dump``, whose output changes between
server versions: the snapshot is the same on every supported PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from ._base import validate_identifier
from ._migrate import migrate

__all__ = ["SNAPSHOT", "dump_fresh_schema", "main", "render_schema", "snapshot_diff"]

#: The committed snapshot of a fresh migrate.
SNAPSHOT = Path(__file__).with_name("schema.sql")
#: What the schema name is replaced with where it is not a plain qualifier.
PLACEHOLDER = "<schema>"
_MIGRATIONS_TABLE = "azync_migrations"
_HEADER = """\
-- The schema a fresh migrate produces. GENERATED from the catalog: do not edit.
-- Change the schema with a new numbered file in migrations/, then regenerate:
--     python -m azync_flow.store.postgres.schema_dump
-- Each kind of object in name order; the schema name is left out (<schema>
-- where a function pins its search_path).
"""


async def render_schema(conn: asyncpg.Connection, schema: str) -> str:
    """Render every object of ``schema`` as SQL text, in a stable order.

    Args:
        conn: a connection (used inside one transaction of its own).
        schema: the schema to read; its name is left out of the text.

    Returns:
        The snapshot text (what ``schema.sql`` holds for a fresh migrate).

    Raises:
        ValueError: ``schema`` is not a safe identifier, or holds an object of a
            kind the snapshot cannot render yet (say a domain or a
            partitioned table): the renderer must learn it before the
            snapshot can stand for the schema.
    """
    validate_identifier(schema, "schema")
    async with conn.transaction():
        await conn.execute(f'SET LOCAL search_path TO "{schema}"')
        ns = await conn.fetchval("SELECT oid FROM pg_namespace WHERE nspname = $1", schema)
        if ns is None:
            raise ValueError(f"schema {schema!r} does not exist")
        await _refuse_unknown_kinds(conn, ns)
        parts = [
            _HEADER,
            await _migrations(conn, schema),
            await _types(conn, ns),
            await _sequences(conn, ns),
            await _tables(conn, ns),
            await _foreign_keys(conn, ns),
            await _sequence_owners(conn, ns),
            await _indexes(conn, ns),
            await _functions(conn, ns),
            await _triggers(conn, ns),
        ]
    text = "\n".join(p for p in parts if p)
    return _neutralise(text, schema)


def snapshot_diff(actual: str, expected: str) -> str:
    """A unified diff from ``expected`` (the committed snapshot) to ``actual``
    (what migrating produced); empty when they are equal."""
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile="schema.sql (committed)",
            tofile="schema.sql (fresh migrate)",
        )
    )


async def dump_fresh_schema(dsn: str) -> str:
    """Migrate a fresh schema on ``dsn``, render it and drop it.

    Raises:
        MigrationError: a migration fails.
        asyncpg.PostgresError, OSError: the server cannot be used.
    """
    schema = f"schema_dump_{uuid.uuid4().hex[:16]}"
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn, schema, _MIGRATIONS_TABLE, replay=True)
        return await render_schema(conn, schema)
    finally:
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


def main(argv: list[str] | None = None) -> int:
    """Command line: rewrite ``schema.sql``, or with ``--check`` compare.

    Returns:
        0, or 1 with ``--check`` when the snapshot differs (the diff printed).
    """
    parser = argparse.ArgumentParser(
        prog="python -m azync_flow.store.postgres.schema_dump",
        description="Render the schema a fresh migrate produces into schema.sql.",
    )
    parser.add_argument(
        "--dsn",
        help="PostgreSQL to migrate a scratch schema on "
        "(default: $AZYNC_DSN, else the embedded server)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with schema.sql instead of writing it; exit 1 when stale",
    )
    args = parser.parse_args(argv)
    dsn = args.dsn
    if not dsn:
        from ...embedded import resolve_dsn

        dsn, _ = resolve_dsn()
    actual = asyncio.run(dump_fresh_schema(dsn))
    if args.check:
        expected = SNAPSHOT.read_text(encoding="utf-8") if SNAPSHOT.exists() else ""
        diff = snapshot_diff(actual, expected)
        if diff:
            sys.stdout.write(diff)
            return 1
        return 0
    SNAPSHOT.write_text(actual, encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
    return 0


# --- sections -----------------------------------------------------------------


async def _refuse_unknown_kinds(conn: asyncpg.Connection, ns: int) -> None:
    rows = await conn.fetch(
        """
        SELECT 'relation ' || c.relname || ' (relkind ' || c.relkind::text || ')' AS what
        FROM pg_class c
        WHERE c.relnamespace = $1 AND c.relkind NOT IN ('r', 'i', 'S', 'v', 'c')
        UNION ALL
        SELECT 'type ' || t.typname || ' (typtype ' || t.typtype::text || ')'
        FROM pg_type t
        WHERE t.typnamespace = $1 AND t.typtype NOT IN ('c', 'e')
          AND NOT EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = t.oid)
        UNION ALL
        SELECT 'routine ' || p.proname || ' (prokind ' || p.prokind::text || ')'
        FROM pg_proc p
        WHERE p.pronamespace = $1 AND p.prokind NOT IN ('f', 'p')
        ORDER BY 1
        """,
        ns,
    )
    if rows:
        kinds = ", ".join(r["what"] for r in rows)
        raise ValueError(f"the schema snapshot cannot render yet: {kinds}; teach schema_dump")


async def _migrations(conn: asyncpg.Connection, schema: str) -> str:
    table = f'"{schema}"."{_MIGRATIONS_TABLE}"'
    if await conn.fetchval("SELECT to_regclass($1)", table) is None:
        return ""
    names = [r["name"] for r in await conn.fetch(f"SELECT name FROM {table} ORDER BY version")]
    return "-- Migrations applied:\n" + "".join(f"--   {n}\n" for n in names)


async def _types(conn: asyncpg.Connection, ns: int) -> str:
    rows = await conn.fetch(
        """
        SELECT t.typname, t.typtype,
               ARRAY(SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                     FROM pg_attribute a
                     WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped
                     ORDER BY a.attnum) AS attributes,
               ARRAY(SELECT quote_literal(e.enumlabel) FROM pg_enum e
                     WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder) AS labels
        FROM pg_type t
        LEFT JOIN pg_class c ON c.oid = t.typrelid
        WHERE t.typnamespace = $1
          AND (t.typtype = 'e' OR (t.typtype = 'c' AND c.relkind = 'c'))
        ORDER BY t.typname
        """,
        ns,
    )
    out = []
    for r in rows:
        if r["typtype"] == "e":
            body = ", ".join(r["labels"])
            out.append(f"CREATE TYPE {r['typname']} AS ENUM ({body});\n")
        else:
            body = ",\n".join(f"    {a}" for a in r["attributes"])
            out.append(f"CREATE TYPE {r['typname']} AS (\n{body}\n);\n")
    return _section("Types", out)


async def _sequences(conn: asyncpg.Connection, ns: int) -> str:
    rows = await conn.fetch(
        """
        SELECT c.relname, format_type(s.seqtypid, NULL) AS type, s.seqstart, s.seqincrement,
               s.seqmin, s.seqmax, s.seqcache, s.seqcycle
        FROM pg_class c JOIN pg_sequence s ON s.seqrelid = c.oid
        WHERE c.relnamespace = $1 AND c.relkind = 'S'
        ORDER BY c.relname
        """,
        ns,
    )
    out = [
        f"CREATE SEQUENCE {r['relname']} AS {r['type']} START {r['seqstart']} "
        f"INCREMENT {r['seqincrement']} MINVALUE {r['seqmin']} MAXVALUE {r['seqmax']} "
        f"CACHE {r['seqcache']}{' CYCLE' if r['seqcycle'] else ''};\n"
        for r in rows
    ]
    return _section("Sequences", out)


async def _tables(conn: asyncpg.Connection, ns: int) -> str:
    tables = await conn.fetch(
        """
        SELECT c.oid, c.relname,
               ARRAY(SELECT o FROM unnest(coalesce(c.reloptions, '{}')) AS o ORDER BY o) AS options
        FROM pg_class c
        WHERE c.relnamespace = $1 AND c.relkind = 'r'
        ORDER BY c.relname
        """,
        ns,
    )
    columns = await conn.fetch(
        """
        SELECT a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod) AS type,
               a.attnotnull, a.attidentity::text AS identity, a.attgenerated::text AS generated,
               pg_get_expr(d.adbin, d.adrelid) AS expr
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = $1 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attrelid, a.attnum
        """,
        ns,
    )
    # Foreign keys come after every table (_foreign_keys); NOT NULL is the
    # column's own clause (PostgreSQL 18 also lists it here, as contype 'n').
    constraints = await conn.fetch(
        """
        SELECT k.conrelid, k.conname, pg_get_constraintdef(k.oid) AS def
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        WHERE c.relnamespace = $1 AND k.contype IN ('p', 'u', 'c', 'x')
        ORDER BY k.conrelid, array_position(ARRAY['p', 'u', 'x', 'c'], k.contype::text),
                 k.conname
        """,
        ns,
    )
    out = []
    for t in tables:
        lines = [_column(c) for c in columns if c["attrelid"] == t["oid"]]
        lines += [
            f"CONSTRAINT {k['conname']} {k['def']}"
            for k in constraints
            if k["conrelid"] == t["oid"]
        ]
        body = ",\n".join(f"    {line}" for line in lines)
        with_ = f" WITH ({', '.join(t['options'])})" if t["options"] else ""
        out.append(f"CREATE TABLE {t['relname']} (\n{body}\n){with_};\n")
    return _section("Tables", out)


def _column(c: Any) -> str:
    text = f"{c['attname']} {c['type']}"
    if c["identity"] in ("a", "d"):
        how = "ALWAYS" if c["identity"] == "a" else "BY DEFAULT"
        text += f" GENERATED {how} AS IDENTITY"
    elif c["generated"] == "s":
        text += f" GENERATED ALWAYS AS ({c['expr']}) STORED"
    elif c["expr"] is not None:
        text += f" DEFAULT {c['expr']}"
    if c["attnotnull"]:
        text += " NOT NULL"
    return text


async def _foreign_keys(conn: asyncpg.Connection, ns: int) -> str:
    rows = await conn.fetch(
        """
        SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) AS def
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        WHERE c.relnamespace = $1 AND k.contype = 'f'
        ORDER BY c.relname, k.conname
        """,
        ns,
    )
    out = [
        f"ALTER TABLE {r['relname']} ADD CONSTRAINT {r['conname']}\n    {r['def']};\n" for r in rows
    ]
    return _section("Foreign keys", out)


async def _sequence_owners(conn: asyncpg.Connection, ns: int) -> str:
    rows = await conn.fetch(
        """
        SELECT s.relname, t.relname AS tbl, a.attname
        FROM pg_class s
        JOIN pg_depend d ON d.objid = s.oid AND d.classid = 'pg_class'::regclass
             AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
        JOIN pg_class t ON t.oid = d.refobjid
        JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid
        WHERE s.relnamespace = $1 AND s.relkind = 'S'
        ORDER BY s.relname
        """,
        ns,
    )
    out = [f"ALTER SEQUENCE {r['relname']} OWNED BY {r['tbl']}.{r['attname']};\n" for r in rows]
    return _section("Sequence owners", out)


async def _indexes(conn: asyncpg.Connection, ns: int) -> str:
    # Indexes that back a primary key, unique or exclusion constraint are
    # that constraint's, rendered with its table.
    rows = await conn.fetch(
        """
        SELECT pg_get_indexdef(x.indexrelid) AS def
        FROM pg_index x
        JOIN pg_class i ON i.oid = x.indexrelid
        JOIN pg_class t ON t.oid = x.indrelid
        WHERE t.relnamespace = $1
          AND NOT EXISTS (SELECT 1 FROM pg_constraint k
                          WHERE k.conindid = x.indexrelid AND k.conrelid = x.indrelid
                            AND k.contype IN ('p', 'u', 'x'))
        ORDER BY t.relname, i.relname
        """,
        ns,
    )
    return _section("Indexes", [f"{r['def']};\n" for r in rows])


async def _functions(conn: asyncpg.Connection, ns: int) -> str:
    rows = await conn.fetch(
        """
        SELECT pg_get_functiondef(p.oid) AS def
        FROM pg_proc p
        WHERE p.pronamespace = $1 AND p.prokind IN ('f', 'p')
        ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)
        """,
        ns,
    )
    return _section("Functions", [f"{r['def'].rstrip()};\n" for r in rows])


async def _triggers(conn: asyncpg.Connection, ns: int) -> str:
    rows = await conn.fetch(
        """
        SELECT pg_get_triggerdef(t.oid) AS def
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = $1 AND NOT t.tgisinternal
        ORDER BY c.relname, t.tgname
        """,
        ns,
    )
    return _section("Triggers", [f"{r['def']};\n" for r in rows])


def _section(title: str, items: list[str]) -> str:
    if not items:
        return ""
    return f"-- {title}\n\n" + "\n".join(items)


def _neutralise(text: str, schema: str) -> str:
    """Drop the schema as a qualifier (``"s".t``, ``s.t``) and name it
    :data:`PLACEHOLDER` elsewhere (a pinned ``search_path``)."""
    name = re.escape(schema)
    text = re.sub(rf'(?<![\w"])"?{name}"?\.(?=["\w])', "", text)
    return re.sub(rf"(?<![\w]){name}(?![\w])", PLACEHOLDER, text)


if __name__ == "__main__":
    sys.exit(main())
