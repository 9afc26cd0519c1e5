"""Run a worker process: ``python -m azync_flow.worker package.module:factory``.

``factory`` names a :class:`Worker`, or a function (sync or async) returning
one. The process runs until SIGTERM/SIGINT, then shuts down gracefully (stop
leasing, finish in-flight jobs within the worker's ``shutdown_grace``, release
the rest) and closes the worker's store. Exit status 0 after a clean shutdown;
1 with a one-line error when the database cannot be reached or its schema is not
migrated.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import logging
import sys
from typing import Any

from ..store.errors import StoreError
from ._worker import Worker


def load(target: str) -> Any:
    """Import ``module:attr`` and return the attribute.

    Raises:
        SystemExit: the target is malformed or cannot be found.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"expected package.module:attribute, got {target!r}")
    module = importlib.import_module(module_name)
    try:
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        raise SystemExit(f"{module_name} has no attribute {attr!r}") from None
    return obj


async def resolve_worker(obj: Any) -> Worker:
    """Turn a Worker or a (possibly async) factory into a Worker."""
    if callable(obj) and not isinstance(obj, Worker):
        obj = obj()
        if inspect.isawaitable(obj):
            obj = await obj
    if not isinstance(obj, Worker):
        raise SystemExit(f"the target produced {type(obj).__name__}, not a Worker")
    return obj


async def serve(target: str) -> None:
    """Load ``target``, build its Worker and :func:`run_worker` it."""
    await run_worker(await resolve_worker(load(target)))


async def run_worker(worker: Worker) -> None:
    """Run ``worker`` until SIGTERM/SIGINT (graceful shutdown), then close its store."""
    try:
        await worker.run()
    finally:
        close = getattr(worker.store, "close", None)
        if close is not None:
            await close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m azync_flow.worker", description=__doc__)
    parser.add_argument("target", help="package.module:worker_or_factory")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        asyncio.run(serve(args.target))
    except StoreError as exc:  # unreachable database, unmigrated schema: one line, no traceback
        raise SystemExit(f"python -m azync_flow.worker: error: {exc}") from None


if __name__ == "__main__":
    main()
