"""Search attributes in the workflow store (real PostgreSQL): a start stores
them, a ``SearchAttributesUpserted`` history event merges into them in its own
commit (a null removes a name), and ``list_workflow_executions(where=...)``
returns exactly the executions every filter matches."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from azync_flow.errors import SearchAttributeError
from azync_flow.replay.events import SearchAttributesUpserted, encode_event
from azync_flow.search import SearchAttr, encode_search_attributes
from azync_flow.store.postgres import PostgresStore
from azync_flow.store.workflows import WorkflowStartParams

WHEN = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


async def _start(store: PostgresStore, **attributes: object) -> uuid.UUID:
    params = WorkflowStartParams(
        id=uuid.uuid4(), name="order", input=b"1", search_attributes=dict(attributes)
    )
    assert (await store.start_workflow(params))[0]
    return params.id


async def test_a_start_stores_its_attributes_with_their_types(store: PostgresStore) -> None:
    wid = await _start(store, customer="c-17", amount=4999, ratio=0.25, vip=True, due=WHEN)
    view = await store.get_workflow_execution(wid)
    assert view.search_attributes == {
        "amount": 4999,
        "customer": "c-17",
        "due": WHEN,
        "ratio": 0.25,
        "vip": True,
    }
    assert type(view.search_attributes["ratio"]) is float
    assert type(view.search_attributes["amount"]) is int


async def test_an_upserted_event_merges_into_the_attributes_and_null_removes(
    store: PostgresStore,
) -> None:
    wid = await _start(store, customer="c-17", stage="new")
    attrs = encode_search_attributes({"stage": None, "amount": 12}, allow_unset=True)
    type_name, payload = encode_event(SearchAttributesUpserted(seq=1, attributes=attrs))
    # the statement a commit appends history with (the trigger fires on any insert)
    await store._fetchval("workflow_history_append", wid, type_name, payload)
    view = await store.get_workflow_execution(wid)
    assert view.search_attributes == {"amount": 12, "customer": "c-17"}


async def test_list_where_returns_exactly_the_executions_every_filter_matches(
    store: PostgresStore,
) -> None:
    a = await _start(store, customer="c-17", amount=5000)
    b = await _start(store, customer="c-17", amount=10)
    c = await _start(store, customer="c-18", amount=5000)
    await _start(store)

    async def ids(*where: object) -> set[uuid.UUID]:
        rows = await store.list_workflow_executions(where=list(where), limit=100)  # type: ignore[arg-type]
        return {r.id for r in rows}

    assert await ids(SearchAttr("customer") == "c-17") == {a, b}
    assert await ids(SearchAttr("customer") == "c-17", SearchAttr("amount") > 1000) == {a}
    assert await ids(
        SearchAttr("customer").in_(["c-17", "c-18"]), SearchAttr("amount") >= 5000
    ) == {a, c}
    assert await ids(SearchAttr("customer") != "c-17") == {c}  # no attribute: no match
    assert await ids() == {a, b, c} | {r.id for r in await store.list_workflow_executions()}


async def test_a_bad_start_attribute_is_refused_before_anything_is_written(
    store: PostgresStore,
) -> None:
    with pytest.raises(SearchAttributeError, match="not a search attribute type"):
        await _start(store, tags=["a"])
    assert await store.list_workflow_executions() == []
