"""The Postgres driver satisfies every contract Protocol it implements."""

from __future__ import annotations

import inspect

import pytest

from azync_flow import store as store_pkg
from azync_flow.store import (
    ChangeNotifier,
    LeaderElector,
    LeaseElector,
    Migrator,
    Notifier,
    ScheduleStore,
    Store,
    Subscription,
    TxStore,
    WorkflowInteractionStore,
)
from azync_flow.store.postgres import PostgresStore


@pytest.mark.parametrize(
    "protocol",
    [
        Store,
        TxStore,
        Notifier,
        ChangeNotifier,
        LeaderElector,
        LeaseElector,
        Migrator,
        ScheduleStore,
        WorkflowInteractionStore,
    ],
)
async def test_postgres_store_implements_protocol_with_matching_signatures(
    store: PostgresStore, protocol: type
) -> None:
    assert isinstance(store, protocol)
    for name, member in inspect.getmembers(protocol, inspect.isfunction):
        if name.startswith("_"):
            continue
        impl = getattr(PostgresStore, name)
        assert inspect.iscoroutinefunction(impl), f"{name} must be async"
        want = list(inspect.signature(member).parameters)
        got = list(inspect.signature(impl).parameters)
        assert got == want, f"{protocol.__name__}.{name}: {got} != {want}"


async def test_wake_subscription_is_a_subscription(store: PostgresStore) -> None:
    sub = await store.wake()
    assert sub is not None
    async with sub:
        assert isinstance(sub, Subscription)


def test_store_package_exports_the_protocols() -> None:
    for name in (
        "Store",
        "DAGStore",
        "WorkflowStore",
        "ChangeNotifier",
        "Notifier",
        "LeaderElector",
        "LeadershipLease",
        "LeaseElector",
        "Migrator",
        "TxStore",
        "TxDAGStore",
        "Subscription",
        "ScheduleStore",
    ):
        assert name in store_pkg.__all__
    assert store_pkg.__all__ == sorted(store_pkg.__all__)
