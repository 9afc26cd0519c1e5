"""``azync-flow migrate``, ``uncertain list|resolve``, ``queue stats|dead|retry``."""

from __future__ import annotations

import argparse
from typing import Any

from azync_flow.client import Client
from azync_flow.store import JobFilter, JobState, Source

from ._common import EXIT_OK, CliError, add_db_args, connect, emit, parse_id, parse_json


def register(sub: Any) -> None:
    p = sub.add_parser("migrate", help="create or upgrade the tables in --schema")
    add_db_args(p, embedded_fallback=True)
    p.set_defaults(run=_migrate)

    un = sub.add_parser("uncertain", help="operations waiting for a decision (docs/uncertain.md)")
    verbs = un.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser("list", help="list uncertain operations, oldest first")
    p.add_argument("--workflow", help="only this execution's operations")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(run=_uncertain_list)
    p = verbs.add_parser("resolve", help="decide one uncertain operation (audited)")
    p.add_argument("id", help="operation id (from `uncertain list`)")
    p.add_argument("--decision", required=True, choices=["complete", "fail", "retry"])
    p.add_argument("--result", help="complete: the activity's result as JSON, @FILE or -")
    p.add_argument("--error", help="fail: the message the workflow's ActivityError carries")
    p.add_argument("--note", required=True, help="why (kept in history and on the operation)")
    p.add_argument("--by", required=True, help="who decides (kept in history)")
    p.set_defaults(run=_uncertain_resolve)
    for parser in verbs.choices.values():
        add_db_args(parser, embedded_fallback=False)

    qu = sub.add_parser("queue", help="job queue depths, dead letters, retries")
    verbs = qu.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser("stats", help="per-kind depths (with --kind: and the daily window)")
    p.add_argument("--kind", default="")
    p.set_defaults(run=_queue_stats)
    p = verbs.add_parser("dead", help="list dead-lettered jobs, oldest first")
    p.add_argument("--kind", default="")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(run=_queue_dead)
    p = verbs.add_parser("retry", help="retry a dead job (or --all dead jobs of --kind)")
    p.add_argument("id", nargs="?", help="job id")
    p.add_argument("--all", action="store_true", help="every dead job of --kind")
    p.add_argument("--kind", default="")
    p.set_defaults(run=_queue_retry)
    for parser in verbs.choices.values():
        add_db_args(parser, embedded_fallback=False)


async def _migrate(args: argparse.Namespace) -> int:
    async with connect(args, migrate=True) as store:
        emit({"schema": store.schema, "migrated": True})
    return EXIT_OK


async def _uncertain_list(args: argparse.Namespace) -> int:
    workflow = parse_id(args.workflow, "--workflow") if args.workflow else None
    async with connect(args) as store:
        ops = await Client(store).list_uncertain(workflow_id=workflow, limit=args.limit)
    emit(ops)
    return EXIT_OK


async def _uncertain_resolve(args: argparse.Namespace) -> int:
    op_id = parse_id(args.id, "operation id")
    if args.decision == "complete" and args.result is None:
        raise CliError("--decision complete needs --result JSON (the activity's return value)")
    if args.decision != "complete" and args.result is not None:
        raise CliError("--result is only for --decision complete")
    if args.decision == "fail" and not args.error:
        raise CliError("--decision fail needs --error MESSAGE")
    if args.decision != "fail" and args.error is not None:
        raise CliError("--error is only for --decision fail")
    result = parse_json(args.result, "--result")
    async with connect(args) as store:
        await Client(store).resolve_uncertain(
            op_id,
            args.decision,
            result=result,
            error=args.error,
            note=args.note,
            decided_by=args.by,
        )
        op = await store.get_operation(op_id)
    emit(
        {
            "operation_id": op_id,
            "decision": args.decision,
            "state": op.state,
            "workflow_id": op.workflow_id,
            "decided_by": args.by,
        }
    )
    return EXIT_OK


async def _queue_stats(args: argparse.Namespace) -> int:
    async with connect(args) as store:
        if args.kind:
            depths, daily = await store.stats(Source.QUEUE, args.kind)
            emit({"kind": args.kind, "depths": depths, "daily": daily})
        else:
            emit(await store.kind_depths(Source.QUEUE))
    return EXIT_OK


async def _queue_dead(args: argparse.Namespace) -> int:
    async with connect(args) as store:
        jobs, total = await store.list_jobs(
            Source.QUEUE, JobFilter(kind=args.kind, state=JobState.DEAD), 0, args.limit
        )
    emit(
        {
            "total": total,
            "jobs": [
                {
                    "id": j.id,
                    "kind": j.kind,
                    "attempt": j.attempt,
                    "last_error": j.last_error,
                    "failed_at": j.failed_at,
                    "payload": j.payload,
                }
                for j in jobs
            ],
        }
    )
    return EXIT_OK


async def _queue_retry(args: argparse.Namespace) -> int:
    if args.all == bool(args.id):
        raise CliError("give either a job id or --all --kind KIND")
    if args.all and not args.kind:
        raise CliError("--all needs --kind")
    async with connect(args) as store:
        if args.all:
            emit({"retried": await store.retry_all_dead(Source.QUEUE, args.kind)})
        else:
            await store.retry_job(Source.QUEUE, parse_id(args.id, "job id"))
            emit({"retried": 1})
    return EXIT_OK
