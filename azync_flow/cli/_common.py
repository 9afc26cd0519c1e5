"""Shared CLI plumbing: exit codes, errors, DSN resolution, output."""

from __future__ import annotations

import argparse
import enum
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import msgspec

from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store

#: Exit codes of ``azync-flow`` (documented in docs/uncertain.md, "CLI").
EXIT_OK = 0
EXIT_FAILED = 1  # the thing asked about failed (workflow failed, replay mismatch)
EXIT_USAGE = 2  # bad arguments or input (bad JSON, malformed id, unknown decision)
EXIT_NOT_FOUND = 3  # no such execution / operation / job, or not in the needed state
EXIT_CONFLICT = 4  # already decided / idempotency conflict
EXIT_UNAVAILABLE = 5  # no database: bad DSN, server unreachable, no DSN given
EXIT_TIMEOUT = 6  # waited long enough (workflow result)
EXIT_INTERNAL = 70  # anything unexpected (message only; --debug shows the traceback)


class CliError(Exception):
    """A user-facing failure: ``message`` goes to stderr, ``code`` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def parse_id(value: str, what: str = "id") -> uuid.UUID:
    """A UUID from the command line, or a usage error naming ``what``."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise CliError(f"{what} {value!r} is not a valid UUID") from None


def parse_json(value: str | None, what: str) -> Any:
    """Decode a JSON argument (``None`` stays None), or a usage error.

    ``@PATH`` reads the JSON from a file and ``-`` from stdin (for inputs too
    large for a command line). The value is then encoded by the one payload
    encoder, so NaN/Infinity literals and over-deep nesting are refused there
    as on every other path.
    """
    if value is None:
        return None
    text = read_argument(value, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} is not valid JSON ({exc.msg} at position {exc.pos})") from None
    except RecursionError:
        raise CliError(f"{what} is nested too deeply (over ~1000 levels)") from None


def read_argument(value: str, what: str) -> str:
    """``value``, or the text of file ``@PATH``, or stdin for ``-``."""
    if value == "-":
        return sys.stdin.read()
    if not value.startswith("@"):
        return value
    path = value[1:]
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{what}: cannot read {path!r}: {exc}") from None


def add_db_args(parser: argparse.ArgumentParser, *, embedded_fallback: bool) -> None:
    """``--dsn``, ``--schema`` and (where it makes sense) ``--embedded``."""
    parser.add_argument("--dsn", help="PostgreSQL URI (default: $AZYNC_DSN)")
    parser.add_argument(
        "--schema",
        default=os.environ.get("AZYNC_SCHEMA", ""),
        help="schema of the tables (default: $AZYNC_SCHEMA or public)",
    )
    parser.add_argument(
        "--embedded",
        action="store_true",
        default=embedded_fallback,
        help="without a DSN, use the embedded server (default for this command: "
        + ("yes" if embedded_fallback else "no")
        + ")",
    )


def resolve_dsn(args: argparse.Namespace) -> str:
    """``--dsn``, else ``$AZYNC_DSN``, else the embedded server when allowed."""
    dsn = args.dsn or os.environ.get("AZYNC_DSN")
    if dsn:
        return str(dsn)
    if not getattr(args, "embedded", False):
        raise CliError(
            "no database given: pass --dsn postgresql://..., set AZYNC_DSN, "
            "or add --embedded to use the local embedded server",
            EXIT_UNAVAILABLE,
        )
    from azync_flow.embedded import default_data_dir, start_embedded

    try:
        return start_embedded(default_data_dir())
    except RuntimeError as exc:
        raise CliError(str(exc), EXIT_UNAVAILABLE) from None


@asynccontextmanager
async def connect(
    args: argparse.Namespace, *, migrate: bool = False
) -> AsyncIterator[PostgresStore]:
    """An open store for the command's DSN and schema; closed afterwards."""
    config = Config(schema=args.schema or "", min_pool_size=1, max_pool_size=4)
    try:
        store = await open_store(resolve_dsn(args), config, migrate=migrate)
    except ValueError as exc:  # an unsafe schema name
        raise CliError(str(exc)) from None
    try:
        yield store
    finally:
        await store.close()


def to_plain(value: Any) -> Any:
    """msgspec Structs, UUIDs, times, enums and JSON bytes as plain JSON-able values."""
    if isinstance(value, msgspec.Struct):
        return {f: to_plain(getattr(value, f)) for f in value.__struct_fields__}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return payload_json(bytes(value))
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def emit(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(to_plain(value), indent=2, ensure_ascii=False) + "\n")


def payload_json(data: bytes | None) -> Any:
    """Decode stored JSON bytes for display (None stays None)."""
    if data is None:
        return None
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return data.decode("utf-8", "replace")
