"""What `azync-flow worker APP` / `replay APP` register from a module."""

from __future__ import annotations

import types
from typing import Any

from azync_flow import activity, workflow
from azync_flow.cli._apps import app_parts
from azync_flow.workflow import WorkflowContext


@activity(name="apps_charge")
async def apps_charge(n: int) -> int:
    return n


@workflow(name="apps_order")
async def apps_order(ctx: WorkflowContext, n: int) -> int:
    return await apps_charge(n)


async def send(payload: Any) -> None:
    return None


def module(**attrs: Any) -> types.ModuleType:
    mod = types.ModuleType("shop")
    vars(mod).update(attrs)
    return mod


def test_a_module_with_only_handlers_still_runs_the_workflows_it_defines() -> None:
    parts = app_parts(module(order=apps_order, charge=apps_charge, handlers={"mail": send}))
    assert parts == ([apps_order], [apps_charge], {"mail": send})


def test_a_module_attribute_wins_over_the_definitions_it_holds() -> None:
    mod = module(order=apps_order, charge=apps_charge, workflows=[], handlers={"mail": send})
    assert app_parts(mod) == ([], [apps_charge], {"mail": send})


def test_a_module_without_attributes_registers_every_definition() -> None:
    assert app_parts(module(order=apps_order, charge=apps_charge)) == (
        [apps_order],
        [apps_charge],
        {},
    )
