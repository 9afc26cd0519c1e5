"""The console's ASGI application (Starlette): one route per page, the live
overview fragment htmx polls, sign-in, and the action endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from azync_flow import _metrics
from azync_flow._display import MAX_ROWS, time_or_age
from azync_flow.client import Client
from azync_flow.errors import ConflictError, NotFoundError, PayloadError, StoreError
from azync_flow.search import split_search_filters
from azync_flow.store.admin import JobFilter
from azync_flow.store.dags import DAGState
from azync_flow.store.events import EventFilter
from azync_flow.store.queue import JobState, Source
from azync_flow.store.validate import check_name, check_text
from azync_flow.store.workflows import WorkflowState
from azync_flow.telemetry.metrics import prometheus_asgi_app

from . import _queries as q
from ._actions import ACTIONS, perform, review
from ._auth import COOKIE, Session, Sessions
from ._format import install_filters

__all__ = ["ConsoleSettings", "create_app"]

log = logging.getLogger("azync_flow.console")

PAGE = 50
#: Most rows one page of executions shows.
MAX_PAGE = 500
#: Headers on every response: nothing but the console's own files may run or
#: load (a payload that slipped past escaping still could not run a script).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class ConsoleSettings:
    """How a console runs.

    Attributes:
        token: the access token; None or '' keeps the console read-only.
        trace_url: a URL template with ``{trace_id}`` (e.g. Jaeger's
            ``http://localhost:16686/trace/{trace_id}``); '' shows no link.
        refresh_seconds: how often the overview refreshes itself.
        metrics_interval: with a value (seconds), serve ``/metrics`` (the
            Prometheus exposition of this process, extra ``metrics``) and
            sample the store's backlog into the backlog gauges that often;
            None serves no metrics.
    """

    token: str | None = None
    trace_url: str = ""
    refresh_seconds: float = 2.0
    metrics_interval: float | None = None

    def __post_init__(self) -> None:
        url = self.trace_url
        if url and ("{trace_id}" not in url or not url.startswith(("http://", "https://"))):
            raise ValueError(
                f"trace URL {url!r} must be http(s) and contain {{trace_id}} "
                "(e.g. http://localhost:16686/trace/{trace_id})"
            )
        if not self.refresh_seconds > 0:
            raise ValueError("refresh_seconds must be positive")
        if self.metrics_interval is not None and not self.metrics_interval > 0:
            raise ValueError("metrics_interval must be positive")


def _environment() -> jinja2.Environment:
    folder = resources.files(__package__).joinpath("templates")
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: folder.joinpath(name).read_text(encoding="utf-8")
        ),
        autoescape=True,  # every template, .svg fragments included
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    install_filters(env)
    return env


Handler = Callable[[Request], Awaitable[Response]]


class Console:
    """The pages and actions over one open store."""

    def __init__(self, store: q.ConsoleStore, settings: ConsoleSettings) -> None:
        self.store = store
        self.settings = settings
        self.sessions = Sessions(settings.token)
        self.env = _environment()

    # --- plumbing -----------------------------------------------------------------

    def session(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE))

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> Response:
        session = self.session(request)
        html = self.env.get_template(template).render(
            request_path=request.url.path,
            actions_enabled=self.sessions.enabled,
            session=session,
            can_act=session is not None,
            notice=request.query_params.get("notice", ""),
            settings=self.settings,
            **context,
        )
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error(self, request: Request, status: int, message: str) -> Response:
        return self.render(request, "error.html", status=status, status_code=status,
                           message=message)  # fmt: skip

    def wrap(self, handler: Handler) -> Handler:
        """Product errors as pages: not found 404, conflict 409, bad input 400,
        an unreachable database 503."""

        async def wrapped(request: Request) -> Response:
            try:
                return await handler(request)
            except NotFoundError as exc:
                return self.error(request, 404, str(exc))
            except ConflictError as exc:
                return self.error(request, 409, str(exc))
            except (ValueError, PayloadError) as exc:
                return self.error(request, 400, str(exc))
            except StoreError as exc:
                return self.error(request, 503, str(exc))

        return wrapped

    # --- pages --------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        data = await q.overview(self.store)
        return self.render(request, "overview.html", o=data)

    async def overview_live(self, request: Request) -> Response:
        data = await q.overview(self.store)
        return self.render(request, "_overview_live.html", o=data)

    async def executions(self, request: Request) -> Response:
        p = request.query_params
        wanted = p.get("id", "").strip()
        if wanted:
            return RedirectResponse(f"/executions/{_uuid(wanted, 'execution id')}", 303)
        state = p.get("state", "")
        if state and state not in {s.value for s in WorkflowState}:
            raise ValueError(f"unknown state {state!r}")
        name = p.get("name", "").strip()
        key = p.get("key", "").strip()
        check_text(name, "workflow name")
        check_text(key, "business key")
        flt = q.ExecutionFilter(
            state=state or None,
            name=name or None,
            since=_time(p.get("since", ""), "since"),
            until=_time(p.get("until", ""), "until"),
            key=key or None,
            where=tuple(split_search_filters(p.get("where", ""))),
        )
        cursor = None
        if p.get("before_at") and p.get("before_id"):
            cursor = (_iso(p["before_at"]), _uuid(p["before_id"], "cursor id"))
        page = await q.executions(self.store, flt, cursor, _limit(p.get("limit", "")))
        filters = {
            k: p.get(k, "") for k in ("state", "name", "since", "until", "key", "where", "limit")
        }
        nxt = ""
        if page.next_cursor is not None:
            at, last = page.next_cursor
            nxt = "?" + urlencode({**filters, "before_at": at.isoformat(), "before_id": str(last)})
        return self.render(request, "executions.html", page=page, filters=filters,
                           states=[s.value for s in WorkflowState], next_url=nxt,
                           paged=cursor is not None)  # fmt: skip

    async def execution(self, request: Request) -> Response:
        wid = _uuid(request.path_params["id"], "execution id")
        run = request.query_params.get("run", "")
        run_no = int(run) if run.isascii() and run.isdigit() and len(run) < 10 else None
        d = await q.execution_detail(self.store, wid, run_no, child_href="/executions/")
        trace = self.settings.trace_url.replace("{trace_id}", d.trace_id) if d.trace_id else ""
        return self.render(request, "execution.html", d=d, v=d.view,
                           trace_link=trace if self.settings.trace_url else "")  # fmt: skip

    async def dags(self, request: Request) -> Response:
        p = request.query_params
        name = p.get("name", "").strip()
        check_text(name, "DAG name")
        state = p.get("state", "")
        offset = _offset(p.get("offset", ""))
        rows, total = await q.dag_runs(self.store, name, state or None, offset, PAGE)
        return self.render(request, "dags.html", rows=rows, total=total, offset=offset,
                           name=name, state=state, page_size=PAGE,
                           states=[s.value for s in DAGState])  # fmt: skip

    async def dag(self, request: Request) -> Response:
        d = await q.dag_detail(self.store, _uuid(request.path_params["id"], "DAG run id"))
        return self.render(request, "dag.html", d=d, v=d.view)

    async def schedules(self, request: Request) -> Response:
        rows = await q.schedules(self.store)
        return self.render(request, "schedules.html", rows=rows)

    async def jobs(self, request: Request) -> Response:
        p = request.query_params
        source = Source(p.get("source", Source.QUEUE.value) or Source.QUEUE.value)
        kind = p.get("kind", "").strip()
        check_name(kind, "kind", empty_ok=True)
        state = p.get("state", "")
        offset = _offset(p.get("offset", ""))
        rows, total = await self.store.list_jobs(
            source, JobFilter(kind=kind, state=JobState(state) if state else None), offset, PAGE
        )
        return self.render(request, "jobs.html", rows=rows, total=total, offset=offset,
                           source=source.value, kind=kind, state=state, page_size=PAGE,
                           sources=[s.value for s in Source],
                           states=[s.value for s in JobState])  # fmt: skip

    async def job(self, request: Request) -> Response:
        source = Source(request.path_params["source"])
        job_id = _uuid(request.path_params["id"], "job id")
        job = await self.store.get_job(source, job_id)
        attempts = await self.store.job_attempts(source, job_id)
        return self.render(request, "job.html", j=job, attempts=attempts)

    async def events(self, request: Request) -> Response:
        p = request.query_params
        type_ = p.get("type", "").strip()
        check_name(type_, "event type", empty_ok=True)
        offset = _offset(p.get("offset", ""))
        rows, total = await self.store.list_events(EventFilter(type=type_), offset, PAGE)
        subscribers = await self.store.list_subscriber_views("")
        lag = await self.store.kind_depths(Source.EVENT)
        return self.render(request, "events.html", rows=rows, total=total, offset=offset,
                           type=type_, page_size=PAGE, subscribers=subscribers,
                           lag=lag)  # fmt: skip

    async def event(self, request: Request) -> Response:
        event_id = _uuid(request.path_params["id"], "event id")
        e = await self.store.get_event(event_id)
        deliveries = await q.deliveries(self.store, event_id)
        return self.render(request, "event.html", e=e, deliveries=deliveries)

    async def uncertain(self, request: Request) -> Response:
        ops = await Client(self.store).list_uncertain(limit=200)
        return self.render(request, "uncertain.html", ops=ops)

    # --- signing in and acting ------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        if not self.sessions.enabled:
            return self.error(request, 404, "actions are off: the console runs without a token")
        return self.render(request, "login.html", failed=False, who="")

    async def login(self, request: Request) -> Response:
        if not self.sessions.enabled:
            return self.error(request, 403, "actions are off: the console runs without a token")
        form = await request.form()
        who = str(form.get("who", "")).strip()
        token = str(form.get("token", ""))
        try:
            check_name(who, "name")
        except ValueError:
            return self.render(request, "login.html", status=400, failed=True, who="")
        sid = self.sessions.sign_in(token, who)
        if sid is None:
            await asyncio.sleep(0.5)  # slows guessing down
            return self.render(request, "login.html", status=403, failed=True, who=who)
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")  # fmt: skip
        return response

    async def logout(self, request: Request) -> Response:
        self.sessions.sign_out(request.cookies.get(COOKIE))
        response = RedirectResponse("/", 303)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def act(self, request: Request) -> Response:
        verb = request.path_params["verb"]
        session = self.session(request)
        if session is None or verb not in ACTIONS:
            why = "actions are off" if not self.sessions.enabled else "sign in to act"
            return self.error(request, 403, why if verb in ACTIONS else "no such action")
        form = {k: str(v) for k, v in (await request.form()).items()}
        if not self.sessions.csrf_ok(session, form.get("csrf", "")):
            return self.error(request, 403, "the form is stale or forged (CSRF token mismatch)")
        fields = {k: v for k, v in form.items() if k not in ("csrf", "confirmed")}
        target = form.get("target", "")
        if form.get("confirmed") != "yes":
            try:
                review(fields)
            except (ValueError, PayloadError) as exc:
                return self.render(request, "confirm.html", status=400, action=ACTIONS[verb],
                                   fields=fields, target=target, problem=str(exc))  # fmt: skip
            return self.render(request, "confirm.html", action=ACTIONS[verb], fields=fields,
                               target=target, problem="")  # fmt: skip
        try:
            done = await perform(self.store, verb, target, fields, session.who)
        except (ValueError, PayloadError, NotFoundError, ConflictError) as exc:
            return self.render(request, "confirm.html", status=400, action=ACTIONS[verb],
                               fields=fields, target=target, problem=str(exc))  # fmt: skip
        return RedirectResponse(f"{done.back}?{urlencode({'notice': done.message})}", 303)


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValueError(f"{what} {value!r} is not a valid UUID") from None


def _iso(value: str) -> datetime:
    got = time_or_age(value)
    if got is None:
        raise ValueError(f"{value!r} is not a time")
    return got


def _time(value: str, what: str) -> datetime | None:
    value = value.strip()
    if not value:
        return None
    got = time_or_age(value)
    if got is None:
        raise ValueError(f"{what} {value!r} is neither an ISO time (2026-01-31T12:00, UTC) "
                         "nor an age (15m, 2h, 3d)")  # fmt: skip
    return got


def _limit(value: str) -> int:
    """A page size from the query string: ``PAGE`` when absent, else 1..500.

    Raises:
        ValueError: not a whole number from 1 to 500.
    """
    value = value.strip()
    if not value:
        return PAGE
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_PAGE:
        raise ValueError(f"limit {value!r} is not a whole number from 1 to {MAX_PAGE}")
    return int(value)


def _offset(value: str) -> int:
    """A row offset or page size from the query string (0 when not one, or
    past what the store counts)."""
    if not (value.isascii() and value.isdigit()):
        return 0
    n = int(value)
    return n if n <= MAX_ROWS else 0


def create_app(store: q.ConsoleStore, settings: ConsoleSettings | None = None) -> Starlette:
    """The console as an ASGI application over an open store.

    Args:
        store: an open store (``PostgresStore``); the caller closes it.
        settings: token, trace URL template, refresh period.

    Returns:
        A Starlette application; serve it with uvicorn (``azync-flow ui`` does).
    """
    c = Console(store, settings or ConsoleSettings())
    static = resources.files(__package__).joinpath("static")
    routes = [
        Route("/", c.wrap(c.overview)),
        Route("/overview/live", c.wrap(c.overview_live)),
        Route("/executions", c.wrap(c.executions)),
        Route("/executions/{id}", c.wrap(c.execution)),
        Route("/dags", c.wrap(c.dags)),
        Route("/dags/{id}", c.wrap(c.dag)),
        Route("/schedules", c.wrap(c.schedules)),
        Route("/jobs", c.wrap(c.jobs)),
        Route("/jobs/{source}/{id}", c.wrap(c.job)),
        Route("/events", c.wrap(c.events)),
        Route("/events/{id}", c.wrap(c.event)),
        Route("/uncertain", c.wrap(c.uncertain)),
        Route("/login", c.login_page, methods=["GET"]),
        Route("/login", c.login, methods=["POST"]),
        Route("/logout", c.logout, methods=["POST"]),
        Route("/act/{verb}", c.wrap(c.act), methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(static)), name="static"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        text = "no such page" if status == 404 else "method not allowed" if status == 405 else ""
        return c.error(request, status, text or "unexpected error")

    async def crashed(request: Request, exc: Exception) -> Response:
        log.exception("console page %s failed", request.url.path, exc_info=exc)
        return c.error(request, 500, f"unexpected error: {type(exc).__name__}")

    lifespan = None
    if c.settings.metrics_interval is not None:
        routes.append(Route("/metrics", _AsgiEndpoint(prometheus_asgi_app())))
        lifespan = _backlog_sampler(store, c.settings.metrics_interval)
    return Starlette(routes=routes, exception_handlers={HTTPException: not_found,
                                                        Exception: crashed},
                     lifespan=lifespan)  # fmt: skip


class _AsgiEndpoint:
    """An ASGI application as a route's endpoint (served at the exact path,
    where a mount would redirect ``/metrics`` to ``/metrics/``)."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def _backlog_sampler(
    store: q.ConsoleStore, interval: float
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """A lifespan sampling ``store.backlog()`` into the backlog gauges every
    ``interval`` seconds while the console serves, the first sample at startup
    before anything is served, so the first scrape has the gauges (a failed
    sample is logged and the next one tried)."""

    async def sample() -> None:
        try:
            _metrics.record_backlog(await store.backlog(), interval)
        except StoreError as exc:
            log.warning("backlog sample failed: %s", exc)

    async def every_interval() -> None:
        while True:
            await asyncio.sleep(interval)
            await sample()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await sample()
        task = asyncio.create_task(every_interval(), name="azync-console-backlog")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return lifespan
