"""``azync-flow worker APP``: run a Worker for an app until SIGTERM/SIGINT.

``APP`` is ``package.module:attribute`` (or just ``package.module``). The attribute is

* a :class:`~azync_flow.worker.Worker`, or a (sync/async) factory returning one —
  run exactly as ``python -m azync_flow.worker`` runs it (the factory opens its store);
* an *app*: a :class:`~azync_flow.workflow.Registry`, or any object/module with
  ``workflows`` / ``activities`` (iterables of definitions) and ``handlers``
  (a mapping ``kind -> async handler`` of queue jobs). A module given without
  ``:attribute`` is scanned for ``@workflow`` / ``@activity`` definitions.
  The CLI opens the store from ``--dsn``/``$AZYNC_DSN`` and builds the Worker:
  workflow tasks, activities (with reconcile hooks and uncertain parking) and
  handlers, plus the leader's maintenance.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import types
from datetime import timedelta
from typing import Any

from azync_flow.store import Config, Source
from azync_flow.store.postgres import open_store
from azync_flow.worker import Worker
from azync_flow.worker.__main__ import load, resolve_worker, run_worker
from azync_flow.workflow import ActivityDefinition, Registry, WorkflowDefinition

from ._common import EXIT_OK, CliError, add_db_args, resolve_dsn


def register(sub: Any) -> None:
    p = sub.add_parser("worker", help="run a worker for APP until SIGTERM (see --help)")
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("app", metavar="APP", help="package.module[:attribute]")
    p.add_argument("--concurrency", type=int, default=10, help="jobs per kind at once")
    p.add_argument("--lease", type=float, default=30.0, help="lease per attempt, seconds")
    p.add_argument("--log-level", default="INFO")
    add_db_args(p, embedded_fallback=True)
    p.set_defaults(run=_worker)


def _is_app(obj: Any) -> bool:
    if isinstance(obj, (Registry, types.ModuleType)):
        return True
    return any(hasattr(obj, a) for a in ("workflows", "activities", "handlers"))


def _parts(obj: Any) -> tuple[list[Any], list[Any], dict[str, Any]]:
    if isinstance(obj, Registry):
        return list(obj.workflows.values()), list(obj.activities.values()), {}
    if isinstance(obj, types.ModuleType) and not any(
        hasattr(obj, a) for a in ("workflows", "activities", "handlers")
    ):
        values = list(vars(obj).values())
        return (
            [v for v in values if isinstance(v, WorkflowDefinition)],
            [v for v in values if isinstance(v, ActivityDefinition)],
            {},
        )
    workflows = getattr(obj, "workflows", ())
    activities = getattr(obj, "activities", ())
    if isinstance(workflows, dict):
        workflows = workflows.values()
    if isinstance(activities, dict):
        activities = activities.values()
    return list(workflows), list(activities), dict(getattr(obj, "handlers", None) or {})


def _load(target: str) -> Any:
    try:
        if ":" not in target:
            return importlib.import_module(target)
        return load(target)
    except ImportError as exc:
        raise CliError(f"cannot import {target!r}: {exc}") from None
    except SystemExit as exc:  # azync_flow.worker's own messages
        raise CliError(str(exc)) from None


async def build_worker(obj: Any, args: argparse.Namespace) -> Worker:
    """The Worker for an app object (see the module docstring)."""
    workflows, activities, handlers = _parts(obj)
    if not (workflows or activities or handlers):
        raise CliError(f"{args.app!r} provides no workflows, activities or handlers")
    lease = timedelta(seconds=args.lease)
    store = await open_store(resolve_dsn(args), Config(schema=args.schema or ""), migrate=False)
    worker = Worker(store, concurrency=args.concurrency, lease=lease, maintain=(Source.QUEUE,))
    try:
        if workflows or activities:
            worker.register_workflows(workflows, activities)
        for kind, handler in handlers.items():
            worker.register(kind, handler)
    except (TypeError, ValueError) as exc:
        await store.close()
        raise CliError(f"{args.app!r}: {exc}") from None
    return worker


async def _worker(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    obj = _load(args.app)
    if isinstance(obj, Worker) or (callable(obj) and not _is_app(obj)):
        try:
            worker = await resolve_worker(obj)
        except SystemExit as exc:
            raise CliError(str(exc)) from None
    else:
        worker = await build_worker(obj, args)
    await run_worker(worker)
    return EXIT_OK
