"""The console in a real browser: `azync-flow ui` served by real uvicorn
processes (one with an access token, one without) over a schema a real worker
runs, driven by Debian's Chromium through Playwright.

One world, two servers and one browser per module; tests that act start
their own runs, so no test depends on another's leftovers. Screenshots go to
``test-artifacts/console/`` (gitignored)."""

from __future__ import annotations

import json
import os
import shutil
import urllib.parse
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from opentelemetry.trace import NoOpTracerProvider
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from azync_flow import Client
from azync_flow.console import ACTIONS, AUDIT_EVENT
from azync_flow.errors import WorkflowCancelledError, WorkflowFailedError
from azync_flow.schedules import Interval, ScheduleClient, ScheduleSpec, StartWorkflow
from azync_flow.store import Config
from azync_flow.store.events import EventFilter
from azync_flow.store.postgres import PostgresStore, open_store
from azync_flow.store.queue import EnqueueParams, JobState, Source
from azync_flow.telemetry import run_trace_id
from azync_flow.testing import drop_schema, unique_schema

from . import world as w
from .ui_process import UiProcess, start_ui

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"
TOKEN = "s3cret-console-token"
TRACE = "http://jaeger.example/trace/{trace_id}"
#: Debian's Chromium (.ci/run installs it), else one on the PATH.
CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")


@dataclass
class Env:
    store: PostgresStore
    world: w.World
    url: str  # the console started with a token (actions on)
    readonly_url: str  # the console started without one


@pytest_asyncio.fixture(scope="module")
async def env(azync_dsn: str) -> AsyncIterator[Env]:
    schema = unique_schema("console")
    store = await open_store(azync_dsn, Config(schema=schema), migrate=True)
    ui = {k: v for k, v in os.environ.items() if k != "AZYNC_UI_TOKEN"}
    servers: list[UiProcess] = []
    try:
        # the servers start while the worker seeds the schema
        servers.append(await start_ui(azync_dsn, schema, "--trace-url", TRACE,
                                      env={**ui, "AZYNC_UI_TOKEN": TOKEN}))  # fmt: skip
        servers.append(await start_ui(azync_dsn, schema, env=ui))
        async with w.make_worker(store):
            world = await w.seed(store)
            url, readonly_url = [await s.ready() for s in servers]
            yield Env(store, world, url, readonly_url)
    finally:
        for server in servers:
            await server.stop()
        await store.close()
        await drop_schema(azync_dsn, schema)


@pytest_asyncio.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert CHROMIUM, "Chromium is missing: apt-get install chromium (.ci/run does)"
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        await b.close()


@pytest_asyncio.fixture(scope="module")
async def operator(env: Env, browser: Browser) -> AsyncIterator[BrowserContext]:
    """A browser context signed in as ``ann``."""
    ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
    page = await ctx.new_page()
    await page.goto(env.url + "/login")
    await page.fill("input[name=who]", "ann")
    await page.fill("input[name=token]", TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_selector("text=signed in as")
    await page.close()
    yield ctx
    await ctx.close()


class Watched:
    """A page that records dialogs (an injected ``alert`` would open one)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        page.on("dialog", self._dialog)

    async def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        await dialog.dismiss()


@pytest_asyncio.fixture
async def anon(browser: Browser) -> AsyncIterator[Page]:
    ctx = await browser.new_context(viewport={"width": 1300, "height": 900})
    page = await ctx.new_page()
    yield page
    await ctx.close()


@pytest_asyncio.fixture
async def signed_in(operator: BrowserContext) -> AsyncIterator[Page]:
    page = await operator.new_page()
    yield page
    await page.close()


async def shot(page: Page, name: str) -> None:
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def texts(page: Page, selector: str) -> list[str]:
    return [t.strip() for t in await page.locator(selector).all_inner_texts()]


async def fresh_order(store: PostgresStore, **extra: Any) -> uuid.UUID:
    """A new order parked on its ``approve`` wait (its charge succeeds at once)."""
    oid = f"T-{uuid.uuid4().hex[:8]}"
    w.CHARGES[oid] = 2
    wid = (await Client(store).start("order", {"id": oid, **extra})).id

    async def parked() -> bool:
        return bool((await Client(store).get_handle(wid).describe()).awaited_signals)

    await w.wait_for(parked, f"order {oid} waits for its signal")
    return wid


async def _review(page: Page, label: str, reason: str, **fields: str) -> None:
    """Open the action ``label`` on the page, fill it, and submit it for review."""
    box = page.locator("details.action", has=page.locator(f"summary:text-is('{label}…')"))
    await box.locator("summary").click()
    for name, value in fields.items():
        await box.locator(f"[name={name}]").fill(value)
    await box.locator("input[name=reason]").fill(reason)
    await box.locator("button[type=submit]").click()
    await page.wait_for_selector("#confirm, .problem")


async def act(page: Page, label: str, reason: str, **fields: str) -> None:
    """Open the action ``label`` on the page, fill it, review, confirm."""
    await _review(page, label, reason, **fields)
    await page.click("#confirm")
    await page.wait_for_selector(".notice")


async def refused(page: Page, label: str, reason: str, **fields: str) -> str:
    """As :func:`act` for an action the console refuses (at review, or at
    confirm when only running it can tell): the problem it shows."""
    await _review(page, label, reason, **fields)
    if await page.locator(".problem").count() == 0:
        await page.click("#confirm")
        await page.wait_for_selector(".problem")
    return await page.inner_text(".problem")


async def summaries(page: Page) -> list[str]:
    """The labels of the actions the page offers."""
    return [t.removesuffix("…") for t in await texts(page, "#actions details.action > summary")]


async def audit_records(store: PostgresStore, target: str, verb: str) -> list[dict[str, Any]]:
    """The ledger's records of the console action ``verb`` on ``target``
    (published before the action's page answers: no wait needed)."""
    rows, _ = await store.list_events(EventFilter(type=AUDIT_EVENT), 0, 500)
    records = [json.loads(e.payload) for e in rows]
    return [dict(r) for r in records if r["target"] == target and r["verb"] == verb]


async def audited(store: PostgresStore, target: str, verb: str) -> dict[str, Any]:
    """The one ledger record of the console action ``verb`` on ``target``."""
    (record,) = await audit_records(store, target, verb)
    return record


# --- pages ----------------------------------------------------------------------------


async def test_the_overview_shows_states_queues_and_what_needs_a_person(
    env: Env, anon: Page
) -> None:
    await anon.goto(env.url + "/")
    running = await anon.inner_text(".count[data-state=running] b")
    assert int(running) >= 2
    assert "payment" in await anon.inner_text("#panels")  # the uncertain operation
    assert "nightly-report" in await anon.inner_text("#panels")  # a schedule and its next fire
    assert "mailer" in await anon.inner_text("#panels")  # subscriber lag
    queues = await anon.inner_text("#queues")
    assert "mail.send" in queues
    today = {r.split("\t")[0]: r.split("\t")[1:] for r in await texts(anon, "#today tr")}
    assert int(today["queue"][2]) >= 1  # the mail job that died counts as failed today
    await shot(anon, "overview")


async def test_the_overview_lists_a_run_no_live_worker_serves_as_blocked(
    env: Env, anon: Page
) -> None:
    orphan = await Client(env.store).start("console_no_such_workflow", None)
    try:
        await anon.goto(env.url + "/")
        blocked = anon.locator("#panels li", has_text=str(orphan.id))
        await expect(blocked).to_contain_text(
            "no live worker serves workflow 'console_no_such_workflow' on task queue 'default'"
        )
        panels = await anon.inner_text("#panels")
        assert "Nothing: no uncertain operation" not in panels
    finally:
        await orphan.terminate(reason="test over")


async def test_the_overview_refreshes_itself_when_a_run_starts(env: Env, anon: Page) -> None:
    async def total() -> int:  # executions are only ever added here: the sum only grows
        return sum(int(n) for n in await texts(anon, ".count[data-state] b"))

    await anon.goto(env.url + "/")
    await anon.evaluate("window.__loaded_once = true")
    before = await total()
    await fresh_order(env.store)

    async def counted() -> bool:  # no page.wait_for_function: the console's CSP forbids eval
        return await total() > before

    await w.wait_for(counted, "the overview counts the new execution")
    assert await anon.evaluate("window.__loaded_once") is True  # swapped in, not reloaded


async def test_executions_filter_by_state_workflow_key_time_and_id(env: Env, anon: Page) -> None:
    world = env.world
    await anon.goto(env.url + "/executions?state=suspended")
    assert str(world.uncertain) in await anon.inner_text("#executions")
    assert str(world.waiting) not in await anon.inner_text("#executions")
    await anon.goto(env.url + "/executions?name=billing")
    rows = await texts(anon, "#executions tr td:nth-child(2)")
    assert rows
    assert all(r.startswith("billing") for r in rows)
    await anon.goto(env.url + "/executions?key=order-A-2")
    assert await texts(anon, "#executions td.id a.exec") == [str(world.done)]
    await anon.goto(env.url + "/executions?since=2099-01-01T00:00")
    assert "No executions match" in await anon.inner_text("#executions")
    await anon.goto(env.url + "/executions?since=1h")
    assert str(world.waiting) in await anon.inner_text("#executions")
    await anon.goto(env.url + f"/executions?id={world.billing}")
    assert anon.url.endswith(f"/executions/{world.billing}")
    await anon.goto(env.url + "/executions?state=nonsense")
    assert "unknown state" in await anon.inner_text(".problem")
    await shot(anon, "executions-bad-filter")


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("since=garbage", "since 'garbage' is neither an ISO time"),
        ("until=3x", "until '3x' is neither an ISO time"),
        ("limit=abc", "limit 'abc' is not a whole number from 1 to 500"),
        ("limit=-1", "limit '-1' is not a whole number from 1 to 500"),
        ("limit=0", "limit '0' is not a whole number from 1 to 500"),
        ("limit=501", "limit '501' is not a whole number from 1 to 500"),
    ],
)
async def test_a_bad_executions_filter_is_refused_not_ignored(
    env: Env, anon: Page, query: str, problem: str
) -> None:
    response = await anon.goto(env.url + "/executions?" + query)
    assert response is not None
    assert response.status == 400
    assert problem in await anon.inner_text(".problem")
    limited = await anon.goto(env.url + "/executions?limit=1")
    assert limited is not None
    assert limited.status == 200
    assert len(await texts(anon, "#executions td.id a.exec")) == 1


async def test_executions_filter_by_search_attributes(env: Env, anon: Page) -> None:
    client = Client(env.store)
    tag = uuid.uuid4().hex[:8]
    big = await client.start("sa_console", {}, search_attributes={"tag": tag, "amount": 5000})
    await client.start("sa_console", {}, search_attributes={"tag": tag, "amount": 10})
    where = f'tag = "{tag}" and amount > 1000'
    await anon.goto(env.url + "/executions?" + urllib.parse.urlencode({"where": where}))
    assert await texts(anon, "#executions td.id a.exec") == [str(big.id)]
    assert await anon.input_value("input[name=where]") == where
    await anon.goto(env.url + "/executions?where=amount+%7E+3")
    assert "cannot read search filter" in await anon.inner_text(".problem")


async def test_executions_page_by_keyset_without_overlap(env: Env, anon: Page) -> None:
    await anon.goto(env.url + "/executions?limit=2")
    first = await texts(anon, "#executions td.id a.exec")
    await anon.click("#next-page")
    second = await texts(anon, "#executions td.id a.exec")
    assert len(first) == 2
    assert second
    assert not set(first) & set(second)
    await shot(anon, "executions")


async def test_an_execution_shows_what_it_waits_for_and_its_timeline(env: Env, anon: Page) -> None:
    world = env.world
    await anon.goto(env.url + f"/executions/{world.waiting}")
    waiting = await anon.inner_text("#waiting")
    assert "signal approve" in waiting
    assert "timer #" in waiting
    assert "due" in waiting
    timeline = anon.locator("svg#timeline")
    await expect(timeline.locator("rect.bar-failed")).to_have_count(2)  # two failed charges
    assert await timeline.locator("rect.bar-succeeded").count() >= 2
    assert await timeline.locator("line.gap-backoff").count() >= 2  # the backoff gaps
    await expect(timeline.locator("path.mark-waiting")).to_have_count(1)
    await expect(timeline.locator("path.mark-update")).to_have_count(1)  # the address update
    await expect(timeline.locator("rect.bar-update")).to_have_count(1)  # its handler's run
    titles = await timeline.locator("rect.bar-failed title").all_text_contents()
    assert any("bank busy (try 1)" in t for t in titles)
    history = await anon.inner_text("#history")
    assert "ActivityScheduled" in history
    assert "TimerStarted" in history
    link = await anon.get_attribute("#trace-link", "href")
    assert link is not None
    assert link.startswith("http://jaeger.example/trace/")
    assert len(link.rsplit("/", 1)[1]) == 32
    assert '"sku": "mug"' in await anon.inner_text("#input")
    await shot(anon, "execution-waiting")


async def test_an_execution_shows_its_runs_children_and_parent(env: Env, anon: Page) -> None:
    world = env.world
    await anon.goto(env.url + f"/executions/{world.billing}")
    assert len(await texts(anon, "#runs tr td:first-child")) == 3
    await anon.click("#runs a >> text='1'")
    assert "1 of 3" in await anon.inner_text("dl.fields")
    await anon.goto(env.url + f"/executions/{world.done}")
    assert "ship_parcel" in await anon.inner_text("#children")
    assert '"approved_by": "ann"' in await anon.inner_text("#result")
    await shot(anon, "execution-done")
    await anon.click("#children td.id a")
    assert await anon.inner_text("#parent-link") == str(world.done)


async def test_a_dag_run_draws_its_graph_and_its_compensations_in_order(
    env: Env, anon: Page
) -> None:
    await anon.goto(env.url + f"/dags/{env.world.dag}")
    graph = anon.locator("svg#dag-graph")
    assert await graph.locator("g[data-key=ship]").get_attribute("data-state") == "dead"
    assert await graph.locator("g[data-key=reserve]").get_attribute("data-state") == "succeeded"
    labels = await graph.locator("g.node text.node-label").all_text_contents()
    assert [t for t in labels if t[:2] in ("1.", "2.")] == ["1. comp:charge", "2. comp:reserve"]
    assert "carrier API unreachable" in await anon.inner_text("#failure-reason")
    await shot(anon, "dag")
    await anon.goto(env.url + "/dags?state=failed")
    assert str(env.world.dag) in await anon.inner_text("#dags")


async def test_schedules_show_next_fires_in_local_time_and_utc(env: Env, anon: Page) -> None:
    await anon.goto(env.url + "/schedules")
    card = anon.locator("#s-nightly-report")
    fires = await card.locator("table.next-fires").inner_text()
    assert "01:30:00 CE" in fires  # CET or CEST, the schedule's zone
    assert ":30:00" in fires.split("\n")[1].split("\t")[-1]  # the same fire in UTC
    assert "the nightly report" in await card.inner_text()
    await shot(anon, "schedules")


async def test_dead_letters_and_a_job_with_its_attempts(env: Env, anon: Page) -> None:
    await anon.goto(env.url + "/jobs?source=queue&state=dead")
    assert str(env.world.dead_job) in await anon.inner_text("#jobs")
    await anon.click(f"a >> text='{env.world.dead_job}'")
    assert "SMTP refused the message" in await anon.inner_text("main")
    await shot(anon, "dead-job")


async def test_events_show_deliveries_and_subscriber_lag(env: Env, anon: Page) -> None:
    await anon.goto(env.url + "/events")
    subscribers = await anon.inner_text("#subscribers")
    assert "mailer" in subscribers
    assert "ledger" in subscribers
    await anon.click(f"a >> text='{env.world.event}'")
    deliveries = await texts(anon, "#deliveries tr td:first-child")
    assert sorted(deliveries) == ["ledger", "mailer"]
    await shot(anon, "event")


async def test_uncertain_operations_are_listed_with_their_execution(env: Env, anon: Page) -> None:
    await anon.goto(env.url + "/uncertain")
    table = await anon.inner_text("#uncertain")
    assert "settle_payment" in table
    assert "provider timed out" in table


async def test_an_uncertain_attempt_waiting_for_a_decision_is_drawn_only_as_uncertain(
    env: Env, anon: Page
) -> None:
    # the hook's "unknown" verdict is a row of the attempt log too: a note, not an attempt
    await anon.goto(env.url + f"/executions/{env.world.uncertain}")
    timeline = anon.locator("svg#timeline")
    await expect(timeline.locator("rect.bar-uncertain")).to_have_count(1)
    await expect(timeline.locator("rect.bar-failed")).to_have_count(0)
    await expect(timeline.locator("rect.bar-dead")).to_have_count(0)
    title = await timeline.locator("rect.bar-uncertain title").text_content()
    assert title is not None
    assert "settle_payment attempt 1: uncertain" in title
    assert "waiting for a decision" in title
    await shot(anon, "execution-uncertain-timeline")


async def test_an_uncertain_operation_shows_its_execution_key_and_the_hooks_verdict(
    env: Env, anon: Page
) -> None:
    wid = env.world.uncertain
    (op,) = await Client(env.store).list_uncertain(workflow_id=wid)
    await anon.goto(env.url + f"/executions/{wid}")
    card = anon.locator(".uncertain-op")
    await expect(card.locator(".execution-key")).to_have_text(op.execution_key)
    assert op.execution_key.startswith(f"{wid}/")
    await expect(card.locator(".reconcile-verdict")).to_have_text(f"unknown: {w.PSP_DOWN}")


async def test_a_run_without_a_trace_context_links_the_trace_derived_from_its_id(
    env: Env, anon: Page
) -> None:
    untraced = Client(env.store, tracer_provider=NoOpTracerProvider())
    wid = (await untraced.start("ship_parcel", "U-1")).id
    (row,) = await env.store.console_rows("console_trace_context", wid)
    assert "traceparent" not in (row["trace_context"] or "")  # nothing was recorded
    derived = f"{run_trace_id(wid):032x}"
    await anon.goto(env.url + f"/executions/{wid}")
    link = anon.locator("#trace-link")
    await expect(link).to_have_text(derived)
    await expect(link).to_have_attribute("href", TRACE.replace("{trace_id}", derived))
    await expect(anon.locator("#trace-derived")).to_contain_text("derived from the execution id")
    await anon.goto(env.readonly_url + f"/executions/{wid}")  # no --trace-url: the id, unlinked
    await expect(anon.locator("#trace")).to_contain_text(derived)
    await expect(anon.locator("#trace-link")).to_have_count(0)
    # a run started with a trace context shows that one, not a derived id
    await anon.goto(env.url + f"/executions/{env.world.waiting}")
    await expect(anon.locator("#trace-link")).not_to_have_text(
        f"{run_trace_id(env.world.waiting):032x}"
    )
    await expect(anon.locator("#trace-derived")).to_have_count(0)


# --- actions with the token -------------------------------------------------------------


async def test_a_signed_in_person_signals_and_the_run_finishes(env: Env, signed_in: Page) -> None:
    wid = await fresh_order(env.store)
    await signed_in.goto(env.url + f"/executions/{wid}")
    await act(signed_in, "Signal", "customer approved by phone", signal_name="approve",
              payload='"bob"')  # fmt: skip
    assert "accepted" in await signed_in.inner_text(".notice")
    result = await Client(env.store).get_handle(wid).result(timeout=30)
    assert result["approved_by"] == "bob"
    record = await audited(env.store, str(wid), "workflow.signal")
    assert record["by"] == "ann"
    assert record["reason"] == "customer approved by phone"


async def test_cancel_asks_the_code_to_stop(env: Env, signed_in: Page) -> None:
    wid = await fresh_order(env.store)
    await signed_in.goto(env.url + f"/executions/{wid}")
    await act(signed_in, "Cancel", "duplicate order")
    with pytest.raises(WorkflowCancelledError):
        await Client(env.store).get_handle(wid).result(timeout=30)
    assert (await audited(env.store, str(wid), "workflow.cancel"))["reason"] == "duplicate order"


async def test_terminate_records_who_and_why_on_the_run(env: Env, signed_in: Page) -> None:
    wid = await fresh_order(env.store)
    await signed_in.goto(env.url + f"/executions/{wid}")
    await act(signed_in, "Terminate", "stuck after a bad deploy")
    view = await Client(env.store).get_handle(wid).describe()
    assert view.state == "terminated"
    assert "stuck after a bad deploy" in view.failure_reason
    history = await signed_in.inner_text("#history")
    assert "WorkflowTerminated" in history
    assert "ann" in history
    await shot(signed_in, "execution-terminated")


async def test_resume_runs_a_suspended_execution_again(env: Env, signed_in: Page) -> None:
    wid = await fresh_order(env.store)
    # suspended as the runtime leaves a run it cannot move (a reap limit, a
    # non-determinism): no pass runs until resumed
    await env.store.pool.execute(
        "UPDATE azync_workflow_executions SET state = 'suspended',"
        " suspend_reason = 'held by an operator' WHERE id = $1",
        wid,
    )
    await signed_in.goto(env.url + f"/executions/{wid}")
    await act(signed_in, "Resume", "the hold is over")
    assert await w.state_of(env.store, wid) == "running"
    handle = Client(env.store).get_handle(wid)
    await handle.signal("approve", "cy")
    assert (await handle.result(timeout=30))["approved_by"] == "cy"  # a worker ran it on


async def test_an_execution_offers_only_the_actions_its_state_allows(
    env: Env, signed_in: Page
) -> None:
    wid = await fresh_order(env.store)
    await signed_in.goto(env.url + f"/executions/{wid}")
    assert await summaries(signed_in) == ["Signal", "Cancel", "Terminate", "Suspend",
                                          "Complete execution", "Fail execution"]  # fmt: skip
    await Client(env.store).get_handle(wid).suspend("held for the test")
    await signed_in.goto(env.url + f"/executions/{wid}")
    assert await summaries(signed_in) == ["Signal", "Cancel", "Terminate", "Resume",
                                          "Complete execution", "Fail execution"]  # fmt: skip
    await signed_in.goto(env.url + f"/executions/{env.world.done}")  # finished: nothing to do
    assert await signed_in.locator("details.action").count() == 0
    # suspended on an uncertain operation: a decision resumes it, not Resume
    await signed_in.goto(env.url + f"/executions/{env.world.uncertain}")
    assert "Resume" not in await summaries(signed_in)


async def test_suspend_holds_the_run_and_resume_lets_a_worker_finish_it(
    env: Env, signed_in: Page
) -> None:
    wid = await fresh_order(env.store)
    handle = Client(env.store).get_handle(wid)
    await signed_in.goto(env.url + f"/executions/{wid}")
    await act(signed_in, "Suspend", "vendor outage")
    assert "suspended" in await signed_in.inner_text(".notice")
    view = await handle.describe()
    assert view.state == "suspended"
    assert view.suspend_reason == "suspended by an operator: vendor outage (by ann)"
    assert "vendor outage (by ann)" in await signed_in.inner_text("dl.fields")
    record = await audited(env.store, str(wid), "workflow.suspend")
    assert (record["by"], record["reason"]) == ("ann", "vendor outage")
    await handle.signal("approve", "dee")  # kept while suspended
    assert await w.state_of(env.store, wid) == "suspended"
    await shot(signed_in, "execution-suspended")
    await act(signed_in, "Resume", "outage over")
    # the real worker runs it on, with the signal sent while it was held
    result = await handle.result(timeout=30)
    assert result["approved_by"] == "dee"
    assert (await audited(env.store, str(wid), "workflow.resume"))["reason"] == "outage over"


async def test_complete_closes_the_run_as_succeeded_with_the_json_result(
    env: Env, signed_in: Page
) -> None:
    wid = await fresh_order(env.store)
    handle = Client(env.store).get_handle(wid)
    await signed_in.goto(env.url + f"/executions/{wid}")
    await act(signed_in, "Complete execution", "paid by hand",
              result='{"paid": true, "amount": 12.5, "items": [1, null]}')  # fmt: skip
    assert await handle.result(timeout=30) == {"paid": True, "amount": 12.5, "items": [1, None]}
    assert (await handle.describe()).state == "succeeded"
    (closed,) = [h.event for h in await handle.history()
                 if type(h.event).__name__ == "WorkflowClosedByOperator"]  # fmt: skip
    assert (closed.outcome, closed.reason, closed.closed_by) == ("succeeded", "paid by hand", "ann")
    assert '"paid": true' in await signed_in.inner_text("#result")
    assert await signed_in.locator("#actions").count() == 0  # finished: no more actions
    record = await audited(env.store, str(wid), "workflow.complete")
    assert (record["by"], record["reason"]) == ("ann", "paid by hand")


async def test_fail_closes_a_suspended_run_as_failed_by_who_and_why(
    env: Env, signed_in: Page
) -> None:
    wid = await fresh_order(env.store)
    handle = Client(env.store).get_handle(wid)
    await handle.suspend("waiting for the customer")
    await signed_in.goto(env.url + f"/executions/{wid}")
    await act(signed_in, "Fail execution", "order voided")
    with pytest.raises(WorkflowFailedError, match="failed by ann: order voided"):
        await handle.result(timeout=30)
    assert (await handle.describe()).state == "failed"
    assert "WorkflowClosedByOperator" in await signed_in.inner_text("#history")
    assert (await audited(env.store, str(wid), "workflow.fail"))["by"] == "ann"


async def _unchanged(store: PostgresStore, wid: uuid.UUID, state: str, events: int) -> None:
    """The run is as it was: same state, same history, no console action recorded."""
    handle = Client(store).get_handle(wid)
    assert (await handle.describe()).state == state
    assert len(await handle.history()) == events
    for verb in ("workflow.suspend", "workflow.complete", "workflow.fail", "workflow.resume"):
        assert await audit_records(store, str(wid), verb) == [], verb


async def test_a_result_that_is_not_json_is_refused_and_nothing_is_written(
    env: Env, signed_in: Page
) -> None:
    wid = await fresh_order(env.store)
    events = len(await Client(env.store).get_handle(wid).history())
    await signed_in.goto(env.url + f"/executions/{wid}")
    problem = await refused(signed_in, "Complete execution", "paid", result='{"paid": tru')
    assert "result is not valid JSON" in problem
    assert await signed_in.locator("#confirm").count() == 0  # refused at review already
    await signed_in.goto(env.url + f"/executions/{wid}")
    problem = await refused(signed_in, "Complete execution", "paid", result="NaN")
    assert "NaN" in problem
    await shot(signed_in, "execution-complete-bad-json")
    await _unchanged(env.store, wid, "running", events)


async def test_an_empty_reason_is_refused_and_nothing_is_written(env: Env, signed_in: Page) -> None:
    wid = await fresh_order(env.store)
    events = len(await Client(env.store).get_handle(wid).history())
    for label, fields in (("Suspend", {}), ("Complete execution", {"result": "1"}),
                          ("Fail execution", {})):  # fmt: skip
        await signed_in.goto(env.url + f"/executions/{wid}")
        problem = await refused(signed_in, label, "   ", **fields)
        assert "say why" in problem, label
        assert await signed_in.locator("#confirm").count() == 0, label
    await _unchanged(env.store, wid, "running", events)
    assert (await Client(env.store).get_handle(wid).describe()).suspend_reason == ""


async def test_an_action_the_state_no_longer_allows_is_refused_and_nothing_is_written(
    env: Env, operator: BrowserContext, signed_in: Page
) -> None:
    held = await fresh_order(env.store)
    await signed_in.goto(env.url + f"/executions/{held}")  # the form is loaded while it runs
    await Client(env.store).get_handle(held).suspend("held elsewhere")
    events = len(await Client(env.store).get_handle(held).history())
    problem = await refused(signed_in, "Suspend", "vendor outage")
    assert f"workflow execution {held} is suspended" in problem
    await _unchanged(env.store, held, "suspended", events)
    view = await Client(env.store).get_handle(held).describe()
    assert view.suspend_reason == "suspended by an operator: held elsewhere"

    ended = await fresh_order(env.store)
    second = await operator.new_page()
    try:
        for page in (signed_in, second):  # both forms loaded while it runs
            await page.goto(env.url + f"/executions/{ended}")
        await Client(env.store).get_handle(ended).terminate("ended elsewhere")
        events = len(await Client(env.store).get_handle(ended).history())
        problem = await refused(signed_in, "Complete execution", "too late", result='"done"')
        assert f"workflow execution {ended} is terminated" in problem
        problem = await refused(second, "Fail execution", "too late")
        assert f"workflow execution {ended} is terminated" in problem
    finally:
        await second.close()
    await _unchanged(env.store, ended, "terminated", events)


async def test_deciding_an_uncertain_operation_completes_the_run(env: Env, signed_in: Page) -> None:
    wid = (await Client(env.store).start("payment", "P-2")).id
    await w.wait_for(lambda: w._is(env.store, wid, "suspended"), "the payment parks")
    (op,) = await Client(env.store).list_uncertain(workflow_id=wid)
    await signed_in.goto(env.url + f"/executions/{wid}")
    await shot(signed_in, "execution-uncertain")
    await act(signed_in, "Complete", "the bank statement shows it", result='"settled-P-2"')
    result = await Client(env.store).get_handle(wid).result(timeout=30)
    assert result == "settled-P-2"
    record = await audited(env.store, str(op.operation_id), "uncertain.resolve")
    assert record["decision"] == "complete"
    assert record["by"] == "ann"
    stored = await env.store.get_operation(op.operation_id)
    assert stored.state == "succeeded"


async def test_failing_or_retrying_an_uncertain_operation(env: Env, signed_in: Page) -> None:
    client = Client(env.store)
    failed = (await client.start("payment", "P-3")).id
    retried = (await client.start("payment", "P-4")).id
    for wid in (failed, retried):
        await w.wait_for(lambda wid=wid: w._is(env.store, wid, "suspended"), "the payment parks")
    await signed_in.goto(env.url + f"/executions/{failed}")
    await act(signed_in, "Fail", "the bank has no trace of it", error="never charged")
    with pytest.raises(WorkflowFailedError):
        await client.get_handle(failed).result(timeout=30)
    assert "never charged" in (await client.get_handle(failed).describe()).failure_reason
    await signed_in.goto(env.url + f"/executions/{retried}")
    await act(signed_in, "Retry", "the provider asks us to send it again")

    async def parked_again() -> bool:
        history = await client.get_handle(retried).history()
        kinds = [type(h.event).__name__ for h in history]
        return kinds.count("OperationUncertain") == 2  # it ran again and parked again

    await w.wait_for(parked_again, "the retried operation runs again")
    await signed_in.goto(env.url + f"/executions/{retried}")
    assert "OperationResolved" in await signed_in.inner_text("#history")


async def test_retrying_a_dead_job_runs_it_again(env: Env, signed_in: Page) -> None:
    job = uuid.uuid4()
    await env.store.enqueue(EnqueueParams(id=job, kind="mail.send", payload=b'{"to": "bo"}'))
    await w.wait_for(lambda: w._dead(env.store, job), "the job dies")
    w.MAIL_OK["ok"] = True
    try:
        await signed_in.goto(env.url + f"/jobs/queue/{job}")
        await act(signed_in, "Retry", "the SMTP relay is back")

        async def succeeded() -> bool:
            return (await env.store.get_job(Source.QUEUE, job)).state == JobState.SUCCEEDED

        await w.wait_for(succeeded, "the retried job succeeds")
    finally:
        w.MAIL_OK["ok"] = False
    assert (await audited(env.store, str(job), "job.retry"))["source"] == "queue"


async def test_schedules_pause_unpause_and_trigger(env: Env, signed_in: Page) -> None:
    sid = f"tmp-{uuid.uuid4().hex[:6]}"
    schedules = ScheduleClient(env.store)
    await schedules.create(sid, ScheduleSpec(intervals=(Interval(every=timedelta(hours=1)),)),
                           StartWorkflow.of("billing", 3))  # fmt: skip
    await signed_in.goto(env.url + "/schedules")
    await _act_in(signed_in, f"#s-{sid}", "Pause", "maintenance window")
    assert (await schedules.describe(sid)).paused
    assert "maintenance window (by ann)" in (await schedules.describe(sid)).note
    await _act_in(signed_in, f"#s-{sid}", "Unpause", "window over")
    assert not (await schedules.describe(sid)).paused
    await _act_in(signed_in, f"#s-{sid}", "Trigger now", "month-end run")
    assert "triggered" in await signed_in.inner_text(".notice")
    assert (await audited(env.store, sid, "schedule.trigger"))["by"] == "ann"


async def _act_in(page: Page, scope: str, label: str, reason: str) -> None:
    box = page.locator(f"{scope} details.action", has=page.locator(f"summary:text-is('{label}…')"))
    await box.locator("summary").click()
    await box.locator("input[name=reason]").fill(reason)
    await box.locator("button[type=submit]").click()
    await page.wait_for_selector("#confirm")
    await page.click("#confirm")
    await page.wait_for_selector(".notice")


# --- no action without the token ----------------------------------------------------------


async def test_without_signing_in_there_are_no_actions_and_posts_are_refused(
    env: Env, anon: Page
) -> None:
    wid = env.world.waiting
    await anon.goto(env.url + f"/executions/{wid}")
    assert await anon.locator("details.action").count() == 0
    assert await anon.locator("a[href='/login']").count() == 1
    response = await anon.request.post(
        env.url + "/act/workflow.cancel",
        form={"target": str(wid), "reason": "x", "confirmed": "yes", "csrf": "guess"},
    )
    assert response.status == 403
    assert await w.state_of(env.store, wid) == "running"


async def test_a_console_without_a_token_is_read_only(env: Env, anon: Page) -> None:
    wid = env.world.waiting
    await anon.goto(env.readonly_url + f"/executions/{wid}")
    assert await anon.locator("details.action").count() == 0
    assert "read-only" in await anon.inner_text("header")
    assert (await anon.request.get(env.readonly_url + "/login")).status == 404
    login = await anon.request.post(env.readonly_url + "/login",
                                    form={"who": "eve", "token": ""})  # fmt: skip
    assert login.status == 403
    for verb in ACTIONS:
        got = await anon.request.post(env.readonly_url + f"/act/{verb}",
                                      form={"target": str(wid), "reason": "x",
                                            "confirmed": "yes"})  # fmt: skip
        assert got.status == 403, verb
        signed_out = await anon.request.post(env.url + f"/act/{verb}",
                                             form={"target": str(wid), "reason": "x",
                                                   "confirmed": "yes"})  # fmt: skip
        assert signed_out.status == 403, verb
    assert await w.state_of(env.store, wid) == "running"


async def test_a_wrong_token_signs_no_one_in(env: Env, anon: Page) -> None:
    await anon.goto(env.url + "/login")
    await anon.fill("input[name=who]", "mallory")
    await anon.fill("input[name=token]", "not-the-token")
    await anon.click("button[type=submit]")
    assert "not the console's access token" in await anon.inner_text(".problem")
    assert not [c for c in await anon.context.cookies() if c["name"] == "azync_console"]


async def test_a_forged_form_without_the_csrf_token_is_refused(env: Env, signed_in: Page) -> None:
    wid = await fresh_order(env.store)
    response = await signed_in.request.post(
        env.url + "/act/workflow.terminate",
        form={"target": str(wid), "reason": "x", "confirmed": "yes", "csrf": "forged"},
    )
    assert response.status == 403
    assert await w.state_of(env.store, wid) == "running"


# --- escaping -------------------------------------------------------------------------------


async def test_markup_in_inputs_and_signal_names_never_runs(
    env: Env, browser: Browser, signed_in: Page
) -> None:
    page = signed_in
    watched = Watched(page)
    wid = env.world.xss
    for path in ("/", "/executions", f"/executions/{wid}"):
        await page.goto(env.url + path)
        assert await page.evaluate("window.__xss") is None
    assert w.XSS_NOTE in await page.inner_text("#input")
    assert w.XSS_SIGNAL in await page.inner_text("#waiting")
    # a signal whose name is markup, sent through the console, shows as text
    await act(page, "Signal", "<b>bold</b> reason", signal_name=w.XSS_SIGNAL, payload='"<i>x</i>"')
    await Client(env.store).get_handle(wid).result(timeout=30)  # the run got its signal
    await page.goto(env.url + f"/executions/{wid}")
    assert w.XSS_SIGNAL in await page.inner_text("#history")
    assert w.XSS_SIGNAL[:20] in " ".join(
        await page.locator("svg#timeline text").all_text_contents()
    )
    scripts = await page.eval_on_selector_all("script", "els => els.map(e => e.src)")
    assert scripts == [env.url + "/static/htmx.min.js"]
    assert await page.locator("img").count() == 0
    assert await page.evaluate("window.__xss") is None
    assert watched.dialogs == []
    await shot(page, "execution-xss")
