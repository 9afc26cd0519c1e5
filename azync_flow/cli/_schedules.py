"""`azync-flow schedules ...`: create, inspect and operate schedules."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import click

from azync_flow.schedules import (
    Action,
    EnqueueJob,
    Interval,
    MissingTime,
    Overlap,
    RepeatedTime,
    ScheduleClient,
    ScheduleDescription,
    SchedulePolicy,
    ScheduleSpec,
    StartDAG,
    StartWorkflow,
    describe_action,
)

from ._common import (
    EXIT_OK,
    CliError,
    DbOptions,
    StrictChoice,
    connect,
    db_command,
    example,
    parse_duration,
    parse_time,
    read_input,
)
from ._output import done, emit, record, table, when

__all__ = ["schedules"]


@click.group(
    "schedules",
    epilog=example(
        "azync-flow schedules create nightly --cron '30 1 * * *' --tz Europe/London "
        "--workflow report",
        "azync-flow schedules show nightly",
    ),
)
def schedules() -> None:
    """Create, inspect and operate schedules (cron and intervals in a time zone)."""


@schedules.command("list", epilog=example("azync-flow schedules list --json"))
@db_command
async def list_cmd(as_json: bool, db: DbOptions) -> int:
    """List schedules by id: action, paused, next fire (none while paused)."""
    async with connect(db) as store:
        rows = await ScheduleClient(store).list()
    if as_json:
        emit({"items": rows})
        return EXIT_OK
    table(
        rows,
        [
            ("ID", lambda s: s.id),
            ("ACTION", lambda s: s.action),
            ("PAUSED", lambda s: "yes" if s.paused else ""),
            # A paused schedule does not fire at its stored next time.
            ("NEXT FIRE (UTC)", lambda s: "none (paused)" if s.paused else when(s.next_fire_at)),
            ("NOTE", lambda s: s.note),
        ],
        empty="no schedules",
    )
    return EXIT_OK


def _spec_lines(d: ScheduleDescription) -> list[tuple[str, Any]]:
    spec, policy = d.spec, d.policy
    every = ", ".join(f"every {i.every} (+{i.offset})" for i in spec.intervals)
    return [
        ("id", d.id),
        ("action", describe_action(d.action)),
        ("cron", ", ".join(spec.cron)),
        ("intervals", every),
        ("time zone", spec.tz),
        ("start / end", f"{when(spec.start_at)} / {when(spec.end_at)}"),
        ("jitter", spec.jitter),
        ("repeated / missing time", f"{spec.repeated} / {spec.missing}"),
        ("overlap", policy.overlap),
        ("catch-up", "latest only" if policy.catchup_window is None else policy.catchup_window),
        ("paused", f"yes ({d.note})" if d.paused else "no"),
        ("created", when(d.created_at)),
        (
            "started / skipped / missed",
            f"{d.counts.started} / {d.counts.skipped} / {d.counts.missed}",
        ),
    ]


@schedules.command("show", epilog=example("azync-flow schedules show nightly"))
@click.argument("id")
@db_command
async def show(id: str, as_json: bool, db: DbOptions) -> int:
    """Show a schedule: spec, policies, the next 5 fire times (local and UTC)
    and the last runs with their outcome."""
    async with connect(db) as store:
        d = await ScheduleClient(store).describe(id)
    if as_json:
        emit(d)
        return EXIT_OK
    record(_spec_lines(d))
    table(
        d.next_fires,
        [
            ("NEXT FIRE (LOCAL)", lambda f: f.local.isoformat()),
            ("UTC", lambda f: when(f.nominal_at)),
            ("DUE (UTC, JITTER)", lambda f: when(f.fire_at)),
        ],
        title="next fires",
        empty="no more fires",
    )
    table(
        d.recent_runs,
        [
            ("NOMINAL (LOCAL)", lambda r: r.local.isoformat()),
            ("OUTCOME", lambda r: r.outcome),
            ("STATE", lambda r: r.state),
            ("RUN", lambda r: r.run_id),
        ],
        title="last runs",
        empty="no runs yet",
    )
    table(
        d.recent_missed,
        [
            ("FIRST (UTC)", lambda m: when(m.first_nominal_at)),
            ("LAST (UTC)", lambda m: when(m.last_nominal_at)),
            ("COUNT", lambda m: m.count if m.count_exact else f"{m.count}+"),
            ("REASON", lambda m: m.reason),
        ],
        title="missed",
        empty="none missed",
    )
    table(
        d.recent_changes,
        [
            ("AT (UTC)", lambda c: when(c.at)),
            ("VERB", lambda c: c.verb),
            ("NOTE", lambda c: c.note),
        ],
        title="edits",
        empty="no edits",
    )
    return EXIT_OK


def _next_fire(d: ScheduleDescription) -> str:
    """The next fire as `list` shows it: none while paused (it does not fire)."""
    if d.paused:
        return "none (paused)"
    return d.next_fires[0].local.isoformat() if d.next_fires else "never"


def _action(workflow: str | None, dag: str | None, job: str | None, value: Any) -> Action:
    # an empty name counts as given: the schedule client refuses it by name
    chosen = [x for x in (workflow, dag, job) if x is not None]
    if len(chosen) != 1:
        raise CliError("give exactly one of --workflow NAME, --dag NAME, --job KIND")
    if workflow is not None:
        return StartWorkflow.of(workflow, value)
    if dag is not None:
        return StartDAG.of(dag, value)
    assert job is not None
    return EnqueueJob.of(job, value)


@schedules.command(
    "create",
    epilog=example(
        "azync-flow schedules create nightly --cron '30 1 * * *' --tz Europe/London "
        '--workflow report --input \'{"kind": "daily"}\'',
        "azync-flow schedules create ping --every 15m --job ping --overlap allow_all",
    ),
)
@click.argument("id")
@click.option("--cron", "crons", multiple=True, help="Cron expression (repeatable).")
@click.option("--every", "everies", multiple=True, help="Interval like 15m, 2h (repeatable).")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of --cron.")
@click.option("--workflow", help="Start this workflow (by name).")
@click.option("--dag", help="Start this DAG (by name).")
@click.option("--job", help="Enqueue a job of this kind.")
@click.option("--input", "input_", help="Input/payload: JSON, @file or - (stdin).")
@click.option("--overlap", type=StrictChoice([o.value for o in Overlap]), default="skip")
@click.option(
    "--catchup-window",
    help="Run fires this late (15m, 2h, 3d; at least 1m); default: 1m, else the latest only.",
)
@click.option("--repeated", type=StrictChoice([r.value for r in RepeatedTime]), default="first")
@click.option("--missing", type=StrictChoice([m.value for m in MissingTime]), default="next_valid")
@click.option("--jitter", help="Delay each fire by up to this (90s, 5m).")
@click.option(
    "--start", help="No nominal time before this time (ISO, UTC without a zone; or an age)."
)
@click.option("--end", help="No nominal time after this time (ISO, UTC without a zone; or an age).")
@click.option("--buffer-limit", type=int, default=100, help="Most fires waiting under buffer_all.")
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option("--note", default="", help="Why (shown by list and show).")
@db_command
async def create(
    id: str,
    crons: tuple[str, ...],
    everies: tuple[str, ...],
    tz: str,
    workflow: str | None,
    dag: str | None,
    job: str | None,
    input_: str | None,
    overlap: str,
    catchup_window: str | None,
    repeated: str,
    missing: str,
    jitter: str | None,
    start: str | None,
    end: str | None,
    buffer_limit: int,
    paused: bool,
    note: str,
    as_json: bool,
    db: DbOptions,
) -> int:
    """Create a schedule; only nominal times after now fire."""
    spec = ScheduleSpec(
        cron=crons,
        intervals=tuple(Interval(every=parse_duration(e, "--every")) for e in everies),
        tz=tz,
        start_at=None if start is None else parse_time(start, "--start"),
        end_at=None if end is None else parse_time(end, "--end"),
        jitter=parse_duration(jitter, "--jitter") if jitter else timedelta(0),
        repeated=RepeatedTime(repeated),
        missing=MissingTime(missing),
    )
    window = parse_duration(catchup_window, "--catchup-window") if catchup_window else None
    policy = SchedulePolicy(
        overlap=Overlap(overlap), catchup_window=window, buffer_limit=buffer_limit
    )
    action = _action(workflow, dag, job, read_input(input_, "--input"))
    async with connect(db) as store:
        client = ScheduleClient(store)
        await client.create(id, spec, action, policy=policy, paused=paused, note=note)
        d = await client.describe(id, runs=0)
    nxt = _next_fire(d)
    done(as_json, {"id": id, "next_fires": d.next_fires}, f"created schedule {id}; next fire {nxt}")
    return EXIT_OK


@schedules.command("pause", epilog=example("azync-flow schedules pause nightly --note 'db move'"))
@click.argument("id")
@click.option("--note", default="", help="Why (shown by list and show).")
@db_command
async def pause(id: str, note: str, as_json: bool, db: DbOptions) -> int:
    """Stop a schedule firing until unpaused."""
    async with connect(db) as store:
        await ScheduleClient(store).pause(id, note)
    done(as_json, {"id": id, "paused": True}, f"paused schedule {id}")
    return EXIT_OK


@schedules.command("unpause", epilog=example("azync-flow schedules unpause nightly"))
@click.argument("id")
@db_command
async def unpause(id: str, as_json: bool, db: DbOptions) -> int:
    """Fire again from now on (times passed while paused: see backfill)."""
    async with connect(db) as store:
        await ScheduleClient(store).unpause(id)
    done(as_json, {"id": id, "paused": False}, f"unpaused schedule {id}")
    return EXIT_OK


@schedules.command("trigger", epilog=example("azync-flow schedules trigger nightly"))
@click.argument("id")
@db_command
async def trigger(id: str, as_json: bool, db: DbOptions) -> int:
    """Run the action now (a worker's scheduler starts it within a tick)."""
    async with connect(db) as store:
        run_id = await ScheduleClient(store).trigger(id)
    done(as_json, {"id": id, "run_id": run_id}, f"triggered schedule {id}: run {run_id}")
    return EXIT_OK


@schedules.command("delete", epilog=example("azync-flow schedules delete nightly"))
@click.argument("id")
@db_command
async def delete(id: str, as_json: bool, db: DbOptions) -> int:
    """Delete a schedule and its run ledger (started runs go on)."""
    async with connect(db) as store:
        await ScheduleClient(store).delete(id)
    done(as_json, {"id": id, "deleted": True}, f"deleted schedule {id}")
    return EXIT_OK


@schedules.command(
    "backfill",
    epilog=example(
        "azync-flow schedules backfill nightly --start 2026-01-01T00:00Z --end 2026-01-07T00:00Z"
    ),
)
@click.argument("id")
@click.option(
    "--start",
    required=True,
    help="First nominal time, inclusive (ISO, UTC without a zone; or an age).",
)
@click.option(
    "--end",
    required=True,
    help="Last nominal time, inclusive (ISO, UTC without a zone; or an age).",
)
@click.option(
    "--overlap",
    type=StrictChoice([o.value for o in Overlap]),
    help="Override the schedule's overlap policy (allow_all: start all at once).",
)
@db_command
async def backfill(
    id: str, start: str, end: str, overlap: str | None, as_json: bool, db: DbOptions
) -> int:
    """Run every nominal time in a range (not already run), one at a time
    unless the overlap policy (or --overlap) is allow_all."""
    first, last = parse_time(start, "--start"), parse_time(end, "--end")
    chosen = None if overlap is None else Overlap(overlap)
    async with connect(db) as store:
        count = await ScheduleClient(store).backfill(id, first, last, overlap=chosen)
    done(as_json, {"id": id, "requested": count}, f"requested {count} runs of schedule {id}")
    return EXIT_OK


@schedules.command(
    "update",
    epilog=example(
        "azync-flow schedules update nightly --cron '0 2 * * *' --tz Europe/London",
        "azync-flow schedules update ping --overlap buffer_all --buffer-limit 10",
    ),
)
@click.argument("id")
@click.option("--cron", "crons", multiple=True, help="New cron expression (repeatable).")
@click.option("--every", "everies", multiple=True, help="New interval (repeatable).")
@click.option("--tz", help="IANA time zone of --cron (default: keep).")
@click.option("--jitter", help="Delay each fire by up to this (default: keep).")
@click.option("--overlap", type=StrictChoice([o.value for o in Overlap]))
@click.option("--catchup-window", help="How late a fire may start (15m, 2h, 3d).")
@click.option("--buffer-limit", type=int, help="Most fires waiting under buffer_all.")
@click.option("--note", default="", help="Why (shown by show).")
@db_command
async def update(
    id: str,
    crons: tuple[str, ...],
    everies: tuple[str, ...],
    tz: str | None,
    jitter: str | None,
    overlap: str | None,
    catchup_window: str | None,
    buffer_limit: int | None,
    note: str,
    as_json: bool,
    db: DbOptions,
) -> int:
    """Change a schedule's spec and/or policy; no nominal time before now fires."""
    async with connect(db) as store:
        client = ScheduleClient(store)
        current = await client.describe(id, runs=0, missed=0, changes=0)
        # None: keep (the client refuses an update that changes nothing)
        spec: ScheduleSpec | None = None
        if crons or everies or tz or jitter:
            old = current.spec
            spec = ScheduleSpec(
                cron=crons or old.cron,
                intervals=tuple(Interval(every=parse_duration(e, "--every")) for e in everies)
                if everies or crons
                else old.intervals,
                tz=tz or old.tz,
                start_at=old.start_at,
                end_at=old.end_at,
                jitter=parse_duration(jitter, "--jitter") if jitter else old.jitter,
                repeated=old.repeated,
                missing=old.missing,
            )
        policy: SchedulePolicy | None = None
        if overlap or catchup_window or buffer_limit is not None:
            policy = SchedulePolicy(
                overlap=Overlap(overlap) if overlap else current.policy.overlap,
                catchup_window=parse_duration(catchup_window, "--catchup-window")
                if catchup_window
                else current.policy.catchup_window,
                buffer_limit=current.policy.buffer_limit if buffer_limit is None else buffer_limit,
            )
        await client.update(id, spec=spec, policy=policy, note=note)
        d = await client.describe(id, runs=0)
    nxt = _next_fire(d)
    done(as_json, {"id": id, "next_fires": d.next_fires}, f"updated schedule {id}; next fire {nxt}")
    return EXIT_OK
