"""The top-level names are imported on first use, and resolve to the same objects
as before: every exported name, and ``azync_flow.workflow`` is the decorator even
after the ``azync_flow.workflow`` subpackage was imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import azync_flow.workflow._context      # imports the subpackage first
import azync_flow
from azync_flow import workflow
from azync_flow.workflow import workflow as decorator
assert workflow is decorator, workflow
assert azync_flow.workflow is decorator
for name in azync_flow.__all__:
    assert getattr(azync_flow, name) is not None, name
assert azync_flow.dag.DAG is azync_flow.DAG      # a submodule reached as an attribute
try:
    azync_flow.no_such_name
except AttributeError:
    pass
else:
    raise SystemExit("missing names must raise AttributeError")
print("ok")
"""


def test_exports_resolve_lazily_and_workflow_stays_the_decorator() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
