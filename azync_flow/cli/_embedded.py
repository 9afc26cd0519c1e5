"""`azync-flow embedded status|stop`: this user's embedded PostgreSQL.

Thin wrappers over :func:`azync_flow.embedded.embedded_status` and
:func:`azync_flow.embedded.stop_embedded` (the functions any CLI calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from azync_flow.embedded import embedded_status, stop_embedded
from azync_flow.errors import EmbeddedInUseError

from ._common import EXIT_CONFLICT, EXIT_OK, EXIT_UNAVAILABLE, CliError, example

_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="Data directory (default: $AZYNC_EMBEDDED_DIR or the user's).",
)


@click.group("embedded", epilog=example("azync-flow embedded status"))
def embedded() -> None:
    """This user's embedded PostgreSQL (one per user, shared by its processes)."""


@embedded.command("status", epilog=example("azync-flow embedded status"))
@_DATA_DIR
def status(data_dir: Path | None) -> int:
    """Running or not, its DSN, the processes using it or that left it running."""
    click.echo(_call(embedded_status, data_dir).describe())
    return EXIT_OK


@embedded.command("stop", epilog=example("azync-flow embedded stop"))
@_DATA_DIR
@click.option("--force", is_flag=True, help="Stop it even while processes use it.")
def stop(data_dir: Path | None, force: bool) -> int:
    """Stop the server (refused while processes use it, unless --force)."""
    before = _call(stop_embedded, data_dir, force=force)
    if before.running:
        click.echo(f"stopped the embedded PostgreSQL (pid {before.pid}) in {before.data_dir}")
    else:
        click.echo(f"the embedded PostgreSQL in {before.data_dir} was not running")
    return EXIT_OK


def _call(fn: Any, *args: Any, **kw: Any) -> Any:
    try:
        return fn(*args, **kw)
    except EmbeddedInUseError as exc:
        raise CliError(str(exc), EXIT_CONFLICT) from None
    except RuntimeError as exc:
        raise CliError(str(exc), EXIT_UNAVAILABLE) from None


__all__ = ["embedded"]
