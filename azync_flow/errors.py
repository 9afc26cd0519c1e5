"""Public error tree of azync_flow: every error and control-flow signal it raises on purpose.

Tree::

    AzyncError
    ├── StoreError
    │   ├── NotFoundError               missing row, stale lease token, wrong state for the verb
    │   ├── ConflictError               the row exists but another writer won
    │   │   ├── IdempotencyConflictError    (a workflow start reused an id or key with other input)
    │   │   ├── DAGIdempotencyConflictError (existing_id) — a DAG run reused a live run's key
    │   │   ├── IdentityInUseError      another live process holds the worker identity
    │   │   └── ScheduleExistsError     (also a ScheduleError, below)
    │   ├── LeadershipLostError         a fenced maintenance write of a lapsed leadership term
    │   ├── MigrationError
    │   ├── SchemaNotMigratedError      (schema) — the schema lacks the tables: run the migrations
    │   ├── StoreDsnError               the driver refused the DSN before connecting (a
    │   │                                malformed URI, an unknown setting value); also a ValueError
    │   ├── StoreLoginRefusedError      (refused, name) — the server refused the connection:
    │   │                                unknown role or database, wrong password; not retryable
    │   └── StoreUnavailableError       the database cannot be reached right now; retryable
    ├── WorkflowError
    │   ├── NonDeterminismError         (seq, recorded, new) — execution is suspended
    │   │   └── ForbiddenCallError      (call) — real I/O, threads, wall clock in a workflow
    │   ├── WorkflowFailedError         (workflow_id, error_type, message)
    │   │   └── WorkflowTimeoutError    (kind, timeout_s) — an execution or run timeout ended it
    │   ├── WorkflowCancelledError      (workflow_id)
    │   ├── WorkflowTerminatedError     (workflow_id, reason) — ended by ``terminate``
    │   ├── WorkflowSuspendedError      (workflow_id, reason)
    │   ├── UnknownWorkflowError        (name)
    │   ├── ChildWorkflowError          (workflow_id, state, error_type, message) — a child
    │   │   │                            execution did not succeed
    │   │   └── ChildWorkflowTimeoutError   (kind) — a timeout of the child ended it
    │   ├── ReadOnlyContextError        (call) — a command inside a query handler or validator
    │   ├── QueryError                  (workflow_id, query)
    │   │   ├── QueryNotFoundError      no handler of that name
    │   │   ├── QueryFailedError        (error_type, message) — the handler raised
    │   │   └── QueryTimeoutError       (timeout_s) — no worker answered in time
    │   ├── UpdateError                 (workflow_id, update, update_id)
    │   │   ├── UpdateRejectedError     (error_type, message) — validator, unknown name,
    │   │                               finished execution; not in history
    │   │   └── UpdateFailedError       (error_type, message) — the handler raised, or the
    │   │                               execution ended before the handler returned
    │   └── IdempotencyConflictError    (also a ConflictError, above)
    ├── ActivityError                   (activity, error_type, message, attempts, seq)
    │   └── ActivityTimeoutError        (kind) — a timeout of the activity ended it
    ├── Uncertain                       raised BY an activity: outcome unknown, park it
    ├── PayloadError
    │   ├── PayloadEncodeError          (a value msgspec cannot encode, e.g. a lone surrogate)
    │   ├── PayloadCodecError           (codec, key_id) — a codec layer cannot be undone here
    │   │                                (its codec or key is not configured, corrupt bytes)
    │   └── PayloadTooLargeError        (size, limit)
    ├── LeaseLost                       a job's lease token no longer owns the row
    ├── TransactionMisuseError          (step, misuse) — a ``@transaction`` step committed,
    │                                    rolled back or closed the connection it was given
    ├── UnknownKindError                (kind) — no handler is registered for a job's kind
    ├── DAGValidationError              (dag, task) — also a ValueError
    ├── ScheduleError                   an unknown schedule id, an unusable action
    │   ├── ScheduleSpecError           a bad cron, zone, interval or instant — also a ValueError
    │   └── ScheduleExistsError         a schedule with this id exists (also a ConflictError)
    ├── HistoryFileError                (source, problem) — also a ValueError
    ├── DecisionError                   (expected, given) — a decided result does not fit
    │                                    the activity's result type; also a ValueError
    ├── SearchAttributeError            a bad attribute name, value or filter — also a ValueError
    ├── OtlpConfigError                 ``configure_otlp`` cannot do what was asked
    └── EmbeddedInUseError              the embedded server is in use: not stopped

    BaseException
    ├── WorkflowAbort                   stops workflow code during a pass; never caught by it
    ├── ContinueAsNew                   ``ctx.continue_as_new(input)`` ends the run
    ├── Snooze                          (delay) raised by a queue handler: re-check later
    ├── Skip                            (reason) raised by a handler: settle as skipped
    └── NotReady                        (delay, reason) raised by a DAG task: re-check later

Every error carries structured fields and a stable ``code`` shown in ``str()``;
the control-flow signals derive from ``BaseException`` so a handler's
``except Exception`` cannot swallow them. This module is the one home of every
public error; ``azync_flow`` re-exports the common ones.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

__all__ = [
    "ActivityError",
    "ActivityTimeoutError",
    "AzyncError",
    "ChildWorkflowError",
    "ChildWorkflowTimeoutError",
    "ConflictError",
    "ContinueAsNew",
    "DAGIdempotencyConflictError",
    "DAGValidationError",
    "DecisionError",
    "EmbeddedInUseError",
    "ForbiddenCallError",
    "HistoryFileError",
    "IdempotencyConflictError",
    "IdentityInUseError",
    "LeadershipLostError",
    "LeaseLost",
    "MigrationError",
    "NonDeterminismError",
    "NotFoundError",
    "NotReady",
    "OtlpConfigError",
    "PayloadCodecError",
    "PayloadEncodeError",
    "PayloadError",
    "PayloadTooLargeError",
    "QueryError",
    "QueryFailedError",
    "QueryNotFoundError",
    "QueryTimeoutError",
    "ReadOnlyContextError",
    "ScheduleError",
    "ScheduleExistsError",
    "ScheduleSpecError",
    "SchemaNotMigratedError",
    "SearchAttributeError",
    "Skip",
    "Snooze",
    "StoreDsnError",
    "StoreError",
    "StoreLoginRefusedError",
    "StoreUnavailableError",
    "TransactionMisuseError",
    "Uncertain",
    "UnknownKindError",
    "UnknownWorkflowError",
    "UpdateError",
    "UpdateFailedError",
    "UpdateRejectedError",
    "WorkflowAbort",
    "WorkflowCancelledError",
    "WorkflowError",
    "WorkflowFailedError",
    "WorkflowSuspendedError",
    "WorkflowTerminatedError",
    "WorkflowTimeoutError",
    "is_not_found",
]


class AzyncError(Exception):
    """Root of every error azync_flow raises on purpose."""

    code = "azync"

    def __str__(self) -> str:
        return f"[{self.code}] {super().__str__()}"


def error_message(exc: BaseException) -> str:
    """``str(exc)`` without the ``[code]`` tag an :class:`AzyncError` starts with.

    A failure is recorded as ``<Type>: <message>``: the type already says what
    the tag would, so ``Uncertain("provider timed out")`` is recorded as
    ``Uncertain: provider timed out``. Other exceptions are unchanged.
    """
    text = str(exc)
    if isinstance(exc, AzyncError):
        return text.removeprefix(f"[{exc.code}] ")
    return text


class StoreError(AzyncError):
    """Base of errors from the store: the database said no, or cannot be reached."""

    code = "store"


class NotFoundError(StoreError):
    """The target row does not exist, is in the wrong state, or the lease token
    no longer owns it. Nothing was changed."""

    code = "not_found"


class ConflictError(StoreError):
    """A concurrent writer already applied a conflicting change. Nothing was changed."""

    code = "conflict"


class IdentityInUseError(ConflictError):
    """Another live process holds the worker identity asked for. Nothing was
    changed; pick another identity or stop the other process."""

    code = "identity_in_use"


class LeadershipLostError(StoreError):
    """The leadership term a maintenance write was fenced by is no longer held
    (its lease expired on the backend clock or another holder took over).
    Nothing was changed; stop acting as leader."""

    code = "leadership_lost"


class MigrationError(StoreError):
    """A bundled migration cannot be applied (bad file set, failing DDL, edited after applying)."""

    code = "migration"


class SchemaNotMigratedError(StoreError):
    """The schema has no azync_flow tables, or lacks migrations this version needs.

    Not retryable: run ``azync-flow migrate`` (or start the worker with
    ``azync-flow worker --migrate``, or open the store with
    ``open_store(..., migrate=True)``) against the schema, or point
    ``Config.schema`` / ``--schema`` at the right one.

    Attributes:
        schema: the schema the store was opened on.
    """

    code = "schema_not_migrated"

    def __init__(self, schema: str, detail: str = "it has no azync_flow tables") -> None:
        self.schema = schema
        self.detail = detail
        super().__init__(
            f"schema {schema!r} is not migrated ({detail}); "
            "run `azync-flow migrate` first, or start the worker with "
            "`azync-flow worker --migrate` (or check the schema name)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.schema, self.detail))


class StoreDsnError(StoreError, ValueError):
    """The driver refused the DSN before connecting: it is not a URI it can
    parse, or a setting has a value it does not know (``sslmode=bogus``).

    Not retryable: fix the DSN (``AZYNC_DSN`` or the ``dsn`` argument). The
    message says what the driver refused and what a DSN looks like; the
    driver error is kept as ``__cause__``.
    """

    code = "bad_dsn"
    retryable = False


class StoreLoginRefusedError(StoreError):
    """The server was reached but refused the connection: the role does not
    exist or may not log in, the database does not exist or may not be
    connected to, the password is wrong, or ``pg_hba.conf`` admits no such
    connection.

    Not retryable (unlike :class:`StoreUnavailableError`): fix the DSN, or the
    role, database or grants on the server. The message names what was refused
    and how to fix it, in the server's words; it never shows a password. The
    driver error is kept as ``__cause__``.

    Attributes:
        refused: ``"role"``, ``"database"``, ``"password"`` or ``"connection"``
            (another refusal, e.g. by ``pg_hba.conf``).
        name: the role or database refused, as the server named it (``""``
            when it named none).
    """

    code = "login_refused"
    retryable = False

    def __init__(self, refused: str, name: str, message: str) -> None:
        self.refused = refused
        self.name = name
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.refused, self.name, self.args[0]))


class StoreUnavailableError(StoreError):
    """The database cannot be reached right now: refused or dropped connection,
    server starting up or shutting down, too many connections.

    Retryable. A call that failed while reading changed nothing; a write whose
    connection broke mid-commit may or may not have been applied, so retry with
    the same ids, idempotency keys and message ids (the client verbs are
    idempotent under them). The driver error is kept as ``__cause__``.
    """

    code = "store_unavailable"
    retryable = True


def is_not_found(err: BaseException | None) -> bool:
    """Return True when ``err`` is (or wraps) a :class:`NotFoundError`."""
    while err is not None:
        if isinstance(err, NotFoundError):
            return True
        err = err.__cause__
    return False


class WorkflowError(AzyncError):
    """Base of errors about a workflow execution."""

    code = "workflow"


class NonDeterminismError(WorkflowError):
    """Workflow code and its recorded history disagree.

    The execution is suspended (not failed); fix the code (or add a
    ``ctx.patched`` gate) and resume it.

    Attributes:
        seq: history position of the disagreement (``None`` when not tied to one).
        recorded: description of the recorded event there ("" when history ends).
        new: description of what the code did instead ("" when it did nothing).
    """

    code = "nondeterminism"

    def __init__(self, seq: int | None, recorded: str, new: str, detail: str = "") -> None:
        self.seq = seq
        self.recorded = recorded
        self.new = new
        self.detail = detail
        where = f"at seq {seq}" if seq is not None else "outside history"
        msg = (
            f"{where}: history recorded {recorded or '<nothing>'}, "
            f"code produced {new or '<nothing>'}"
        )
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)

    def __reduce__(self) -> tuple[Any, ...]:  # pickling/copying with the custom __init__
        return (type(self), (self.seq, self.recorded, self.new, self.detail))


class ForbiddenCallError(NonDeterminismError):
    """Workflow code made a call that cannot be replayed (I/O, threads, wall clock).

    Raised at the call site; the pass is also marked non-deterministic, so the
    execution is suspended even if the code swallows the error.
    """

    code = "forbidden_call"

    def __init__(self, call: str, hint: str = "") -> None:
        self.call = call
        self.hint = hint
        super().__init__(
            None, "", call, f"{call} is forbidden inside a workflow; {hint}".rstrip("; ")
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.call, self.hint))

    def __str__(self) -> str:
        return f"[{self.code}] {self.detail}"


class WorkflowFailedError(WorkflowError):
    """The execution failed: its code raised ``error_type: message``."""

    code = "workflow_failed"

    def __init__(self, workflow_id: uuid.UUID | None, error_type: str, message: str) -> None:
        self.workflow_id = workflow_id
        self.error_type = error_type
        self.message = message
        cause = f"{error_type}: {message}" if error_type else message
        super().__init__(f"workflow {workflow_id} failed: {cause}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.workflow_id, self.error_type, self.message))


class WorkflowTimeoutError(WorkflowFailedError):
    """A workflow timeout elapsed: the engine ended the execution ``failed``
    without running its code (``handle.result()`` raises this).

    Attributes:
        kind: ``"execution"`` (the whole execution, across continue-as-new
            runs) or ``"run"`` (its current run).
        timeout_s: the timeout, in seconds.
    """

    code = "workflow_timed_out"

    def __init__(self, workflow_id: uuid.UUID | None, kind: str, timeout_s: float) -> None:
        self.kind = kind
        self.timeout_s = timeout_s
        super().__init__(
            workflow_id, "WorkflowTimeoutError", f"{kind} timeout of {timeout_s:g}s elapsed"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.workflow_id, self.kind, self.timeout_s))


class WorkflowCancelledError(WorkflowError):
    """The execution ended cancelled."""

    code = "workflow_cancelled"

    def __init__(self, workflow_id: uuid.UUID | None, reason: str = "") -> None:
        self.workflow_id = workflow_id
        self.reason = reason
        super().__init__(
            f"workflow {workflow_id} was cancelled" + (f": {reason}" if reason else "")
        )


class WorkflowTerminatedError(WorkflowError):
    """The execution was ended by ``terminate``: no workflow code ran to end it.

    Attributes:
        workflow_id: the execution.
        reason: who terminated it and why, as recorded (``terminated by
            <who>: <reason>``); the ``WorkflowTerminated`` history event holds
            both separately.
    """

    code = "workflow_terminated"

    def __init__(self, workflow_id: uuid.UUID | None, reason: str = "") -> None:
        self.workflow_id = workflow_id
        self.reason = reason
        super().__init__(f"workflow {workflow_id} was " + (reason or "terminated"))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.workflow_id, self.reason))


class WorkflowSuspendedError(WorkflowError):
    """The execution is suspended (non-determinism, uncertain operation, operator)."""

    code = "workflow_suspended"

    def __init__(self, workflow_id: uuid.UUID | None, reason: str = "") -> None:
        self.workflow_id = workflow_id
        self.reason = reason
        super().__init__(f"workflow {workflow_id} is suspended: {reason}")


class UnknownWorkflowError(WorkflowError):
    """No workflow (or activity) definition is registered under ``name``."""

    code = "unknown_workflow"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no definition registered under {name!r}")


class ChildWorkflowError(WorkflowError):
    """A child execution started with ``ctx.start_child`` did not succeed.

    Raised in the parent's workflow code by ``await handle.result()`` (and
    ``ctx.execute_child``) when the child's ``ChildFailed`` event is delivered.

    Attributes:
        workflow_id: the child execution.
        state: its terminal state: ``failed``, ``cancelled`` or ``terminated``
            (``failed`` also when the child could not be started because its
            id is taken by another execution).
        error_type: the class name of the child's error (``WorkflowCancelled``
            / ``WorkflowTerminated`` for those states).
        message: the child's error message (or the cancel/terminate reason).
    """

    code = "child_workflow_failed"

    def __init__(
        self, workflow_id: uuid.UUID | str, state: str, error_type: str, message: str
    ) -> None:
        self.workflow_id = workflow_id
        self.state = state
        self.error_type = error_type
        self.message = message
        cause = f"{error_type}: {message}" if error_type else message
        super().__init__(f"child workflow {workflow_id} {state}: {cause}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.workflow_id, self.state, self.error_type, self.message))


class ChildWorkflowTimeoutError(ChildWorkflowError):
    """A child execution was ended by one of its timeouts (its
    ``WorkflowTimeoutError``), as the parent's code sees it.

    Attributes:
        kind: ``"execution"`` or ``"run"``: the child's timeout that elapsed.
    """

    code = "child_workflow_timed_out"

    def __init__(
        self, workflow_id: uuid.UUID | str, state: str, error_type: str, message: str
    ) -> None:
        super().__init__(workflow_id, state, error_type, message)
        self.kind = message.split(" ", 1)[0]


class ReadOnlyContextError(WorkflowError):
    """A query handler or an update validator issued a command (activity, timer,
    ``ctx.now()``, ``ctx.random()``, a signal wait, ...): they may only read
    the workflow's state, never change its history.

    Attributes:
        call: what was attempted (e.g. ``ActivityScheduled(charge, ...)``).
    """

    code = "read_only_context"

    def __init__(self, call: str) -> None:
        self.call = call
        super().__init__(
            f"{call} is not allowed in a query handler or update validator "
            "(they must not change the workflow's history)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.call,))


class QueryError(WorkflowError):
    """Base of the errors of ``WorkflowHandle.query``.

    Attributes:
        workflow_id: the execution queried.
        query: the query name.
    """

    code = "query"

    def __init__(self, workflow_id: uuid.UUID | None, query: str, detail: str) -> None:
        self.workflow_id = workflow_id
        self.query = query
        self.detail = detail
        super().__init__(f"query {query!r} of workflow {workflow_id}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.workflow_id, self.query, self.detail))


class QueryNotFoundError(QueryError):
    """The workflow registered no query handler of that name (at the point of
    its history the query was answered)."""

    code = "query_not_found"


class QueryFailedError(QueryError):
    """The query could not be answered: the handler raised ``error_type: message``
    (``ReadOnlyContextError`` when it tried to issue a command), or the history
    could not be replayed by the current code."""

    code = "query_failed"

    def __init__(
        self, workflow_id: uuid.UUID | None, query: str, error_type: str, message: str
    ) -> None:
        self.error_type = error_type
        self.message = message
        super().__init__(workflow_id, query, f"{error_type}: {message}" if error_type else message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.workflow_id, self.query, self.error_type, self.message))


class QueryTimeoutError(QueryError):
    """No worker answered within the timeout (none runs that registers the
    workflow, or all are busy); the query was withdrawn."""

    code = "query_timeout"

    def __init__(self, workflow_id: uuid.UUID | None, query: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        super().__init__(
            workflow_id,
            query,
            f"no worker answered within {timeout_s:g}s (is a worker that registers "
            "this workflow running?)",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.workflow_id, self.query, self.timeout_s))


class UpdateError(WorkflowError):
    """Base of the errors of ``WorkflowHandle.update``.

    Attributes:
        workflow_id: the execution.
        update: the update name.
        update_id: the update's id (its deduplication key).
        error_type: class name of the cause (``""`` when none).
        message: the cause's message.
    """

    code = "update"
    verb = "failed"

    def __init__(
        self,
        workflow_id: uuid.UUID | None,
        update: str,
        update_id: str,
        error_type: str,
        message: str,
    ) -> None:
        self.workflow_id = workflow_id
        self.update = update
        self.update_id = update_id
        self.error_type = error_type
        self.message = message
        cause = f"{error_type}: {message}" if error_type else message
        super().__init__(
            f"update {update!r} (id {update_id}) of workflow {workflow_id} {self.verb}: {cause}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.workflow_id, self.update, self.update_id, self.error_type, self.message),
        )


class UpdateRejectedError(UpdateError):
    """The update was refused before it was accepted: its validator raised, the
    workflow has no handler of that name, or the execution is not running.
    Nothing was recorded in history."""

    code = "update_rejected"
    verb = "was rejected"


class UpdateFailedError(UpdateError):
    """The update was accepted (recorded in history) but its handler raised, or
    the execution finished before the handler returned."""

    code = "update_failed"


class ActivityError(AzyncError):
    """An activity failed for good (retry budget spent or non-retryable error).

    Attributes:
        activity: activity name.
        error_type: class name of the last error the activity raised.
        message: its message.
        attempts: attempts made.
        seq: history seq of the ActivityScheduled event (``None`` outside a workflow).
    """

    code = "activity_failed"

    def __init__(
        self,
        activity: str,
        error_type: str,
        message: str,
        attempts: int = 0,
        seq: int | None = None,
    ) -> None:
        self.activity = activity
        self.error_type = error_type
        self.message = message
        self.attempts = attempts
        self.seq = seq
        super().__init__(
            f"activity {activity!r} failed after {attempts} attempt(s): {error_type}: {message}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.activity, self.error_type, self.message, self.attempts, self.seq))


class ActivityTimeoutError(ActivityError):
    """An activity was ended by one of its timeouts, as the workflow sees it.

    ``schedule_to_start`` and ``schedule_to_close`` end the activity at once
    (never retried); ``start_to_close`` and ``heartbeat`` end one attempt,
    retried by the retry policy, and this is raised once the budget is
    spent (docs/flow-control.md).

    Attributes:
        kind: ``schedule_to_start``, ``schedule_to_close``, ``start_to_close``
            or ``heartbeat``.
    """

    code = "activity_timed_out"

    def __init__(
        self,
        activity: str,
        error_type: str,
        message: str,
        attempts: int = 0,
        seq: int | None = None,
        kind: str = "",
    ) -> None:
        super().__init__(activity, error_type, message, attempts, seq)
        self.kind = kind

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.activity, self.error_type, self.message, self.attempts, self.seq, self.kind),
        )


class Uncertain(AzyncError):
    """Raise from an activity whose outcome is unknown (e.g. a payment call timed out
    after the request was sent).

    The operation is not retried blindly: it is parked as *uncertain*, the
    execution is suspended, and a decision (complete / fail / retry) from a
    reconcile hook, a client call or an operator resumes it.
    """

    code = "uncertain"


class PayloadError(AzyncError):
    """A payload could not be encoded, decoded or stored."""

    code = "payload"


class PayloadEncodeError(PayloadError):
    """A value could not be encoded as JSON (unsupported type, lone surrogate, ...).

    Attributes:
        path: where in the value the bad part is, from the top: ``['key']`` for
            a mapping key, ``[2]`` for a sequence index, ``.name`` for an
            attribute (e.g. ``['items'][2]['price']``); "" for the value itself
            or when unknown (nesting too deep).
    """

    code = "payload_encode"

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.args[0], self.path))


class PayloadCodecError(PayloadError):
    """A stored payload's codec layer cannot be undone here: its codec or its
    encryption key is not configured in this process, or the bytes are corrupt
    (docs/codecs.md).

    Attributes:
        codec: the id of the layer that failed ("" when not about one layer).
        key_id: the encryption key id the payload names ("" when none).
    """

    code = "payload_codec"

    def __init__(self, message: str, *, codec: str = "", key_id: str = "") -> None:
        self.codec = codec
        self.key_id = key_id
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_codec_error, (self.args[0], self.codec, self.key_id))


def _codec_error(message: str, codec: str, key_id: str) -> PayloadCodecError:
    """Rebuild a pickled :class:`PayloadCodecError` (its fields are keyword-only)."""
    return PayloadCodecError(message, codec=codec, key_id=key_id)


class PayloadTooLargeError(PayloadError):
    """An encoded payload is larger than the configured limit (bytes)."""

    code = "payload_too_large"

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.what = what
        self.size = size
        self.limit = limit
        super().__init__(f"{what} is {size} bytes, over the limit of {limit} bytes")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what, self.size, self.limit))


class IdempotencyConflictError(ConflictError, WorkflowError):
    """A start reused an id or idempotency key of an execution with a different
    workflow or different input. Nothing was started."""

    code = "idempotency_conflict"


class DAGIdempotencyConflictError(ConflictError):
    """A run reused the idempotency key of a live run of the same DAG with
    different tasks, task payloads or meta. Nothing was started.

    Attributes:
        existing_id: the live run holding the key.
    """

    code = "idempotency_conflict"

    def __init__(self, message: str, existing_id: uuid.UUID) -> None:
        super().__init__(message)
        self.existing_id = existing_id


class DAGValidationError(AzyncError, ValueError):
    """A DAG definition is invalid (cycle, unknown dependency, duplicate or reserved key).

    Attributes:
        dag: the DAG name.
        task: the offending task key.
    """

    code = "dag_invalid"

    def __init__(self, dag: str, task: str, problem: str) -> None:
        super().__init__(f"dag {dag!r}, task {task!r}: {problem}")
        self.dag = dag
        self.task = task


class LeaseLost(AzyncError):
    """The job's lease token no longer owns the row: another attempt may run it now.

    Raised by ``LeaseHandle.extend`` (and ``JobContext.heartbeat``). A
    runner that sees it must stop and must not settle the job.
    """

    code = "lease_lost"


class TransactionMisuseError(AzyncError):
    """A ``@transaction`` step did what only its runtime may do with the
    connection it was given: ended the step's transaction (``COMMIT`` or
    ``ROLLBACK``) or closed the connection.

    Its writes are then no longer tied to its recorded result (a ``COMMIT``
    made the writes before it durable on their own), so the attempt fails at
    once and is never retried: the workflow sees an :class:`ActivityError` of
    this type. Closing is refused where it is called (``close()`` and
    ``terminate()`` raise this), so the connection stays usable and the step's
    writes roll back.

    Attributes:
        step: the step's registered name.
        misuse: what it did, in words (``"closed the connection"``, ...).
    """

    code = "transaction_misuse"

    def __init__(self, step: str, misuse: str) -> None:
        self.step = step
        self.misuse = misuse
        super().__init__(
            f"transactional step {step!r} {misuse} it was given: the runtime owns the "
            "step's transaction (it commits the step's writes with its recorded result); "
            "the attempt fails and is not retried"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.step, self.misuse))


class UnknownKindError(AzyncError):
    """No handler is registered for a job's kind (a queue job, an event
    delivery or a DAG task). The job is dead-lettered at once with this error:
    retrying cannot help until a worker registers the kind.

    Attributes:
        kind: the job's kind.
    """

    code = "unknown_kind"

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(f"no handler is registered for kind {kind!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind,))


class ScheduleError(AzyncError):
    """Base of errors about a schedule (unknown id, unusable action)."""

    code = "schedule"


class ScheduleSpecError(ScheduleError, ValueError):
    """A schedule spec or time argument is invalid: a bad cron expression, an
    unknown IANA time zone, a naive datetime, a non-positive interval, an end
    before the start. Nothing is stored. Also a ``ValueError``."""

    code = "schedule_spec"


class ScheduleExistsError(ScheduleError, ConflictError):
    """A schedule with this id exists (delete it first). Also a ``ConflictError``."""

    code = "schedule_exists"


class HistoryFileError(AzyncError, ValueError):
    """A recorded history (file or JSON bytes) is malformed: not JSON, not the
    ``RecordedHistory`` shape, or an event payload that does not match its type.

    Attributes:
        source: the file path, or ``"<json>"`` for in-memory JSON.
        problem: what is wrong, as the decoder reported it (with a JSON path).
    """

    code = "history_file"

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"malformed history {source}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.source, self.problem))


class DecisionError(AzyncError, ValueError):
    """A decision on an uncertain operation gives a result that does not fit
    the activity's result type (recorded with the operation when it was
    scheduled), so the workflow could not decode it. Nothing is written.
    Also a ``ValueError``.

    Attributes:
        expected: the activity's result type, as recorded (``"str"``,
            ``"list[int]"``, ``"Charge"``).
        given: the decided result as JSON text (cut to 200 characters).
    """

    code = "decision_invalid"

    def __init__(self, expected: str, given: str, problem: str = "") -> None:
        self.expected = expected
        self.given = given
        self.problem = problem
        detail = f": {problem}" if problem else ""
        super().__init__(
            f"the decided result {given} does not fit the result type {expected}{detail}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.expected, self.given, self.problem))


class SearchAttributeError(AzyncError, ValueError):
    """A search attribute name, value or filter is refused: a name the product's
    name check refuses, a value that is not a str, int, float, bool or
    timezone-aware datetime (or out of range), too many attributes, or a filter
    of an unknown shape or operator. Nothing is written. Also a ``ValueError``."""

    code = "search_attribute"


class OtlpConfigError(AzyncError):
    """Span export cannot be set up as asked (bad protocol or ``OTEL_*`` value,
    provider already set, a bad ``flush_spans`` timeout)."""

    code = "otlp_config"


class EmbeddedInUseError(AzyncError, RuntimeError):
    """``stop_embedded`` refused: live processes use the server (the message
    lists their pids). Also a ``RuntimeError``."""

    code = "embedded_in_use"


class Snooze(BaseException):
    """Raise from a queue or event handler to park the job and re-check after ``delay``.

    The lease's attempt is given back, so snoozing never spends the retry
    budget. A job with a snooze budget is dead-lettered with
    ``SnoozeDeadlineExceeded`` once a snooze is settled past its deadline.

    Args:
        delay: how long to wait, from the backend clock's now.

    Raises:
        ValueError: ``delay`` is negative.
    """

    code = "snooze"

    def __init__(self, delay: timedelta) -> None:
        if delay < timedelta(0):
            raise ValueError("snooze delay must be >= 0")
        super().__init__(delay)
        self.delay = delay


class Skip(BaseException):
    """Raise from a handler (queue job, event subscriber or DAG task) to settle it as skipped.

    Skipped is terminal and never retried; ``reason`` is kept as the job's last
    error for the ops surfaces. A skipped DAG task has no result, satisfies its
    dependents like a succeeded one and is never compensated (with no reason
    it is recorded as ``"skipped"``).

    Args:
        reason: why; shown as the last error.
    """

    code = "skip"

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class NotReady(BaseException):
    """Raise from a DAG task handler to re-check later without spending an attempt.

    The task is snoozed for ``delay``. When the task declared a ``deadline``
    (its snooze budget), the first snooze stamps the deadline on the backend
    clock and a snooze settled past it dead-letters the task, which triggers the
    DAG's failure policy.

    Args:
        delay: how long to wait before the next attempt (default 1 second).
        reason: shown as the last error if the deadline is exhausted.
    """

    code = "not_ready"

    def __init__(self, delay: timedelta = timedelta(seconds=1), reason: str = "not ready") -> None:
        super().__init__(reason)
        self.delay = delay
        self.reason = reason


class WorkflowAbort(BaseException):
    """Stops workflow code when a pass is abandoned (non-determinism, eviction).

    Derives from ``BaseException`` so ``except Exception`` in user code does not
    swallow it. Never raised to callers outside the replay engine.
    """

    code = "workflow_abort"


class ContinueAsNew(BaseException):
    """Raised by ``ctx.continue_as_new(input)``: end this run of the execution and
    start a fresh one (same workflow id, empty history) with ``input``.

    Derives from ``BaseException`` so ``except Exception`` in workflow code
    does not swallow it; let it propagate out of the workflow function.

    Attributes:
        input: the new run's input, encoded (JSON bytes).
    """

    code = "continue_as_new"

    def __init__(self, input: bytes) -> None:
        self.input = input
        super().__init__("continue as new")
