"""RetryPolicy arithmetic, error descriptions and the worker's public surface (no database)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

import azync_flow.worker as worker_pkg
from azync_flow.errors import Uncertain, UnknownKindError
from azync_flow.replay.outcome import safe_message
from azync_flow.retry import RetryDecision, RetryPolicy, describe_error


def test_worker_package_exports_exactly_the_public_api() -> None:
    assert worker_pkg.__all__ == [
        "DEFAULT_LEADERSHIP",
        "STATS_LEADERSHIP",
        "AckBatcher",
        "Batch",
        "Interceptor",
        "JobContext",
        "JobRunner",
        "LeaseHandle",
        "LeaseLoop",
        "LoopStats",
        "MaintenanceStep",
        "QueueHandler",
        "QueueRunner",
        "Retention",
        "RetryPolicy",
        "Worker",
        "WorkerStore",
        "lease_gone",
    ]
    for name in worker_pkg.__all__:
        assert hasattr(worker_pkg, name)


def test_backoff_grows_geometrically_up_to_the_cap() -> None:
    p = RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
        jitter=0.0,
    )
    assert [p.delay(n).total_seconds() for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert p.delay(10_000).total_seconds() == 10  # no float overflow


def test_jitter_stays_within_its_band_and_under_the_cap() -> None:
    p = RetryPolicy(initial_interval=timedelta(seconds=4), jitter=0.25)
    rng = random.Random(7)
    delays = [p.delay(1, rng).total_seconds() for _ in range(500)]
    assert min(delays) >= 3.0
    assert max(delays) <= 5.0
    assert len(set(delays)) > 400  # actually spread, not constant
    capped = RetryPolicy(
        initial_interval=timedelta(seconds=4), maximum_interval=timedelta(seconds=4)
    )
    assert max(capped.delay(3, rng).total_seconds() for _ in range(100)) <= 4.0


def test_decide_honours_budget_and_non_retryable_types_through_the_mro() -> None:
    class Fatal(Exception):
        pass

    class Fatter(Fatal):
        pass

    p = RetryPolicy(non_retryable_error_types=("Fatal",))
    assert p.decide(ValueError(), attempt=1, max_attempts=3) is RetryDecision.RETRY
    assert p.decide(ValueError(), attempt=3, max_attempts=3) is RetryDecision.DEAD
    assert p.decide(Fatter(), attempt=1, max_attempts=3) is RetryDecision.NON_RETRYABLE
    assert p.decide(ValueError(), attempt=99, max_attempts=0) is RetryDecision.RETRY
    own = RetryPolicy(maximum_attempts=2)
    assert own.decide(ValueError(), attempt=2, max_attempts=0) is RetryDecision.DEAD
    # The budget stored with the work wins over a changed policy.
    assert own.decide(ValueError(), attempt=2, max_attempts=25) is RetryDecision.RETRY
    qualified = RetryPolicy(non_retryable_error_types=("builtins.KeyError",))
    assert qualified.decide(KeyError("k"), 1, 5) is RetryDecision.NON_RETRYABLE


def test_policy_validates_its_fields() -> None:
    with pytest.raises(ValueError, match="backoff_coefficient"):
        RetryPolicy(backoff_coefficient=0.5)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.0)
    with pytest.raises(ValueError, match="maximum_interval"):
        RetryPolicy(initial_interval=timedelta(seconds=5), maximum_interval=timedelta(seconds=1))


def test_describe_error_is_type_and_message_and_always_storable() -> None:
    """NUL and lone surrogates never make recording a failure fail."""
    assert describe_error(ValueError("bad input")) == "ValueError: bad input"
    assert describe_error(KeyError()) == "KeyError"
    text = describe_error(RuntimeError("a\x00b \ud800 c"))
    assert text == "RuntimeError: a\\x00b \\ud800 c"
    text.encode("utf-8")  # encodable: no lone surrogate survives
    assert len(describe_error(ValueError("x" * 20_000), limit=100)) == 100


def test_a_failure_reason_names_the_error_type_once() -> None:
    """An azync_flow error's ``[code]`` tag repeats its type: the reason and the
    recorded message leave it out; a message of another error keeps its text."""
    assert describe_error(Uncertain("provider timed out")) == "Uncertain: provider timed out"
    assert describe_error(UnknownKindError("ghost")) == (
        "UnknownKindError: no handler is registered for kind 'ghost'"
    )
    assert safe_message(Uncertain("provider timed out")) == "provider timed out"
    assert describe_error(ValueError("[draft] not sent")) == "ValueError: [draft] not sent"
