"""`azync-flow limits ...`: the concurrency and rate limits and how full they are."""

from __future__ import annotations

import click

from azync_flow._display import age
from azync_flow.client import Client
from azync_flow.store.queue import LimitUsage

from ._common import EXIT_OK, DbOptions, connect, db_command, example
from ._output import emit, table

__all__ = ["limits"]


@click.group("limits", epilog=example("azync-flow limits list"))
def limits() -> None:
    """Inspect the concurrency and rate limits that workers declared."""


def _capacity(u: LimitUsage) -> str:
    per = " per key" if u.spec.per_key else ""
    if u.spec.type == "rate":
        return f"{u.spec.capacity} per {age(u.spec.period)}{per}"
    return f"{u.spec.capacity} in flight{per}"


@limits.command("list", epilog=example("azync-flow limits list", "azync-flow limits list --json"))
@db_command
async def list_cmd(as_json: bool, db: DbOptions) -> int:
    """List limits by name: type, capacity, the kinds they apply to, jobs in
    flight (a rate limit: starts in the last period, all keys) and due jobs
    waiting to be leased."""
    async with connect(db) as store:
        rows = await Client(store).list_limits()
    if as_json:
        emit({"items": rows})
        return EXIT_OK
    table(
        rows,
        [
            ("NAME", lambda u: u.spec.name),
            ("TYPE", lambda u: u.spec.type),
            ("LIMIT", _capacity),
            ("IN FLIGHT", lambda u: u.in_flight),
            ("WAITING", lambda u: u.waiting),
            ("KEYS", lambda u: u.keys),
            ("KINDS", lambda u: ", ".join(u.kinds)),
        ],
        empty="no limits (workers store them when they start)",
    )
    return EXIT_OK
