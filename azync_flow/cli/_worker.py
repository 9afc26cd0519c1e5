"""`azync-flow worker APP`: run a worker until SIGTERM/SIGINT.

APP is `module` or `module:attr` (imported from the current directory, as
`python -m` would). It names either

\b
* a `Worker`, or a function (sync or async) returning one: run as is (the
  worker brings its own store; `--dsn`/`--concurrency`/`--lease` are not
  used), or
* what to register on a new worker for `--dsn`: a module (each of its
  `workflows`/`activities`/`handlers` attributes it has; for a missing
  `workflows` or `activities`, every `@workflow` or `@activity` it
  defines), a `Registry`, a list of definitions, or an object with
  `workflows`, `activities` and `handlers` (a kind -> handler dict for
  queue jobs).

The worker maintains the queue (promotes due jobs, reaps expired leases) and
shuts down gracefully: it stops leasing, lets in-flight jobs finish within its
`shutdown_grace` and releases the rest.

`--migrate` applies pending migrations to the schema before the worker starts
(also to the store of a `Worker` the APP brings); without it the worker
refuses to start on a schema that lacks them (`schema_not_migrated`, exit 5).

`--identity NAME` fixes the worker identity (default: the first free
`<host>/<n>`); a worker restarted under the same identity takes back at once
what its killed predecessor held instead of waiting for its leases. Another
live process holding NAME: exit 4.

`--metrics-port` serves its metrics for Prometheus on
`http://HOST:PORT/metrics` (docs/metrics.md); the `OTEL_*` variables turn on
OTLP traces and metrics (docs/tracing.md).
"""

from __future__ import annotations

import inspect
import logging
import sys
from datetime import timedelta
from typing import Any

import click

from azync_flow.app import attach_workflows
from azync_flow.store import Config
from azync_flow.store.admin import Closable, Migrator
from azync_flow.store.postgres import open_store
from azync_flow.store.queue import DEFAULT_TASK_QUEUE, Source
from azync_flow.store.validate import check_identity_name
from azync_flow.worker import Worker

from ._apps import app_parts, is_app, load_app
from ._common import (
    EXIT_OK,
    CliError,
    DbOptions,
    Seconds,
    db_options,
    example,
    positive,
    resolve_dsn,
    run_async,
)
from ._telemetry import serve_metrics, telemetry_from_env

__all__ = ["build_worker", "migrate_worker", "resolve_worker", "run_worker", "worker_command"]

log = logging.getLogger("azync_flow.worker")


async def resolve_worker(obj: Any) -> Worker:
    """Turn a Worker or a (possibly async) factory into a Worker.

    Raises:
        CliError: the factory produced something else.
    """
    if callable(obj) and not isinstance(obj, Worker):
        obj = obj()
        if inspect.isawaitable(obj):
            obj = await obj
    if not isinstance(obj, Worker):
        raise CliError(f"the APP produced {type(obj).__name__}, not a Worker")
    return obj


async def migrate_worker(worker: Worker) -> list[int]:
    """Apply pending migrations to ``worker``'s store (``--migrate``) and log
    what was applied; returns the versions.

    Raises:
        CliError: the worker's store cannot migrate its schema.
        MigrationError, StoreUnavailableError: as ``migrate``; the store is closed.
    """
    store = worker.store
    if not isinstance(store, Migrator):
        raise CliError(f"--migrate: the worker's store ({type(store).__name__}) has no migrate()")
    try:
        applied = await store.migrate()
    except BaseException:
        if isinstance(store, Closable):
            await store.close()
        raise
    where = store.target()
    if applied:
        log.info("--migrate: applied migration(s) %s to %s", ", ".join(map(str, applied)), where)
    else:
        log.info("--migrate: %s was already up to date", where)
    return applied


async def run_worker(worker: Worker) -> None:
    """Run `worker` until SIGTERM/SIGINT (graceful shutdown), then close its store."""
    try:
        await worker.run()
    finally:
        if isinstance(worker.store, Closable):
            await worker.store.close()


async def build_worker(
    obj: Any,
    app: str,
    db: DbOptions,
    concurrency: int,
    lease: timedelta,
    task_queues: tuple[str, ...] = (DEFAULT_TASK_QUEUE,),
    identity: str | None = None,
) -> Worker:
    """A new Worker on `db` with what `obj` provides registered (see the module doc).

    Raises:
        CliError: `obj` provides nothing, or a definition is refused.
    """
    workflows, activities, handlers = app_parts(obj)
    if not (workflows or activities or handlers):
        raise CliError(f"{app!r} provides no workflows, activities or handlers")
    store = await open_store(resolve_dsn(db.dsn), Config(schema=db.schema), migrate=False)
    try:
        worker = Worker(
            store,
            concurrency=concurrency,
            lease=lease,
            maintain=(Source.QUEUE,),
            task_queues=task_queues,
            identity=identity,
        )
        if workflows or activities:
            attach_workflows(worker, workflows, activities)
        for kind, handler in handlers.items():
            worker.register(kind, handler)
    except (TypeError, ValueError) as exc:
        await store.close()
        raise CliError(f"{app!r}: {exc}") from None
    return worker


@click.command(
    "worker",
    epilog=example("azync-flow worker myapp.workflows --concurrency 20"),
    help=__doc__,
    short_help="Run a worker for APP until SIGTERM/SIGINT.",
)
@click.argument("app", metavar="APP")
@click.option(
    "--concurrency", type=int, default=10, show_default=True, callback=positive,
    help="Jobs per kind at once.",
)  # fmt: skip
@click.option(
    "--lease",
    type=Seconds(0.1),
    default=30.0,
    show_default=True,
    help="Lease per attempt, seconds.",
)
@click.option(
    "--task-queue", "task_queues", multiple=True, metavar="QUEUE",
    help="A task queue to serve (repeatable; default: default).",
)  # fmt: skip
@click.option(
    "--identity", default=None, metavar="NAME",
    help="Worker identity kept across restarts: 1-200 ASCII letters, digits and ._/@- "
    "(default: the first free <host>/<n>).",
)  # fmt: skip
@click.option(
    "--migrate", is_flag=True,
    help="Apply pending migrations to the schema before starting (as `azync-flow migrate`).",
)  # fmt: skip
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING, ERROR.")
@click.option(
    "--metrics-port", type=click.IntRange(0, 65535), default=None,
    help="Serve Prometheus metrics on this port (0: any free port, logged).",
)  # fmt: skip
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True,
    help="Address of the metrics endpoint (0.0.0.0: every interface).",
)  # fmt: skip
@db_options
@run_async
async def worker_command(
    app: str,
    concurrency: int,
    lease: float,
    task_queues: tuple[str, ...],
    identity: str | None,
    migrate: bool,
    log_level: str,
    metrics_port: int | None,
    metrics_host: str,
    db: DbOptions,
) -> int:
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise CliError(f"--log-level {log_level!r} is not a logging level")
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    if lease <= 0:
        raise CliError("--lease must be a positive number of seconds")
    if identity is not None:
        try:
            check_identity_name(identity)
        except ValueError as exc:
            raise CliError(f"--identity: {exc} (ASCII only)") from None
    telemetry_from_env(metrics=True, prometheus=metrics_port is not None)
    server = serve_metrics(metrics_port, metrics_host) if metrics_port is not None else None
    try:
        obj = load_app(app)
        if isinstance(obj, Worker) or (callable(obj) and not is_app(obj)):
            worker = await resolve_worker(obj)
            if identity is not None:
                worker.identity_name = identity
        else:
            worker = await build_worker(
                obj,
                app,
                db,
                concurrency,
                timedelta(seconds=lease),
                task_queues or (DEFAULT_TASK_QUEUE,),
                identity,
            )
        if migrate:
            await migrate_worker(worker)
        await run_worker(worker)
    finally:
        if server is not None:
            server.close()
    return EXIT_OK
