"""`azync-flow events ...`: the event ledger: events, their re-delivery, subscribers."""

from __future__ import annotations

from typing import Any

import click

from azync_flow._display import MAX_ROWS
from azync_flow.store.events import EventAdminRow, EventFilter, ReplayFilter
from azync_flow.store.validate import check_name

from ._common import (
    EXIT_OK,
    CliError,
    DbOptions,
    connect,
    cursor_option,
    db_command,
    example,
    limit_option,
    next_offset_cursor,
    offset_cursor,
    parse_id,
    parse_since,
)
from ._output import (
    done,
    emit,
    list_page,
    preview,
    record,
    rows_out,
    when,
)


@click.group("events", epilog=example("azync-flow events list --type order.placed --since 1h"))
def events() -> None:
    """Inspect the event ledger and re-deliver events to subscribers."""


def _item(e: EventAdminRow) -> dict[str, Any]:
    return {
        "id": e.id,
        "type": e.type,
        "aggregate_type": e.aggregate_type,
        "aggregate_id": e.aggregate_id,
        "version": e.version,
        "occurred_at": e.occurred_at,
        "dispatched_at": e.dispatched_at,
        "deliveries": e.deliveries,
        "payload_preview": preview(e.payload),
    }


def _aggregate(e: EventAdminRow) -> str:
    """`type/id`, or the id alone (the key of `publish(..., key=...)`), or empty."""
    if e.aggregate_type and e.aggregate_id:
        return f"{e.aggregate_type}/{e.aggregate_id}"
    return e.aggregate_id or e.aggregate_type


_SINCE = click.option(
    "--since", metavar="TIME|AGE", help="From this ISO time, or this long ago (15m, 2h, 3d)."
)
_UNTIL = click.option("--until", metavar="TIME|AGE", help="Before this ISO time or age.")


@events.command("list", epilog=example("azync-flow events list --type order.placed --since 2h"))
@click.option("--type", "type_", default="", help="Only events of this type.")
@_SINCE
@_UNTIL
@click.option("--undispatched", is_flag=True, help="Only events not yet fanned out.")
@limit_option(50)
@cursor_option
@db_command
async def list_cmd(
    type_: str,
    since: str | None,
    until: str | None,
    undispatched: bool,
    limit: int,
    cursor: str | None,
    as_json: bool,
    db: DbOptions,
) -> int:
    """List ledger events, newest first, a page at a time (payloads as previews)."""
    check_name(type_, "--type", empty_ok=True)
    offset = offset_cursor(cursor)
    flt = EventFilter(
        type=type_,
        undispatched=True if undispatched else None,
        since=parse_since(since),
        until=parse_since(until, "--until"),
    )
    async with connect(db) as store:
        rows, total = await store.list_events(flt, offset, limit)
    list_page(
        rows,
        next_offset_cursor(offset, len(rows), total),
        total=total,
        as_json=as_json,
        item=_item,
        columns=[
            ("ID", lambda e: e.id),
            ("TYPE", lambda e: e.type),
            ("AGGREGATE", _aggregate),
            ("OCCURRED (UTC)", lambda e: when(e.occurred_at)),
            ("DELIVERIES", lambda e: e.deliveries),
            ("PAYLOAD", lambda e: preview(e.payload)),
        ],
        empty="no events",
    )
    return EXIT_OK


@events.command("show", epilog=example("azync-flow events show 3f2a0c9e-..."))
@click.argument("id")
@db_command
async def show(id: str, as_json: bool, db: DbOptions) -> int:
    """Show one event with its whole payload."""
    async with connect(db) as store:
        e = await store.get_event(parse_id(id, "event id"))
    if as_json:
        emit({**_item(e), "meta": e.meta, "payload": e.payload})
        return EXIT_OK
    fields: list[tuple[str, Any]] = [
        ("id", e.id),
        ("type", e.type),
        ("aggregate", _aggregate(e)),
        ("version", e.version),
        ("occurred", when(e.occurred_at)),
        ("dispatched", when(e.dispatched_at)),
        ("deliveries", e.deliveries),
        ("meta", ", ".join(f"{k}={v}" for k, v in e.meta.items())),
    ]
    record([(k, v) for k, v in fields if v not in ("", None)], payloads=[("payload", e.payload)])
    return EXIT_OK


@events.command(
    "replay", epilog=example("azync-flow events replay --type order.shipped --since 2026-11-30")
)
@click.option("--type", "type_", default="", help="Only events of this type.")
@click.option("--id", "id_", help="Only this event.")
@click.option("--subscriber", default="", help="Only to this subscriber (default: all of them).")
@_SINCE
@_UNTIL
@click.option(
    "--limit",
    type=click.IntRange(0, MAX_ROWS),
    default=0,
    help="At most this many events (default: all).",
)
@db_command
async def replay(
    type_: str,
    id_: str | None,
    subscriber: str,
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
    db: DbOptions,
) -> int:
    """Deliver matching events again, as new deliveries flagged `replay`, to the
    subscribers registered now. Give at least one of --type, --id, --since."""
    check_name(type_, "--type", empty_ok=True)
    check_name(subscriber, "--subscriber", empty_ok=True)
    if not (type_ or id_ or since):
        raise CliError("give --type, --id or --since: replaying the whole ledger is never implied")
    if limit < 0:
        raise CliError("--limit must not be negative")
    flt = ReplayFilter(
        subscriber=subscriber,
        event_type=type_,
        event_id=parse_id(id_, "--id") if id_ else None,
        since=parse_since(since),
        until=parse_since(until, "--until"),
        limit=limit,
    )
    async with connect(db) as store:
        n = await store.replay(flt)
    done(as_json, {"replayed": n}, f"replayed {n} event(s)")
    return EXIT_OK


@events.command("subscribers", epilog=example("azync-flow events subscribers --type order.placed"))
@click.option("--type", "type_", default="", help="Only subscribers of this event type.")
@db_command
async def subscribers(type_: str, as_json: bool, db: DbOptions) -> int:
    """List subscriber registrations by event type, then name."""
    check_name(type_, "--type", empty_ok=True)
    async with connect(db) as store:
        rows = await store.list_subscriber_views(type_)
    rows_out(
        rows,
        as_json=as_json,
        columns=[
            ("EVENT TYPE", lambda s: s.event_type),
            ("SUBSCRIBER", lambda s: s.subscriber),
            ("MAX ATTEMPTS", lambda s: s.max_attempts or "default"),
            ("REGISTERED (UTC)", lambda s: when(s.created_at)),
        ],
        empty="no subscribers",
    )
    return EXIT_OK


__all__ = ["events"]
