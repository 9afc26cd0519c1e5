"""`azync-flow jobs ...`: queue jobs (and, with `--source`, deliveries, DAG tasks,
workflow tasks): list, inspect, retry, pause, resume, archive, delete, purge, dead letters."""

from __future__ import annotations

import uuid
from typing import Any

import click

from azync_flow._text import shorten
from azync_flow.errors import NotFoundError
from azync_flow.store.admin import JobFilter
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.queue import Job, JobState, Source
from azync_flow.store.validate import check_name

from ._common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    CliError,
    DbOptions,
    StrictChoice,
    connect,
    cursor_option,
    db_command,
    example,
    limit_option,
    next_offset_cursor,
    offset_cursor,
    parse_id,
)
from ._output import (
    age,
    done,
    emit,
    list_page,
    preview,
    record,
    table,
    when,
)


def _source_option(fn: Any) -> Any:
    return click.option(
        "--source",
        type=StrictChoice([s.value for s in Source]),
        default=Source.QUEUE.value,
        show_default=True,
        help="Which jobs: queue jobs, event deliveries, DAG tasks or workflow tasks.",
    )(fn)


@click.group("jobs", epilog=example("azync-flow jobs list --kind email --state dead"))
def jobs() -> None:
    """Inspect and operate queue jobs (and other job sources with --source)."""


def _item(j: Job) -> dict[str, Any]:
    return {
        "id": j.id,
        "source": j.source,
        "kind": j.kind,
        "task_queue": j.task_queue,
        "priority": j.priority,
        "state": j.state,
        "attempt": j.attempt,
        "max_attempts": j.max_attempts,
        "run_at": j.run_at,
        "enqueued_at": j.enqueued_at,
        "last_error": j.last_error,
        "payload_preview": preview(j.payload),
    }


async def _list(
    db: DbOptions, source: str, kind: str, state: JobState | None, limit: int, cursor: str | None
) -> tuple[list[Job], int, int]:
    check_name(kind, "--kind", empty_ok=True)
    offset = offset_cursor(cursor)
    async with connect(db) as store:
        rows, total = await store.list_jobs(
            Source(source), JobFilter(kind=kind, state=state), offset, limit
        )
    return rows, total, offset


def _print_list(rows: list[Job], total: int, offset: int, as_json: bool, empty: str) -> None:
    list_page(
        rows,
        next_offset_cursor(offset, len(rows), total),
        total=total,
        as_json=as_json,
        item=_item,
        columns=[
            ("ID", lambda j: j.id),
            ("KIND", lambda j: j.kind),
            ("STATE", lambda j: j.state),
            ("ATTEMPT", lambda j: f"{j.attempt}/{j.max_attempts}" if j.max_attempts else j.attempt),
            ("ENQUEUED (UTC)", lambda j: when(j.enqueued_at)),
            ("RUN AT (UTC)", lambda j: when(j.run_at)),
            ("PAYLOAD", lambda j: preview(j.payload)),
            ("LAST ERROR", lambda j: shorten(j.last_error, 60)),
        ],
        empty=empty,
    )


_LIMIT = limit_option(50)
_KIND = click.option("--kind", default="", help="Only jobs of this kind.")


@jobs.command("list", epilog=example("azync-flow jobs list --kind email --state scheduled"))
@_source_option
@_KIND
@click.option("--state", type=StrictChoice([s.value for s in JobState]), help="Only this state.")
@_LIMIT
@cursor_option
@db_command
async def list_cmd(
    source: str,
    kind: str,
    state: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
    db: DbOptions,
) -> int:
    """List jobs a page at a time (payloads as previews; `jobs show` prints them)."""
    rows, total, offset = await _list(
        db, source, kind, JobState(state) if state else None, limit, cursor
    )
    _print_list(rows, total, offset, as_json, "no jobs")
    return EXIT_OK


@jobs.command("dead", epilog=example("azync-flow jobs dead --kind email"))
@_source_option
@_KIND
@_LIMIT
@cursor_option
@db_command
async def dead(
    source: str, kind: str, limit: int, cursor: str | None, as_json: bool, db: DbOptions
) -> int:
    """List dead letters (jobs out of attempts), oldest first."""
    rows, total, offset = await _list(db, source, kind, JobState.DEAD, limit, cursor)
    _print_list(rows, total, offset, as_json, "no dead letters")
    return EXIT_OK


async def _get_job(store: PostgresStore, source: Source, job_id: uuid.UUID) -> Job:
    """The job, or NotFoundError naming the source that has the id (`--source S`)
    when another does: a workflow operation id given without `--source workflow`."""
    try:
        return await store.get_job(source, job_id)
    except NotFoundError as missing:
        for other in Source:  # only on this error path: one primary-key probe each
            if other is not source:
                try:
                    found = await store.get_job(other, job_id)
                except NotFoundError:
                    continue
                raise NotFoundError(
                    f"{missing.args[0]}; it is a {found.source} job: pass --source {found.source}"
                ) from None
        raise


@jobs.command("show", epilog=example("azync-flow jobs show 3f2a0c9e-..."))
@click.argument("id")
@_source_option
@db_command
async def show(id: str, source: str, as_json: bool, db: DbOptions) -> int:
    """Show one job: state, attempts with their errors, payload and result."""
    job_id = parse_id(id, "job id")
    async with connect(db) as store:
        job = await _get_job(store, Source(source), job_id)
        attempts = await store.job_attempts(Source(source), job_id)
    if as_json:
        emit({**_item(job), "payload": job.payload, "result": job.result, "meta": job.meta,
              "attempts": attempts, "lease_until": job.lease_until,
              "completed_at": job.completed_at})  # fmt: skip
        return EXIT_OK
    fields: list[tuple[str, Any]] = [
        ("id", job.id),
        ("source", job.source),
        ("kind", job.kind),
        ("task queue", job.task_queue),
        ("priority", job.priority),
        ("state", job.state),
        ("attempt", f"{job.attempt}/{job.max_attempts}" if job.max_attempts else job.attempt),
        ("enqueued", when(job.enqueued_at)),
        ("run at", when(job.run_at)),
        ("lease until", when(job.lease_until)),
        ("completed", when(job.completed_at)),
    ]
    optional = [
        ("last error", job.last_error),
        ("blocked", job.blocked_reason),
        ("DAG run", job.dag_id),
        ("task key", job.task_key),
        ("workflow run", job.run_id),
        ("event", job.event_id),
        ("meta", ", ".join(f"{k}={v}" for k, v in job.meta.items())),
    ]
    payloads: list[tuple[str, Any]] = [("payload", job.payload)]
    if job.result is not None:
        payloads.append(("result", job.result))
    record(fields + [(k, v) for k, v in optional if v], payloads=payloads)
    if attempts:
        click.echo("")
        table(
            attempts,
            [
                ("ATTEMPT", lambda a: a.attempt),
                ("AT (UTC)", lambda a: when(a.at)),
                ("ERROR", lambda a: a.error),
            ],
            title="attempts",
        )
    return EXIT_OK


@jobs.command("retry", epilog=example("azync-flow jobs retry --all --kind email"))
@click.argument("id", required=False)
@click.option("--all", "all_", is_flag=True, help="Every dead job (of --kind).")
@_KIND
@_source_option
@db_command
async def retry(
    id: str | None, all_: bool, kind: str, source: str, as_json: bool, db: DbOptions
) -> int:
    """Put a dead job (or every dead job with --all) back to pending, attempts reset."""
    if all_ == (id is not None):
        raise CliError("give a job id, or --all (with --kind to retry one kind only)")
    check_name(kind, "--kind", empty_ok=True)
    async with connect(db) as store:
        if id is not None:
            await store.retry_job(Source(source), parse_id(id, "job id"))
            n = 1
        else:
            n = await store.retry_all_dead(Source(source), kind)
    done(as_json, {"retried": n}, f"retried {n} job(s)")
    return EXIT_OK


#: States `jobs purge` takes: not in flight (a leased or uncertain job is refused).
_PURGEABLE = [s.value for s in JobState if s not in (JobState.ACTIVE, JobState.UNCERTAIN)]
#: Sources whose jobs no run owns; DAG tasks and workflow jobs go with their run.
_PURGE_SOURCES = (Source.QUEUE, Source.EVENT)


@jobs.command(
    "purge",
    epilog=example("azync-flow jobs purge --kind email --state dead --yes"),
)
@click.option("--kind", required=True, help="The kind whose jobs are deleted.")
@click.option(
    "--state", required=True, type=StrictChoice(_PURGEABLE), help="Delete the jobs in this state."
)
@_source_option
@click.option("--yes", is_flag=True, help="Delete; without it, only say how many would go.")
@db_command
async def purge(kind: str, state: str, source: str, yes: bool, as_json: bool, db: DbOptions) -> int:
    """Delete every job of one kind in one state (without --yes: count them, delete nothing).

    Running (active) and uncertain jobs cannot be purged; DAG tasks and
    workflow jobs belong to their run (act on the run: `dags cancel`,
    `workflows terminate`).
    """
    src, st = Source(source), JobState(state)
    if src not in _PURGE_SOURCES:
        raise CliError(
            f"{src} jobs belong to their run and cannot be purged; act on the run "
            f"(`azync-flow {'dags cancel' if src is Source.DAG else 'workflows terminate'} ID`)"
        )
    check_name(kind, "--kind")
    async with connect(db) as store:
        if not yes:
            _, n = await store.list_jobs(src, JobFilter(kind=kind, state=st), 0, 0)
            done(
                as_json,
                {"kind": kind, "state": st, "source": src, "would_delete": n, "deleted": 0},
                f"would delete {n} {st} {src} job(s) of kind {kind!r}; pass --yes to delete them",
            )
            return EXIT_OK
        n = await store.delete_all_jobs(src, kind, st)
    done(
        as_json,
        {"kind": kind, "state": st, "source": src, "deleted": n},
        f"deleted {n} {st} {src} job(s) of kind {kind!r}",
    )
    return EXIT_OK


def _verb(name: str, text: str, past: str) -> None:
    @jobs.command(name, help=text, epilog=example(f"azync-flow jobs {name} 3f2a0c9e-..."))
    @click.argument("id")
    @_source_option
    @db_command
    async def command(id: str, source: str, as_json: bool, db: DbOptions) -> int:
        job_id = parse_id(id, "job id")
        src = Source(source)
        async with connect(db) as store:
            if name == "pause":
                await store.pause_job(src, job_id)
            elif name == "resume":
                await store.resume_job(src, job_id)
            elif name == "archive":
                await store.archive_job(src, job_id)
            else:
                job = await store.get_job(src, job_id)
                if job.state == JobState.ACTIVE:
                    raise CliError(
                        f"job {job_id} is running now; delete it once it settles", EXIT_NOT_FOUND
                    )
                await store.delete_job(src, job_id, job.state)
        done(as_json, {"id": job_id, past: True}, f"{past} {job_id}")
        return EXIT_OK


_verb("pause", "Hold a pending or scheduled job (`jobs resume` releases it).", "paused")
_verb("resume", "Release a paused job to pending (or scheduled, per its run-at time).", "resumed")
_verb(
    "archive", "Move a pending or scheduled job to the dead letters without running it.", "archived"
)
_verb("delete", "Delete a job that is not running (any other state).", "deleted")


__all__ = ["age", "jobs"]
