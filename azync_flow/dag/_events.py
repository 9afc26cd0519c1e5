"""Ledger event types a DAG run publishes on its lifecycle transitions.

Each event is published in the same transaction as the header's state change
(see ``docs/dags.md``): one ``azync_events`` row with ``aggregate_type``
``"dag"`` and ``aggregate_id`` the run id, plus one pending delivery per
subscriber registered for the type. The payload is a JSON object; the event's
``meta`` is the run's W3C trace context (``traceparent`` ...), so a subscriber
can continue the run's trace.
"""

from __future__ import annotations

from enum import StrEnum


class DAGEvent(StrEnum):
    """Event types of DAG runs, for ``Subscriber.event_type``.

    Attributes:
        FAILED: the failure policy fired (once per firing): payload
            ``dag_id``, ``name``, ``policy`` (``cancel``/``suspend``),
            ``state`` (the new header state), ``reason``, ``triggered_by``
            (the dead task keys that triggered the policy) and ``dead_tasks``
            (every task dead at that moment), keys sorted.
        COMPENSATION_STARTED: the compensation chain was inserted (by the
            cancel policy or a manual ``compensate``): ``dag_id``, ``name``,
            ``trigger`` (``failure_policy``/``manual``), ``reason`` and
            ``compensations`` (the ``comp:<key>`` tasks in the order they run).
        COMPENSATION_FAILED: a compensation task died and the run is
            suspended for a manual decision: ``dag_id``, ``name``, ``state``,
            ``reason``, ``dead_compensations``.
        SETTLED: the run reached a terminal state: ``dag_id``, ``name``,
            ``state`` (``succeeded``, ``failed`` or ``cancelled``), ``reason``
            and ``dead_tasks`` (every dead task key at that moment, sorted).
    """

    FAILED = "azync.dag.failed"
    COMPENSATION_STARTED = "azync.dag.compensation_started"
    COMPENSATION_FAILED = "azync.dag.compensation_failed"
    SETTLED = "azync.dag.settled"
