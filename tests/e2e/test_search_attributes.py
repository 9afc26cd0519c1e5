"""Search attributes end to end on a real PostgreSQL and a real worker: set at
start, upserted by the code (recorded in history, replayed deterministically),
filtered over 10,000 executions, shown by describe and the CLI, and bad names,
values and filters refused with the product's error on every path."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from azync_flow import activity, workflow
from azync_flow.client import Client
from azync_flow.errors import NonDeterminismError, SearchAttributeError, WorkflowFailedError
from azync_flow.replay import Replayer
from azync_flow.search import SearchAttr, SearchFilter, SearchValue, parse_search_filter
from azync_flow.store.postgres import PostgresStore
from azync_flow.workflow import Registry, WorkflowContext
from tests.e2e.test_cli_commands import Cmd, cmd
from tests.local_runtime import LocalRuntime

__all__ = ["cmd"]

DUE = datetime(2026, 12, 24, 18, 30, tzinfo=UTC)


@activity(name="sa_charge")
def charge(amount: int) -> str:
    return f"charged {amount}"


@workflow(name="sa_order")
async def order(ctx: WorkflowContext, amount: int) -> str:
    ctx.upsert_search_attributes({"stage": "charging", "amount": amount})
    receipt = await charge(amount)
    ctx.upsert_search_attributes({"stage": None, "paid": True, "due": DUE, "ratio": 0.5})
    return receipt


@workflow(name="sa_order", version="no-upsert")
async def order_without_upserts(ctx: WorkflowContext, amount: int) -> str:
    return await charge(amount)


@workflow(name="sa_order", version="other-value")
async def order_other_value(ctx: WorkflowContext, amount: int) -> str:
    ctx.upsert_search_attributes({"stage": "charging", "amount": amount + 1})
    return await charge(amount)


@workflow(name="sa_bad_upsert")
async def bad_upsert(ctx: WorkflowContext, value: Any) -> None:
    ctx.upsert_search_attributes({"when": datetime(2026, 1, 1)})  # noqa: DTZ001 - naive on purpose


@pytest.fixture(params=[1000, 0], ids=["sticky", "full"])
def runtime(request: pytest.FixtureRequest, store: PostgresStore) -> LocalRuntime:
    return LocalRuntime(store, Registry([order, bad_upsert], [charge]), cache_size=request.param)


async def test_start_sets_attributes_the_code_upserts_them_and_describe_shows_the_merge(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    client = Client(store)
    handle = await client.start(order, 4999, search_attributes={"customer": "c-17"})
    assert (await handle.describe()).search_attributes == {"customer": "c-17"}
    await runtime.run_until_idle()
    assert await handle.result(timeout=30) == "charged 4999"
    view = await handle.describe()
    assert view.search_attributes == {
        "amount": 4999,
        "customer": "c-17",
        "due": DUE,
        "paid": True,
        "ratio": 0.5,
    }  # "stage" was set, then removed
    upserts = [e.event for e in await handle.history() if type(e.event).__name__.startswith("S")]
    assert [sorted(u.attributes) for u in upserts] == [  # type: ignore[attr-defined]
        ["amount", "stage"],
        ["due", "paid", "ratio", "stage"],
    ]
    page = await client.list(where=[SearchAttr("customer") == "c-17", SearchAttr("paid") == True])  # noqa: E712
    assert [v.id for v in page.executions] == [handle.id]


async def test_replay_with_the_same_upserts_agrees_and_without_them_is_nondeterminism(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(order, 7)
    await runtime.run_until_idle()
    await handle.result(timeout=30)
    rows = await store.list_history(handle.id)
    data = msgspec.json.encode(7)
    same = Replayer([order]).replay(rows, workflow_name="sa_order", input_bytes=data)
    assert same.ok, same.error
    for changed in (order_without_upserts, order_other_value):
        verdict = Replayer([changed]).replay(rows, workflow_name="sa_order", input_bytes=data)
        assert not verdict.ok
        assert isinstance(verdict.error, NonDeterminismError)
        assert "SearchAttributesUpserted" in str(verdict.error)


async def test_a_bad_upsert_in_workflow_code_fails_the_run_with_the_product_error(
    store: PostgresStore, runtime: LocalRuntime
) -> None:
    handle = await Client(store).start(bad_upsert, None)
    await runtime.run_until_idle()
    with pytest.raises(WorkflowFailedError) as failed:
        await handle.result(timeout=30)
    assert failed.value.error_type == "SearchAttributeError"
    assert "naive" in failed.value.message
    assert (await handle.describe()).search_attributes == {}


def _attrs(i: int) -> dict[str, SearchValue]:
    return {
        "customer": f"c-{i % 100}",
        "amount": i,
        "vip": i % 7 == 0,
        "placed": DUE + timedelta(minutes=i),
        "ratio": i / 10,
    }


async def _all(client: Client, where: list[SearchFilter | str]) -> set[uuid.UUID]:
    got: set[uuid.UUID] = set()
    cursor = None
    while True:
        page = await client.list(where=where, limit=4000, cursor=cursor)
        got |= {v.id for v in page.executions}
        if page.next_cursor is None:
            return got
        cursor = page.next_cursor


async def test_filters_over_ten_thousand_executions_return_exactly_the_right_runs(
    store: PostgresStore,
) -> None:
    client = Client(store)
    n = 10_000
    attrs = [_attrs(i) for i in range(n)]
    handles = await client.start_many(sa_order_name := "sa_order", list(range(n)),
                                      search_attributes=attrs)  # fmt: skip
    assert sa_order_name == "sa_order"
    assert all(h.started for h in handles)
    ids = [h.id for h in handles]
    # what autovacuum does after a bulk insert, without waiting for it: the
    # listing's per-row probes of the jobs table need the planner's statistics
    await store.pool.execute("ANALYZE azync_workflow_executions")
    await store.pool.execute("ANALYZE azync_jobs")
    cases: list[tuple[list[SearchFilter | str], Any]] = [
        ([SearchAttr("customer") == "c-17"], lambda a: a["customer"] == "c-17"),
        (
            ['customer = "c-17"', "amount > 1000"],
            lambda a: a["customer"] == "c-17" and a["amount"] > 1000,
        ),
        (["amount >= 9990"], lambda a: a["amount"] >= 9990),
        (
            [SearchAttr("amount") < 5, SearchAttr("amount") != 3],
            lambda a: a["amount"] < 5 and a["amount"] != 3,
        ),
        (["vip = true", "amount <= 100"], lambda a: a["vip"] and a["amount"] <= 100),
        (
            [SearchAttr("placed") > DUE + timedelta(minutes=9_995)],
            lambda a: a["placed"] > DUE + timedelta(minutes=9_995),
        ),
        (["placed <= 2026-12-24T18:33:00Z"], lambda a: a["placed"] <= DUE + timedelta(minutes=3)),
        (
            ['customer in ("c-1", "c-2")', "ratio > 990.5"],
            lambda a: a["customer"] in ("c-1", "c-2") and a["ratio"] > 990.5,
        ),
        ([SearchAttr("ratio") == 12.5], lambda a: math.isclose(a["ratio"], 12.5)),
        (
            [SearchAttr("amount") == 12.0],
            lambda a: a["amount"] == 12,
        ),  # numbers compare across int/float
        (['amount = "12"'], lambda a: False),  # a keyword never equals a number
        (['customer > "c-98"'], lambda a: a["customer"] > "c-98"),
        (["nobody = 1"], lambda a: False),
    ]
    for where, expect in cases:
        want = {ids[i] for i, a in enumerate(attrs) if expect(a)}
        assert await _all(client, where) == want, where
    # every execution matches a broad filter (one page of 50 checked: the ids are all known)
    page = await client.list(where=["amount >= 0"])
    assert len(page.executions) == 50
    assert page.next_cursor is not None
    assert {v.id for v in page.executions} <= set(ids)


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"": 1}, "must not be empty"),
        ({"a\x00b": 1}, "NUL"),
        ({"x" * 256: 1}, "at most 255"),
        ({"tags": ["a", "b"]}, "list"),
        ({"note": None}, "None only removes"),
        ({"when": datetime(2026, 1, 1)}, "naive"),  # noqa: DTZ001
        ({"ratio": math.nan}, "not finite"),
        ({"big": 2**70}, "64-bit"),
        ({"k": "x" * 1025}, "at most 1024"),
    ],
)
async def test_bad_names_and_values_are_refused_at_start_and_nothing_is_written(
    store: PostgresStore, attributes: dict[str, Any], message: str
) -> None:
    client = Client(store)
    with pytest.raises(SearchAttributeError, match=message):
        await client.start("sa_order", 1, search_attributes=attributes)
    with pytest.raises(SearchAttributeError, match=message):
        await client.start_many("sa_order", [1, 2], search_attributes=attributes)
    assert (await client.list()).executions == []


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("amount ~ 3", "cannot read search filter"),
        ("amount > c-17", "quote a keyword"),
        ("vip < true", "only with = != in"),
        ("customer in ()", "at least one value"),
        ('"" = 1', "must not be empty"),
    ],
)
async def test_bad_filters_are_refused_with_the_product_error(
    store: PostgresStore, where: str, message: str
) -> None:
    with pytest.raises(SearchAttributeError, match=message):
        await Client(store).list(where=[where])
    with pytest.raises(SearchAttributeError, match=message):
        parse_search_filter(where)


async def test_cli_starts_with_attributes_filters_with_where_and_shows_them(
    cmd: Cmd, store: PostgresStore
) -> None:
    a = await cmd("workflows", "start", "sa_order", "--input", "1", "--search-attr",
                  "customer=c-17", "--search-attr", "amount=4999", "--search-attr",
                  "due=2026-12-24T18:30:00Z", "--json")  # fmt: skip
    assert a.code == 0, a.err
    b = await cmd("workflows", "start", "sa_order", "--input", "2", "--search-attr",
                  "customer=c-18", "--search-attr", "amount=10", "--json")  # fmt: skip
    assert b.code == 0, b.err
    first = a.json["id"]
    got = await cmd("workflows", "list", "--where", 'customer = "c-17"', "--where",
                    "amount > 1000", "--json")  # fmt: skip
    assert got.code == 0, got.err
    items = got.json["items"] if isinstance(got.json, dict) else got.json
    assert [i["id"] for i in items] == [first]
    assert items[0]["search_attributes"]["amount"] == 4999
    shown = await cmd("workflows", "show", first)
    assert 'customer="c-17"' in shown.out
    assert "amount=4999" in shown.out
    assert "due=2026-12-24T18:30:00Z" in shown.out
    view = await Client(store).get_handle(first).describe()
    assert view.search_attributes["due"] == DUE
    for argv in (
        ("workflows", "list", "--where", "amount >> 3"),
        ("workflows", "start", "sa_order", "--search-attr", "=3"),
        ("workflows", "start", "sa_order", "--search-attr", "nothing"),
    ):
        bad = await cmd(*argv)
        assert bad.code == 2, (argv, bad.out, bad.err)
        (line,) = bad.err.strip().splitlines()
        assert line.startswith("azync-flow: error: ")
        assert "search_attribute" in line
