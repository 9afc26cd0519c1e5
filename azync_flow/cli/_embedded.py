"""``azync-flow embedded status|stop``: this user's embedded PostgreSQL.

Thin wrappers over :func:`azync_flow.embedded.embedded_status` and
:func:`azync_flow.embedded.stop_embedded` (the functions any CLI calls).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from azync_flow.embedded import embedded_status, stop_embedded

from ._common import EXIT_OK, EXIT_UNAVAILABLE, CliError


def register(sub: Any) -> None:
    em = sub.add_parser(
        "embedded",
        help="this user's embedded PostgreSQL (one per user, shared by its processes)",
    )
    verbs = em.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser(
        "status", help="running or not, its DSN, the processes using it or left it running"
    )
    p.set_defaults(run=_status)
    p = verbs.add_parser("stop", help="stop it (refused while processes use it, unless --force)")
    p.add_argument("--force", action="store_true", help="stop it even while processes use it")
    p.set_defaults(run=_stop)
    for parser in verbs.choices.values():
        parser.add_argument(
            "--data-dir",
            type=Path,
            help="data directory (default: $AZYNC_EMBEDDED_DIR or the user's)",
        )


async def _status(args: argparse.Namespace) -> int:
    print(_call(embedded_status, args.data_dir).describe())
    return EXIT_OK


async def _stop(args: argparse.Namespace) -> int:
    before = _call(stop_embedded, args.data_dir, force=args.force)
    if before.running:
        print(f"stopped the embedded PostgreSQL (pid {before.pid}) in {before.data_dir}")
    else:
        print(f"the embedded PostgreSQL in {before.data_dir} was not running")
    return EXIT_OK


def _call(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except RuntimeError as exc:
        raise CliError(str(exc), EXIT_UNAVAILABLE) from None
