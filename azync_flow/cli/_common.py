"""Shared CLI plumbing: exit codes, errors, argument parsing, the database options."""

from __future__ import annotations

import base64
import binascii
import functools
import math
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

import click

from azync_flow._display import (
    MAX_DURATION,
    MAX_ROWS,
    duration_or_none,
    json_from_text,
    time_or_age,
)
from azync_flow.store import Config
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.validate import check_name, check_text

from ._output import json_option

#: Exit codes of `azync-flow` (documented in docs/cli.md, "Exit status").
EXIT_OK = 0
EXIT_FAILED = 1  # the thing asked about failed (workflow failed, replay mismatch)
EXIT_USAGE = 2  # bad arguments or input (bad JSON, malformed id, unknown decision, non-URI DSN)
EXIT_NOT_FOUND = 3  # no such execution / operation / job, or not in the needed state
EXIT_CONFLICT = 4  # already decided / idempotency conflict
EXIT_UNAVAILABLE = 5  # no database: server unreachable, connection refused, tables missing
EXIT_TIMEOUT = 6  # waited long enough (workflow result)
EXIT_INTERNAL = 70  # anything unexpected (message only; --debug shows the traceback)

P = ParamSpec("P")
T = TypeVar("T")


class CliError(Exception):
    """A user-facing failure: `message` goes to stderr, `code` is the exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def parse_id(value: str, what: str = "id") -> uuid.UUID:
    """A UUID from the command line, or a usage error naming `what`."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise CliError(f"{what} {value!r} is not a valid UUID") from None


def parse_json(value: str | None, what: str) -> Any:
    """Decode a JSON argument (`None` stays None), or a usage error
    (:func:`~azync_flow._display.json_from_text`'s rules)."""
    if value is None:
        return None
    try:
        return json_from_text(value, what)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def read_input(value: str | None, what: str) -> Any:
    """A JSON argument given inline, as `@path` (a file) or `-` (stdin)."""
    if value is None:
        return None
    if value == "-":
        return parse_json(sys.stdin.read(), f"{what} (stdin)")
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"{what}: cannot read {str(path)!r}: {exc}") from None
        return parse_json(text, f"{what} ({path})")
    return parse_json(value, what)


def parse_duration(value: str, what: str) -> timedelta:
    """A duration like `90s`, `15m`, `2h`, `3d`, or a usage error naming `what`."""
    duration = duration_or_none(value)
    if duration is None:
        raise CliError(f"{what} {value!r} is not a duration (90s, 15m, 2h, 3d)")
    return duration


def parse_since(value: str | None, what: str = "--since") -> datetime | None:
    """:func:`parse_time` of an optional option (None when not given)."""
    return None if value is None else parse_time(value, what)


def parse_time(value: str, what: str) -> datetime:
    """Every CLI time option: an ISO-8601 time (naive: UTC) or a relative age
    like `90s`, `15m`, `2h`, `3d` (that long ago); aware, or a usage error
    naming ``what``."""
    when = time_or_age(value)
    if when is None:
        raise CliError(
            f"{what} {value!r} is neither an ISO time (2026-01-31T12:00) nor an age (15m, 2h, 3d)"
        )
    return when


# --- cursors -------------------------------------------------------------------


def encode_cursor(*parts: str) -> str:
    """An opaque page cursor carrying `parts` (printed by `list`, read by `--cursor`)."""
    return base64.urlsafe_b64encode("|".join(parts).encode()).decode().rstrip("=")


def decode_cursor(value: str, count: int) -> list[str]:
    """The `count` parts of a cursor made by :func:`encode_cursor`, or a usage error."""
    try:
        text = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    parts = text.split("|")
    if len(parts) != count or not all(parts):
        raise CliError(f"--cursor {value!r} is not a cursor printed by this list command")
    return parts


def offset_cursor(value: str | None) -> int:
    """The offset an offset-paged list's `--cursor` carries (0 without one)."""
    if value is None:
        return 0
    (text,) = decode_cursor(value, 1)
    if not text.isdigit():
        raise CliError(f"--cursor {value!r} is not a cursor printed by this list command")
    return int(text)


# --- the database ----------------------------------------------------------------


@dataclass
class DbOptions:
    """Where a command's tables are: `--dsn` and `--schema`."""

    dsn: str | None
    schema: str


def resolve_dsn(dsn: str | None) -> str:
    """`--dsn`, else `$AZYNC_DSN`, else the embedded server (started or reused).

    Every command opens its store with the DSN this returns, so the value given
    is checked here, before the driver sees it.

    Returns:
        A PostgreSQL URI.

    Raises:
        CliError: `EXIT_USAGE` if the given DSN is not a PostgreSQL URI (see
            :func:`check_dsn`); `EXIT_UNAVAILABLE` if the embedded server
            cannot start.
    """
    if dsn:
        return check_dsn(dsn, "--dsn")
    dsn = os.environ.get("AZYNC_DSN")
    if dsn:
        return check_dsn(dsn, "$AZYNC_DSN")
    from azync_flow.embedded import default_data_dir, start_embedded

    try:
        return start_embedded(default_data_dir())
    except RuntimeError as exc:
        raise CliError(str(exc), EXIT_UNAVAILABLE) from None


def check_dsn(dsn: str, source: str) -> str:
    """`dsn` unchanged if it is a PostgreSQL URI the driver can parse:
    `postgresql://` or `postgres://`, and every host's port (if any) a number
    in 1-65535.

    Args:
        dsn: the value given.
        source: where it came from (`--dsn`, `$AZYNC_DSN`), named in the error.

    Returns:
        `dsn`.

    Raises:
        CliError: `EXIT_USAGE`, one line saying what is wrong and what a DSN
            looks like; a password in the value is not shown.
    """
    problem = _dsn_problem(dsn)
    if problem is None:
        return dsn
    raise CliError(
        f"{source}{_shown(dsn)} is not a PostgreSQL URI: {problem}; "
        "a DSN looks like postgresql://user@host:5432/db"
    )


def _dsn_problem(dsn: str) -> str | None:
    try:
        parts = urlsplit(dsn)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        return str(exc)
    if parts.scheme not in ("postgresql", "postgres"):
        found = f"it starts with {parts.scheme}://" if parts.scheme else "it has no scheme"
        return f"{found}, expected postgresql://"
    # libpq's multi-host form (h1:5432,h2:5433) is one netloc: check each host.
    for host in parts.netloc.rpartition("@")[2].split(","):
        port = host.rpartition("]")[2] if host.startswith("[") else host
        _, colon, port = port.rpartition(":")
        if colon and port and not (port.isdigit() and 1 <= int(port) <= 65535):
            return f"port {port!r} is not a number in 1-65535"
    return None


def _shown(dsn: str) -> str:
    # The value helps the reader spot a typo, but never shows a password.
    if "@" in dsn or "password" in dsn.lower():
        return ""
    return f" {dsn!r}"


@asynccontextmanager
async def connect(db: DbOptions, *, migrate: bool = False) -> AsyncIterator[PostgresStore]:
    """An open store for the command's DSN and schema; closed afterwards."""
    config = Config(schema=db.schema, min_pool_size=1, max_pool_size=4)
    try:
        store = await open_store(resolve_dsn(db.dsn), config, migrate=migrate)
    except ValueError as exc:  # an unsafe schema name
        raise CliError(str(exc)) from None
    try:
        yield store
    finally:
        await store.close()


#: ``--dsn URI``: on the group (``azync-flow --dsn URI CMD``) and on every command.
dsn_option = click.option(
    "--dsn",
    metavar="URI",
    help="PostgreSQL URI (default: $AZYNC_DSN, else the embedded server).",
)

#: ``--schema S``: on the group and on every command; unset means $AZYNC_SCHEMA, else public.
schema_option = click.option(
    "--schema", show_default="$AZYNC_SCHEMA or public", help="Schema holding the tables."
)


def db_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--dsn` and `--schema`; the command receives them as `db: DbOptions`.
    A value given to the command wins over one given before it (`azync-flow
    --dsn URI CMD`); the schema then falls back to `$AZYNC_SCHEMA` (the DSN's
    fallbacks are in :func:`resolve_dsn`)."""

    @dsn_option
    @schema_option
    @functools.wraps(fn)
    def wrapper(*args: Any, dsn: str | None, schema: str | None, **kwargs: Any) -> Any:
        root = click.get_current_context().find_root().params
        dsn = dsn or root.get("dsn")
        schema = schema or root.get("schema") or os.environ.get("AZYNC_SCHEMA", "")
        return fn(*args, db=DbOptions(dsn, schema), **kwargs)

    return wrapper


def db_command(fn: Callable[..., Awaitable[int]]) -> Callable[..., int]:
    """An `async` command body on the database: adds `--json`, `--dsn` and
    `--schema` (the body gets `as_json` and `db: DbOptions`) and runs it."""
    return json_option(db_options(run_async(fn)))


def run_async(fn: Callable[P, Awaitable[int]]) -> Callable[P, int]:
    """Run an `async` command body with `asyncio.run`; its int is the exit status."""
    import asyncio

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> int:
        return asyncio.run(fn(*args, **kwargs))  # type: ignore[arg-type]

    return wrapper


class StrictChoice(click.Choice):  # type: ignore[type-arg]
    """A choice whose error reads `invalid choice: 'x' (choose from a, b)`."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        self.fail(
            f"invalid choice: {value!r} (choose from {', '.join(map(str, self.choices))})",
            param,
            ctx,
        )


class Seconds(click.FloatRange):
    """A number of seconds from ``low`` to :data:`MAX_DURATION` (NaN and
    infinities refused)."""

    def __init__(self, low: float = 0.0) -> None:
        super().__init__(low, MAX_DURATION.total_seconds())

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


def positive(ctx: click.Context, param: click.Parameter, value: int) -> int:
    """Click callback: the value must be at least 1."""
    if value is not None and value < 1:
        raise click.BadParameter("must be at least 1")
    return value


def example(*lines: str) -> str:
    """A command's ``--help`` epilog: the example lines, kept as written."""
    return "Example:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def next_offset_cursor(offset: int, shown: int, total: int) -> str | None:
    """The cursor of the page after ``shown`` rows from ``offset`` (None on the last page)."""
    return encode_cursor(str(offset + shown)) if offset + shown < total else None


def limit_option(default: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--limit N`` (at least 1): the page size of a list."""
    return click.option(
        "--limit", type=click.IntRange(1, MAX_ROWS), default=default, show_default=True,
        help="Rows at most (a page).",
    )  # fmt: skip


#: ``--cursor C``: the next page of a list.
cursor_option = click.option("--cursor", help="Continue after the page that printed this cursor.")


def signal_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``ID NAME [--payload JSON] [--message-id M]`` of a ``signal`` command."""
    for decorator in reversed(
        [
            click.argument("id"),
            click.argument("name"),
            click.option(
                "--payload", metavar="JSON", help="Payload: JSON, @file or - (default: null)."
            ),
            click.option("--message-id", default="", help="Deduplication id: a repeat is dropped."),
        ]
    ):
        fn = decorator(fn)
    return fn


def signal_input(
    id: str, name: str, payload: str | None, message_id: str, what: str
) -> tuple[uuid.UUID, Any]:
    """Check a ``signal`` command's arguments; ``(target id, decoded payload)``.

    Raises:
        CliError: a malformed id or payload. ValueError: a bad name or message id.
    """
    target = parse_id(id, what)
    check_name(name, "signal name")
    check_text(message_id, "--message-id")
    return target, read_input(payload, "--payload")
