"""The hot PL/pgSQL functions plan their statements once per connection.

A ``CREATE OR REPLACE FUNCTION`` drops the function's ``SET`` clauses, so a
migration that replaces one of these without repeating
``plan_cache_mode = force_generic_plan`` would bring back a custom plan, made
anew on every call, for the statements of every pass commit.
"""

from __future__ import annotations

from azync_flow.store.postgres import PostgresStore

HOT = {
    "azync_workflow_pass_commit",
    "azync_workflow_ops_insert",
    "azync_schedule_workflow_task",
    "azync_workflow_children_start",
    "azync_workflow_close_children",
    "azync_workflow_continue",
    "azync_workflow_finish",
    "azync_workflow_finish_run",
    "azync_workflow_notify_parent",
    "azync_workflow_wake_task",
    "azync_job_count",
    "azync_job_settle",
    "azync_limit_admit",
    "azync_publish_event",
    "azync_workflow_task_lease_load",
    "azync_job_lease",
}


async def test_the_hot_functions_use_the_generic_plan(store: PostgresStore) -> None:
    rows = await store.pool.fetch(
        "SELECT p.proname, p.proconfig FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = current_schema() AND p.proname = ANY($1::text[])",
        sorted(HOT),
    )
    assert {r["proname"] for r in rows} == HOT
    missing = sorted(
        r["proname"]
        for r in rows
        if "plan_cache_mode=force_generic_plan" not in (r["proconfig"] or [])
    )
    assert missing == []


async def test_the_due_order_stays_inlinable(store: PostgresStore) -> None:
    """A SET clause would keep the planner from inlining it into the lease
    statements' index expressions."""
    config = await store.pool.fetchval(
        "SELECT p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = current_schema() AND p.proname = 'azync_due_order'"
    )
    assert config is None
