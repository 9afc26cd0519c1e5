"""The console's actions: each one verb of the client (or the store's admin
verbs, as the CLI uses them), taken by a signed-in person with a reason.

Every action is recorded with who and why: where the verb keeps them itself
(``terminate``: reason and terminated_by; ``complete`` and ``fail``: reason
and closed_by; ``suspend``: the reason, with who; an uncertain decision: note
and decided_by; ``pause``: the note) they are passed to it, and every action,
those included, is published on the event ledger as an
``azync.console.action`` event (``{"verb", "target", "by", "reason", ...}``,
keyed by the target), so ``azync-flow events list --type azync.console.action``
is the console's audit trail.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from azync_flow._display import json_from_text
from azync_flow.client import Client
from azync_flow.schedules import ScheduleClient
from azync_flow.store import validate
from azync_flow.store.queue import Source
from azync_flow.store.validate import check_name, check_text

from ._queries import ConsoleStore

__all__ = ["ACTIONS", "AUDIT_EVENT", "Action", "Done", "perform"]

log = logging.getLogger("azync_flow.console")

#: The ledger event type that records every console action.
AUDIT_EVENT = "azync.console.action"
#: Longest reason accepted (characters).
MAX_REASON = 2000


@dataclass(frozen=True)
class Done:
    """What an action did: a line for the person and the page to go back to."""

    message: str
    back: str


@dataclass(frozen=True)
class Action:
    """One action: its confirm page says ``effect`` about ``target``."""

    verb: str
    title: str
    effect: str
    run: Callable[[ConsoleStore, str, Mapping[str, str], str, str], Awaitable[Done]]


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValueError(f"{what} {value!r} is not a valid UUID") from None


async def _signal(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    wid = _uuid(target, "execution id")
    name = form.get("signal_name", "")
    check_name(name, "signal name")
    message_id = form.get("message_id", "")
    check_text(message_id, "message id")
    text = form.get("payload", "").strip()
    payload = json_from_text(text, "payload") if text else None
    accepted = await Client(store).get_handle(wid).signal(name, payload, message_id=message_id)
    said = "accepted" if accepted else "a duplicate of an earlier message id: dropped"
    return Done(f"signal {name!r} {said}", f"/executions/{wid}")


async def _cancel(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    wid = _uuid(target, "execution id")
    await Client(store).get_handle(wid).cancel()
    return Done("cancellation requested", f"/executions/{wid}")


async def _terminate(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    wid = _uuid(target, "execution id")
    await Client(store).get_handle(wid).terminate(reason, terminated_by=who)
    return Done("terminated", f"/executions/{wid}")


async def _resume(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    wid = _uuid(target, "execution id")
    await Client(store).get_handle(wid).resume()
    return Done("resumed", f"/executions/{wid}")


async def _suspend(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    wid = _uuid(target, "execution id")
    # the verb keeps a reason only: who goes with it, as on a schedule's pause
    await Client(store).get_handle(wid).suspend(f"{reason} (by {who})")
    return Done("suspended", f"/executions/{wid}")


async def _complete(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    wid = _uuid(target, "execution id")
    result = json_from_text(form.get("result", ""), "result")
    await Client(store).get_handle(wid).complete(result, reason=reason, closed_by=who)
    return Done("completed: succeeded with the given result", f"/executions/{wid}")


async def _fail(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    wid = _uuid(target, "execution id")
    await Client(store).get_handle(wid).fail(reason, closed_by=who)
    return Done("failed by the operator", f"/executions/{wid}")


async def _resolve(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    op_id = _uuid(target, "operation id")
    decision = form.get("decision", "")
    if decision not in ("complete", "fail", "retry"):
        raise ValueError("decision must be complete, fail or retry")
    result: Any = None
    error: str | None = None
    if decision == "complete":
        result = json_from_text(form.get("result", ""), "result")
    elif decision == "fail":
        error = form.get("error", "").strip()
        if not error:
            raise ValueError("a fail decision needs the error the workflow sees")
        check_text(error, "error")
    op = await store.get_operation(op_id)
    await Client(store).resolve_uncertain(
        op_id, decision, result=result, error=error, note=reason, decided_by=who
    )
    return Done(f"operation decided: {decision}", f"/executions/{op.workflow_id}")


async def _retry_job(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    job_id = _uuid(target, "job id")
    source = Source(form.get("source", Source.QUEUE.value))
    await store.retry_job(source, job_id)
    return Done("dead job back to pending", f"/jobs/{source.value}/{job_id}")


async def _pause(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    await ScheduleClient(store).pause(target, f"{reason} (by {who})")
    return Done(f"schedule {target} paused", "/schedules")


async def _unpause(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    await ScheduleClient(store).unpause(target, f"{reason} (by {who})")
    return Done(f"schedule {target} unpaused", "/schedules")


async def _trigger(
    store: ConsoleStore, target: str, form: Mapping[str, str], who: str, reason: str
) -> Done:
    run_id = await ScheduleClient(store).trigger(target)
    return Done(f"schedule {target} triggered: run {run_id}", "/schedules")


ACTIONS: dict[str, Action] = {
    a.verb: a
    for a in (
        Action("workflow.signal", "Send a signal", "sends the signal to the execution", _signal),
        Action(
            "workflow.cancel",
            "Cancel the execution",
            "asks the workflow to cancel: its code sees the cancellation and may clean up",
            _cancel,
        ),
        Action(
            "workflow.terminate",
            "Terminate the execution",
            "ends the execution now without running its code (no clean-up)",
            _terminate,
        ),
        Action(
            "workflow.suspend",
            "Suspend the execution",
            "holds the running execution: no workflow code runs until it is resumed "
            "(signals sent meanwhile are kept)",
            _suspend,
        ),
        Action(
            "workflow.resume", "Resume the execution", "resumes the suspended execution", _resume
        ),
        Action(
            "workflow.complete",
            "Complete the execution",
            "closes the execution as succeeded with the given result, without running its code",
            _complete,
        ),
        Action(
            "workflow.fail",
            "Fail the execution",
            "closes the execution as failed with the reason, without running its code",
            _fail,
        ),
        Action(
            "uncertain.resolve",
            "Decide the uncertain operation",
            "records the decision; the workflow continues with it",
            _resolve,
        ),
        Action(
            "job.retry",
            "Retry the dead job",
            "puts the dead job back to pending with its attempts reset",
            _retry_job,
        ),
        Action("schedule.pause", "Pause the schedule", "stops the schedule firing", _pause),
        Action(
            "schedule.unpause",
            "Unpause the schedule",
            "fires the schedule again from now on",
            _unpause,
        ),
        Action(
            "schedule.trigger",
            "Trigger the schedule now",
            "runs the schedule's action now, once",
            _trigger,
        ),
    )
}


def check_reason(reason: str) -> str:
    """The reason of an action, stripped.

    Raises:
        ValueError: empty, longer than :data:`MAX_REASON` or not storable text.
    """
    reason = validate.check_reason(reason).strip()
    if len(reason) > MAX_REASON:
        raise ValueError(f"the reason is over {MAX_REASON} characters")
    check_text(reason, "reason")
    return reason


def review(form: Mapping[str, str]) -> None:
    """Check an action's input before its confirm page: the reason, and the
    JSON fields (``payload``, ``result``) with the parser the action uses.
    The action checks everything again when it runs.

    Raises:
        ValueError: an empty reason or bad JSON.
        PayloadError: a JSON value the payload encoder refuses.
    """
    check_reason(form.get("reason", ""))
    for field in ("payload", "result"):
        text = form.get(field, "").strip()
        if text:
            json_from_text(text, field)


async def perform(
    store: ConsoleStore, verb: str, target: str, form: Mapping[str, str], who: str
) -> Done:
    """Run action ``verb`` on ``target`` for ``who``, then record it on the ledger.

    Raises:
        KeyError: no such action.
        ValueError: bad input (a malformed id, an empty reason, bad JSON).
        PayloadError: a JSON value the payload encoder refuses.
        NotFoundError, ConflictError: what the verb raises when the target's
            state does not allow the action (e.g. suspending a finished or
            already suspended execution); nothing was done.
    """
    action = ACTIONS[verb]
    reason = check_reason(form.get("reason", ""))
    done = await action.run(store, target, form, who, reason)
    record = {
        "verb": verb,
        "target": target,
        "by": who,
        "reason": reason,
        "outcome": done.message,
        **{k: v for k, v in form.items() if k in ("signal_name", "decision", "source")},
    }
    await Client(store).publish(AUDIT_EVENT, record, key=target)
    log.info("console action %s on %s by %s: %s (%s)", verb, target, who, done.message, reason)
    return done
