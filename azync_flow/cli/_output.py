"""What commands print: rich tables for people, JSON (`--json`) for scripts."""

from __future__ import annotations

import enum
import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

# Re-exported: the command modules import them from here with the table helpers.
from azync_flow._display import PREVIEW_CHARS as PREVIEW_CHARS
from azync_flow._display import age as age
from azync_flow._display import json_line as json_line
from azync_flow._display import open_payloads as open_payloads
from azync_flow._display import opened_event as opened_event
from azync_flow._display import payload_json as payload_json
from azync_flow._display import preview as preview
from azync_flow._display import to_plain as to_plain
from azync_flow._display import when as when
from azync_flow._text import shorten

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
        "RECONCILE",
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


def emit(value: Any) -> None:
    """Print `value` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(to_plain(value), indent=2, ensure_ascii=False) + "\n")


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
    command); free text (payload previews, reasons, details) is cut at a word
    boundary with ``…`` to fit the terminal. On a terminal too narrow for that, cells wrap instead.
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
    widths = _share(natural, free, room) if fits else natural
    if fits:  # cut free text at a word boundary; rich's own cut splits words
        cells = [
            [shorten(c, widths[i]) if i in free else c for i, c in enumerate(r)] for r in cells
        ]
    grid = Table(title=title or None, title_justify="left", header_style="bold")
    for i, header in enumerate(headers):
        if fits:
            grid.add_column(header, no_wrap=True, width=widths[i], overflow="ellipsis")
        else:
            grid.add_column(header, overflow="fold")
    for r in cells:
        grid.add_row(*map(Text, r))  # cells are data, not markup: "[payload] ..." stays
    out.print(grid)


def _share(natural: list[int], free: list[int], room: int) -> list[int]:
    """Column widths where the ``free`` columns share ``room``: the narrowest
    first, each taking its natural width or an equal share of what is left, so
    room a short column does not need goes to the long ones."""
    widths = list(natural)
    for k, i in enumerate(sorted(free, key=lambda i: natural[i])):
        widths[i] = min(natural[i], room // (len(free) - k))
        room -= widths[i]
    return widths


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
