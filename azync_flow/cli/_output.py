"""What commands print: rich tables for people, JSON (`--json`) for scripts."""

from __future__ import annotations

import enum
import functools
import json
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import click
import msgspec
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from azync_flow.codec import decode_value
from azync_flow.errors import PayloadError

#: Characters of a payload shown in a list (`show` prints it whole).
PREVIEW_CHARS = 48

#: Headers of free-text columns: cut with "…" to fit the terminal (others never are).
_FREE_TEXT = frozenset(
    {
        "INPUT",
        "RESULT / REASON",
        "DETAIL",
        "PAYLOAD",
        "LAST ERROR",
        "REASON",
        "RESULT / ERROR",
        "ERROR",
    }
)

#: Columns: (header, how to get the cell text from one row).
Columns = Sequence[tuple[str, Callable[[Any], Any]]]


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--json` (print JSON for scripts instead of tables); the command gets
    `as_json`, also true when `--json` was given before the command."""

    @click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of tables."
    )
    @functools.wraps(fn)
    def wrapper(*args: Any, as_json: bool, **kwargs: Any) -> Any:
        root = click.get_current_context().find_root()
        return fn(*args, as_json=as_json or bool(root.params.get("as_json")), **kwargs)

    return wrapper


def to_plain(value: Any) -> Any:
    """msgspec Structs, UUIDs, times, enums and JSON bytes as plain JSON-able values."""
    if isinstance(value, msgspec.Struct):
        return {f: to_plain(getattr(value, f)) for f in value.__struct_fields__}
    if hasattr(value, "_asdict"):
        return to_plain(value._asdict())
    if hasattr(value, "__dataclass_fields__"):
        return {f: to_plain(getattr(value, f)) for f in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview, msgspec.Raw)):
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


def payload_json(data: bytes | None) -> Any:
    """Decode stored JSON bytes for display (None stays None)."""
    if data is None:
        return None
    try:
        return decode_value(data)
    except PayloadError:
        return data.decode("utf-8", "replace")


def emit(value: Any) -> None:
    """Print `value` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(to_plain(value), indent=2, ensure_ascii=False) + "\n")


def json_line(value: Any) -> str:
    """`value` as one compact JSON line."""
    return json.dumps(to_plain(value), ensure_ascii=False, separators=(",", ":"))


def preview(data: bytes | Any | None, limit: int = PREVIEW_CHARS) -> str:
    """A payload as compact JSON cut to `limit` characters (`…` marks the cut)."""
    if data is None:
        return ""
    value = payload_json(bytes(data)) if isinstance(data, (bytes, bytearray)) else data
    text = json_line(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def when(value: datetime | None) -> str:
    """A time as `YYYY-MM-DD HH:MM:SS` UTC (empty for None)."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def age(value: timedelta | float | None) -> str:
    """A duration as `3d 4h`, `5m 2s` or `0.4s` (empty for None or zero)."""
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds <= 0:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 10:
        return f"{seconds:.1f}s"
    out: list[str] = []
    rest = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (out and len(out) < 2):
            out.append(f"{rest // size}{unit}")
            rest %= size
        if len(out) == 2:
            break
    return " ".join(out)


def short(value: Any) -> str:
    """Any cell value as text (enums by value, ids in full)."""
    if value is None:
        return ""
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def console() -> Console:
    """Stdout for tables: the terminal's width, or 160 columns when piped."""
    width = os.environ.get("COLUMNS")
    return Console(
        width=int(width) if width and width.isdigit() else None if sys.stdout.isatty() else 160
    )


def table(rows: Iterable[Any], columns: Columns, *, title: str = "", empty: str = "") -> None:
    """Print ``rows`` as a table, one line per row (or ``empty`` when there are none).

    Ids, states, times and counts are shown whole (ids are copied into the next
    command); free text (payload previews, reasons, details) is cut with ``…``
    to fit the terminal. On a terminal too narrow for that, cells wrap instead.
    """
    rows = list(rows)
    out = console()
    if not rows:
        out.print(empty or "(none)", highlight=False)
        return
    cells = [[short(get(row)) for _, get in columns] for row in rows]
    headers = [header for header, _ in columns]
    natural = [max(cell_len(h), *(cell_len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    free = [i for i, h in enumerate(headers) if h in _FREE_TEXT]
    fixed = sum(w for i, w in enumerate(natural) if i not in free)
    room = out.width - (3 * len(headers) + 1) - fixed
    fits = room >= 6 * len(free)
    widths = [min(w, room // len(free)) if fits and i in free else w for i, w in enumerate(natural)]
    grid = Table(title=title or None, title_justify="left", header_style="bold")
    for i, header in enumerate(headers):
        if fits:
            grid.add_column(header, no_wrap=True, width=widths[i], overflow="ellipsis")
        else:
            grid.add_column(header, overflow="fold")
    for r in cells:
        grid.add_row(*map(Text, r))  # cells are data, not markup: "[payload] ..." stays
    out.print(grid)


def record(fields: Sequence[tuple[str, Any]], *, payloads: Sequence[tuple[str, Any]] = ()) -> None:
    """Print one object: a two-column field table, then each payload as indented JSON."""
    out = console()
    grid = Table(show_header=False, box=None, pad_edge=False)
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in fields:
        grid.add_row(name, Text(short(value)))
    if fields:
        out.print(grid)
    for i, (name, data) in enumerate(payloads):
        value = (
            payload_json(bytes(data)) if isinstance(data, (bytes, bytearray)) else to_plain(data)
        )
        gap = "\n" if fields or i else ""  # a blank line between blocks, none before the first
        out.print(f"{gap}[bold]{name}[/bold]")
        out.print_json(json.dumps(value, ensure_ascii=False))


def next_page(cursor: str | None, shown: int, total: int | None = None) -> None:
    """The footer of a list: how many rows, and the `--cursor` of the next page."""
    of = f" of {total}" if total is not None else ""
    line = f"{shown}{of} shown"
    if cursor:
        line += f"; next page: --cursor {cursor}"
    console().print(line, style="dim", highlight=False)


def page(items: Sequence[Any], cursor: str | None, total: int | None = None) -> dict[str, Any]:
    """The `--json` shape of a list: `{"items": [...], "next_cursor": ..., "total": ...}`."""
    out: dict[str, Any] = {"items": items, "next_cursor": cursor}
    if total is not None:
        out["total"] = total
    return out


def list_page(
    rows: Sequence[Any],
    cursor: str | None,
    *,
    total: int | None = None,
    as_json: bool,
    item: Callable[[Any], dict[str, Any]],
    columns: Columns,
    empty: str,
) -> None:
    """Print one page of a list: with ``as_json`` the :func:`page` of ``item(row)``
    for each row, else the table of ``columns`` (``empty`` when there are no rows)
    and the :func:`next_page` footer. ``cursor``: the next page's (None: last)."""
    if as_json:
        emit(page([item(row) for row in rows], cursor, total))
        return
    table(rows, columns, empty=empty)
    next_page(cursor, len(rows), total)


def rows_out(rows: Sequence[Any], *, as_json: bool, columns: Columns, empty: str) -> None:
    """Print an unpaged list: with ``as_json`` the rows as a JSON array, else the
    table of ``columns`` (``empty`` when there are no rows)."""
    if as_json:
        emit(rows)
    else:
        table(rows, columns, empty=empty)


def done(as_json: bool, value: dict[str, Any], text: str) -> None:
    """What a verb did: ``value`` as JSON, or ``text`` as one line."""
    if as_json:
        emit(value)
    else:
        click.echo(text)
