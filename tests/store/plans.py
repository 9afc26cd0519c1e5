"""Plans of the hot statements as they run: the generic plan a function's
one ``RETURN QUERY`` statement uses under its own settings."""

from __future__ import annotations

import json
import re
from typing import Any

import asyncpg

#: azync_job_lease's arguments for a plain queue kind "k" on "default" (SQL literals).
DEQUEUE_ARGS = [
    "now()",
    "'queue'",
    "'k'",
    "10",
    "'30 seconds'",
    "25",
    "true",
    "'{default}'",
    "'azync_wake'",
]


def scans(plan: Any) -> list[tuple[str, str]]:
    """(node type, index name) of every scan of azync_jobs in a JSON plan (of
    an analysed plan: every scan that ran)."""
    found = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "azync_jobs" and node.get("Actual Loops", 1) > 0:
            found.append((node["Node Type"], node.get("Index Name", "")))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found


async def generic_plan(conn: asyncpg.Connection, function: str, args: list[str]) -> Any:
    """The generic JSON plan of the one statement of a ``RETURN QUERY``
    function, the plan it runs under its settings (``force_generic_plan``): its source
    with each argument made a parameter, prepared, and run for ``args`` (SQL
    literals, one per argument) under ``EXPLAIN ANALYZE``, then rolled back.
    A branch the parameters rule out (a one-time filter) shows 0 loops."""
    src, names, types, config = await conn.fetchrow(
        "SELECT prosrc, proargnames, proargtypes::regtype[]::text[], proconfig FROM pg_proc"
        " WHERE proname = $1 AND pronamespace = current_schema()::regnamespace",
        function,
    )
    body = src[src.index("RETURN QUERY") + len("RETURN QUERY") : src.rindex(";")]
    for i, name in sorted(enumerate(names[: len(types)]), key=lambda n: -len(n[1])):
        body = re.sub(rf"\b{name}\b", f"${i + 1}", body)
    tx = conn.transaction()
    await tx.start()
    try:
        for setting in config:  # the function's own: plan_cache_mode and the like
            name, value = setting.split("=", 1)
            if name != "search_path":
                await conn.execute(f"SET LOCAL {name} = {value}")
        await conn.execute(f"PREPARE generic_plan ({', '.join(types)}) AS {body}")
        plan = await conn.fetchval(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE generic_plan ({', '.join(args)})"
        )
    finally:
        await tx.rollback()
        await conn.execute("DEALLOCATE generic_plan")
    return json.loads(plan)
