"""The testing kit: test workflows, activities and recorded histories on the real store.

* :class:`WorkflowEnvironment` — a real worker on a real PostgreSQL whose time
  tests skip: ``await env.sleep(timedelta(days=30))``, automatic skipping in
  ``handle.result()``, ``await env.run_until_settled()``.
* :class:`ActivityEnvironment` — run one activity in isolation (heartbeats
  recorded, events published recorded, cancellation injected,
  ``current_activity()`` works).
* :func:`replay_histories` / :func:`recorded_histories` — replay recorded
  histories against the current code in CI.
* :class:`MovableClock`, :func:`unique_schema`, :func:`drop_schema` — the parts.
* The pytest plugin (:mod:`azync_flow.testing.pytest_plugin`) with the
  ``azync_dsn``, ``azync_schema``, ``azync_clock``, ``azync_store`` and
  ``workflow_env`` fixtures. See docs/testing.md.

Names are imported on first use so the plugin stays cheap to load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._activity import ActivityEnvironment, HeartbeatRecord, PublishedEvent
    from ._clock import MovableClock
    from ._env import TestClient, TestWorkflowHandle, WorkflowEnvironment
    from ._replay import recorded_histories, replay_histories
    from ._schema import drop_schema, unique_schema

_HOMES = {
    "ActivityEnvironment": "._activity",
    "HeartbeatRecord": "._activity",
    "PublishedEvent": "._activity",
    "MovableClock": "._clock",
    "TestClient": "._env",
    "TestWorkflowHandle": "._env",
    "WorkflowEnvironment": "._env",
    "recorded_histories": "._replay",
    "replay_histories": "._replay",
    "drop_schema": "._schema",
    "unique_schema": "._schema",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
