"""A user's install without an index: the wheel ``pip wheel .`` builds from a
checkout installs into a fresh virtualenv, and the quickstart runs from it
against PostgreSQL (the test's, in the test's schema)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run(cmd: list[str], **kwargs: object) -> str:
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return str(done.stdout)


def test_the_built_wheel_installs_into_a_fresh_venv_and_runs_the_quickstart(
    tmp_path: Path, pg_dsn: str, schema: str
) -> None:
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(wheels)])
    (wheel,) = wheels.glob("azync_flow-*.whl")
    with zipfile.ZipFile(wheel) as zf:  # the console's pages and assets ship in it
        names = set(zf.namelist())
    for asset in ("templates/base.html", "templates/execution.html", "static/htmx.min.js",
                  "static/console.css"):  # fmt: skip
        assert f"azync_flow/console/{asset}" in names, asset

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", str(wheel)])

    app = tmp_path / "app"  # outside the checkout: only the installed package is importable
    app.mkdir()
    for name in ("quickstart.py", "order.py"):
        shutil.copy(ROOT / "samples" / name, app / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"AZYNC_DSN": pg_dsn, "AZYNC_SCHEMA": schema})
    where = run(
        [str(python), "-c", "import azync_flow; print(azync_flow.__file__)"], cwd=app, env=env
    )
    assert where.startswith(str(venv))
    out = run([str(python), "quickstart.py"], cwd=app, env=env)
    assert "result:    shipped" in out, out
