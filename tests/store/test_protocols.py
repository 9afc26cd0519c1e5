"""The Postgres driver satisfies every contract Protocol it implements."""

from __future__ import annotations

import inspect

import pytest

from azync_flow import store as store_pkg
from azync_flow.store import Subscription, protocols
from azync_flow.store.postgres import PostgresStore

#: Implemented by objects the store hands out, not by the store itself.
_HANDED_OUT = {"LeadershipLease", "Subscription"}
_STORE_PROTOCOLS = [
    getattr(protocols, name) for name in protocols.__all__ if name not in _HANDED_OUT
]


@pytest.mark.parametrize("protocol", _STORE_PROTOCOLS, ids=lambda p: p.__name__)
async def test_postgres_store_implements_protocol_with_matching_signatures(
    store: PostgresStore, protocol: type
) -> None:
    assert isinstance(store, protocol)
    for name, member in inspect.getmembers(protocol, inspect.isfunction):
        if name.startswith("_"):
            continue
        impl = getattr(PostgresStore, name)
        assert inspect.iscoroutinefunction(impl) == inspect.iscoroutinefunction(member), (
            f"{name} must be async exactly when the protocol's is"
        )
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
        "UncertainStore",
        "WorkflowClientStore",
        "DAGClientStore",
        "WorkflowRuntimeStore",
        "OperationStore",
        "ScheduleStore",
    ):
        assert name in store_pkg.__all__
    assert store_pkg.__all__ == sorted(store_pkg.__all__)
