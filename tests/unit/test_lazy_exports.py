"""The top-level names are imported on first use and resolve to their homes;
``azync_flow.workflow`` and ``azync_flow.activity`` are the user modules for
workflow and activity code, and each is also the decorator of its name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EXPORTS = """
import azync_flow
for name in azync_flow.__all__:
    assert getattr(azync_flow, name) is not None, name
assert azync_flow.dag.DAG is azync_flow.DAG      # a submodule reached as an attribute
assert azync_flow.attach_workflows is azync_flow.app.attach_workflows
assert azync_flow.current_activity is azync_flow.activity.current_activity
try:
    azync_flow.no_such_name
except AttributeError:
    pass
else:
    raise SystemExit("missing names must raise AttributeError")
print("ok")
"""

#: Run with each import order: the answers must not depend on which came first.
USER_MODULES = """
import types
from azync_flow import activity, workflow
import azync_flow.activity
import azync_flow.activity as act
import azync_flow.workflow
import azync_flow.workflow as wf
from azync_flow.activity import ActivityDefinition, ActivityInfo, Reconciled, current_activity
from azync_flow.workflow import ActivityOptions, Registry, WorkflowContext, WorkflowDefinition

for module, name in ((wf, "azync_flow.workflow"), (act, "azync_flow.activity")):
    assert isinstance(module, types.ModuleType) and module.__name__ == name, module
assert workflow is wf is azync_flow.workflow
assert activity is act is azync_flow.activity


@workflow
async def bare(ctx: WorkflowContext) -> int:
    return 1


@workflow(name="named", version="2")
async def named(ctx: WorkflowContext, n: int) -> int:
    return n


@activity
def plain(n: int) -> int:
    return n


@activity(name="charge", idempotent=False)
async def charge(n: int) -> int:
    return n


assert isinstance(bare, WorkflowDefinition) and bare.name == "bare"
assert isinstance(named, WorkflowDefinition) and (named.name, named.version) == ("named", "2")
assert isinstance(plain, ActivityDefinition) and plain.name == "plain"
assert isinstance(charge, ActivityDefinition)
assert charge.options == ActivityOptions(idempotent=False)
assert Registry([bare, named], [plain, charge]).workflow("named") is named
assert current_activity() is None and Reconciled.retry().decision == "retry"
assert isinstance(ActivityInfo, type)
print("ok")
"""


def _run(probe: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_exports_resolve_lazily_to_their_homes() -> None:
    _run(EXPORTS)


@pytest.mark.parametrize(
    "first",
    [
        "import azync_flow.workflow, azync_flow.activity",
        "from azync_flow import workflow, activity",
    ],
)
def test_workflow_and_activity_are_user_modules_that_decorate(first: str) -> None:
    _run(f"{first}\n{USER_MODULES}")
