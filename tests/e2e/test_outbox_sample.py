"""samples/outbox.py as a user runs it: the committed order's event is
delivered to the shipper, the rolled-back order leaves neither row nor event."""

from __future__ import annotations

import re

from .test_workflow_samples import run_sample, sample_schema

__all__ = ["sample_schema"]


async def test_outbox_sample_ships_the_committed_order_and_leaves_no_trace_of_the_rolled_back_one(
    pg_dsn: str, sample_schema: str
) -> None:
    out = await run_sample(pg_dsn, sample_schema, "outbox.py")
    committed = re.search(r"order (o-\w+-1): committed with event ([0-9a-f-]{36})", out)
    assert committed, out
    order_id, event_id = committed.groups()
    assert re.search(r"order o-\w+-2: transaction rolled back", out), out
    assert f"shipped {order_id} (1999 cents), event {event_id}" in out
    assert f"  {order_id}  shipped by event {event_id}" in out
    assert "-2  shipped" not in out  # the rolled-back order has no row
    assert "committed order: event in the ledger with 1 delivery" in out
    assert "rolled-back order: no row, no event" in out
