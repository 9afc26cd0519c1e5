"""`azync-flow migrate`, `stats` and `uncertain list|resolve`."""

from __future__ import annotations

from typing import Any

import click

from azync_flow._decisions import reconcile_verdict
from azync_flow.client import Client
from azync_flow.store.admin import DailyCount, Depths
from azync_flow.store.queue import Source
from azync_flow.store.validate import check_name, check_text

from ._common import (
    EXIT_OK,
    CliError,
    DbOptions,
    StrictChoice,
    connect,
    db_command,
    example,
    limit_option,
    parse_id,
    read_input,
)
from ._output import (
    age,
    done,
    emit,
    preview,
    table,
    to_plain,
    when,
)


@click.command("migrate", epilog=example("azync-flow migrate --dsn postgresql://localhost/app"))
@db_command
async def migrate(as_json: bool, db: DbOptions) -> int:
    """Create or upgrade the tables in --schema (safe to run again). Prints the
    migration versions it applied, or that the schema was already up to date;
    `--json`: `{"schema", "applied": [versions], "migrated": applied non-empty}`."""
    async with connect(db) as store:
        schema = store.schema
        applied = await store.migrate()
    text = (
        f"schema {schema!r}: applied migration(s) {', '.join(map(str, applied))}"
        if applied
        else f"schema {schema!r} was already up to date (nothing applied)"
    )
    done(as_json, {"schema": schema, "applied": applied, "migrated": bool(applied)}, text)
    return EXIT_OK


# --- stats ---------------------------------------------------------------------------


def _busy(d: DailyCount) -> bool:
    return bool(d.enqueued or d.processed or d.failed or d.reaped)


@click.command("stats", epilog=example("azync-flow stats --source queue"))
@click.option(
    "--source",
    type=StrictChoice([s.value for s in Source]),
    help="Only this job source (default: all).",
)
@db_command
async def stats(source: str | None, as_json: bool, db: DbOptions) -> int:
    """Depths per kind (with the oldest pending job's age), daily counts (days with
    nothing hidden) and dead letters, for queue jobs, event deliveries, DAG tasks
    and workflow tasks."""
    sources = [Source(source)] if source else list(Source)
    depths: dict[Source, dict[str, Depths]] = {}
    daily: dict[Source, list[DailyCount]] = {}
    async with connect(db) as store:
        for src in sources:
            depths[src] = await store.kind_depths(src)
            daily[src] = [d for d in await store.all_daily(src) if _busy(d)]
    dead = {s: {k: d.dead for k, d in kinds.items() if d.dead} for s, kinds in depths.items()}
    if as_json:
        emit(
            {
                "depths": {s.value: kinds for s, kinds in depths.items()},
                "daily": {s.value: days for s, days in daily.items() if days},
                "dead_letters": {s.value: kinds for s, kinds in dead.items() if kinds},
            }
        )
        return EXIT_OK
    rows = [(s, k, d) for s, kinds in depths.items() for k, d in sorted(kinds.items())]
    table(
        rows,
        [
            ("SOURCE", lambda r: r[0]),
            ("KIND", lambda r: r[1]),
            ("PENDING", lambda r: r[2].pending),
            ("SCHEDULED", lambda r: r[2].scheduled),
            ("ACTIVE", lambda r: r[2].active),
            ("PAUSED", lambda r: r[2].paused),
            ("DEAD", lambda r: r[2].dead),
            ("SUCCEEDED", lambda r: r[2].succeeded),
            ("OLDEST PENDING", lambda r: age(r[2].oldest_pending_age)),
        ],
        title="Depths per kind",
        empty="no jobs",
    )
    days = sorted(((d, s) for s, ds in daily.items() for d in ds), key=lambda r: (r[0].date, r[1]))
    table(
        days,
        [
            ("DAY", lambda r: r[0].date.strftime("%Y-%m-%d")),
            ("SOURCE", lambda r: r[1]),
            ("ENQUEUED", lambda r: r[0].enqueued),
            ("PROCESSED", lambda r: r[0].processed),
            ("FAILED", lambda r: r[0].failed),
            ("REAPED", lambda r: r[0].reaped),
        ],
        title="Daily counts",
        empty="no activity in the daily window",
    )
    letters = [(s, k, n) for s, kinds in dead.items() for k, n in sorted(kinds.items())]
    table(
        letters,
        [("SOURCE", lambda r: r[0]), ("KIND", lambda r: r[1]), ("DEAD", lambda r: r[2])],
        title="Dead letters",
        empty="no dead letters",
    )
    if letters:
        click.echo("(list them: azync-flow jobs dead --source SOURCE --kind KIND)")
    return EXIT_OK


# --- uncertain operations ---------------------------------------------------------------


@click.group("uncertain", epilog=example("azync-flow uncertain list"))
def uncertain() -> None:
    """Operations waiting for a human decision (docs/uncertain.md)."""


@uncertain.command("list", epilog=example("azync-flow uncertain list --workflow 3f2a0c9e-..."))
@click.option("--workflow", help="Only this execution's operations.")
@limit_option(100)
@db_command
async def uncertain_list(workflow: str | None, limit: int, as_json: bool, db: DbOptions) -> int:
    """List uncertain operations, oldest first: id, workflow, activity, execution
    key (`<workflow_id>/<seq>`), attempt, since, input, reason, and the reconcile
    hook's verdict on the current attempt when it left the operation undecided
    (`unknown: ...`, `error: ...`; empty when no hook looked). `--json`: a JSON
    array of the same, with `reconcile_verdict`."""
    wid = parse_id(workflow, "--workflow") if workflow else None
    async with connect(db) as store:
        ops = await Client(store).list_uncertain(workflow_id=wid, limit=limit)
        verdicts = [await reconcile_verdict(store, o.operation_id, o.attempt) for o in ops]
    rows = list(zip(ops, verdicts, strict=True))
    if as_json:
        emit([{**to_plain(o), "reconcile_verdict": v} for o, v in rows])
        return EXIT_OK
    table(
        rows,
        [
            ("OPERATION", lambda r: r[0].operation_id),
            ("WORKFLOW", lambda r: r[0].workflow_name),
            ("ACTIVITY", lambda r: r[0].activity),
            ("EXECUTION KEY", lambda r: r[0].execution_key),
            ("ATTEMPT", lambda r: r[0].attempt),
            ("SINCE (UTC)", lambda r: when(r[0].since)),
            ("INPUT", lambda r: preview(r[0].input)),
            ("REASON", lambda r: r[0].reason),
            ("RECONCILE", lambda r: r[1]),
        ],
        empty="no uncertain operations",
    )
    return EXIT_OK


@uncertain.command(
    "resolve",
    epilog=example(
        "azync-flow uncertain resolve 3f2a... --decision complete "
        "--result '\"wired-70\"' --note 'bank statement shows it' --by ann"
    ),
)
@click.argument("id")
@click.option(
    "--decision", required=True, type=StrictChoice(["complete", "fail", "retry"]),
    help="complete: it happened; fail: it did not; retry: run it again.",
)  # fmt: skip
@click.option("--result", metavar="JSON", help="complete: the result, as JSON, @file or -.")
@click.option("--error", help="fail: the message the workflow's ActivityError carries.")
@click.option("--note", required=True, help="Why (kept in history and on the operation).")
@click.option("--by", required=True, help="Who decides (kept in history).")
@db_command
async def uncertain_resolve(
    id: str,
    decision: str,
    result: str | None,
    error: str | None,
    note: str,
    by: str,
    as_json: bool,
    db: DbOptions,
) -> int:
    """Decide one uncertain operation (audited); the workflow then continues."""
    op_id = parse_id(id, "operation id")
    if decision == "complete" and result is None:
        raise CliError("--decision complete needs --result JSON (the activity's return value)")
    if decision != "complete" and result is not None:
        raise CliError("--result is only for --decision complete")
    if decision == "fail" and not error:
        raise CliError("--decision fail needs --error MESSAGE")
    if decision != "fail" and error is not None:
        raise CliError("--error is only for --decision fail")
    for value, what in ((note, "--note"), (by, "--by"), (error or "", "--error")):
        check_text(value, what)
    check_name(by, "--by")
    value = read_input(result, "--result")
    async with connect(db) as store:
        await Client(store).resolve_uncertain(
            op_id, decision, result=value, error=error, note=note, decided_by=by
        )
        op = await store.get_operation(op_id)
    out: dict[str, Any] = {
        "operation_id": op_id,
        "decision": decision,
        "state": op.state,
        "workflow_id": op.workflow_id,
        "decided_by": by,
    }
    if as_json:
        emit(out)
    else:
        click.echo(
            f"{decision}: operation {op_id} is {op.state}; workflow {op.workflow_id} continues"
        )
    return EXIT_OK


__all__ = ["migrate", "stats", "uncertain"]
