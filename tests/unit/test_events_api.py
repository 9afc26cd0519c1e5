"""The subscriber declaration: what it refuses up front, and that a handler
stays a plain coroutine function for unit tests of its own logic."""

from __future__ import annotations

import uuid

import pytest

from azync_flow._publish import derived_event_id
from azync_flow.events import subscriber
from azync_flow.retry import RetryPolicy


@pytest.mark.parametrize(
    ("event_type", "name", "message"),
    [
        ("", "mailer", "event_type must not be empty"),
        ("order.shipped", "", "subscriber name must not be empty"),
        ("order\x00shipped", "mailer", "event_type must not contain NUL"),
        ("order.shipped", "m" * 256, "subscriber name is 256 characters long"),
    ],
)
def test_subscriber_refuses_bad_names(event_type: str, name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        subscriber(event_type, name=name)


def test_subscriber_refuses_an_attempt_budget_below_one() -> None:
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        subscriber("order.shipped", name="mailer", max_attempts=0)


async def test_a_subscriber_is_callable_directly_with_its_settings_kept() -> None:
    policy = RetryPolicy(maximum_attempts=4)

    @subscriber("order.shipped", name="mailer", retry=policy, concurrency=3)
    async def mail(payload: dict[str, str]) -> str:
        return f"mailed {payload['to']}"

    assert await mail({"to": "ann"}) == "mailed ann"
    assert (mail.event_type, mail.name, mail.retry, mail.concurrency) == (
        "order.shipped",
        "mailer",
        policy,
        3,
    )


def test_derived_event_ids_are_stable_per_work_and_position() -> None:
    job = uuid.uuid4()
    assert derived_event_id(job, 1) == derived_event_id(job, 1)
    assert derived_event_id(job, 1) != derived_event_id(job, 2)
    assert derived_event_id(job, 1) != derived_event_id(uuid.uuid4(), 1)
