"""The operations console (``azync-flow ui``): a web UI over the store.

Pages: an overview that refreshes itself (executions by state, queues, dead
letters, uncertain, stalled and blocked executions, schedules, subscriber
lag), executions (filters, keyset paging), one execution (what it waits for
now, its timeline drawn as SVG, history, runs, parent and children, trace
link), DAG runs with their graph, schedules, jobs and dead letters, events
with their deliveries, uncertain operations. Actions (signal, cancel,
terminate, suspend, resume, complete or fail an execution, decide an
uncertain operation, retry a dead job, pause, unpause and trigger a
schedule) exist only when the console runs with an access token, each a
confirmed POST with a CSRF token and a reason, recorded with who and why.

It needs the ``ui`` extra (Starlette, Jinja2, uvicorn); its templates, its
stylesheet and htmx ship in the package (no build step, works offline).
See docs/console.md.
"""

from __future__ import annotations

from ._actions import ACTIONS, AUDIT_EVENT
from ._app import ConsoleSettings, create_app
from ._serve import bind, serve

__all__ = ["ACTIONS", "AUDIT_EVENT", "ConsoleSettings", "bind", "create_app", "serve"]
