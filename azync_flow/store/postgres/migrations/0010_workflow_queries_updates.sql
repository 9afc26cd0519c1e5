-- Queries: short-lived request/answer rows. A client inserts a pending
-- request (with its deadline) and NOTIFYs 'workflow:$query'; a worker that
-- registers the workflow claims it, answers it from a cached or replayed
-- instance (no history written) and NOTIFYs 'workflow.query:<execution id>';
-- the client deletes the row when it reads the answer or gives up.
CREATE TABLE azync_workflow_queries (
    id            uuid PRIMARY KEY,
    workflow_id   uuid NOT NULL REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    workflow_name text NOT NULL,
    name          text NOT NULL,
    args          bytea NOT NULL,
    -- pending -> claimed -> answered | failed
    state         text NOT NULL DEFAULT 'pending',
    answer        bytea,
    error_type    text NOT NULL DEFAULT '',
    message       text NOT NULL DEFAULT '',
    deadline      timestamptz NOT NULL,
    created_at    timestamptz NOT NULL
);
CREATE INDEX azync_workflow_queries_pending ON azync_workflow_queries (workflow_name, created_at)
    WHERE state = 'pending';
CREATE INDEX azync_workflow_queries_workflow ON azync_workflow_queries (workflow_id);

-- Updates: the request travels through the signal inbox (name
-- '$update:<name>', message id = update id, so a duplicate request is
-- dropped there); a pass accepts it (UpdateAccepted in history, the inbox row
-- consumed at that seq) or rejects it (inbox row consumed with seq 0, nothing
-- in history). The outcome of every rejected, completed or failed update is
-- kept here, written in the transaction of the pass that decided it, so a
-- caller retrying with the same id gets the same answer.
CREATE TABLE azync_workflow_updates (
    workflow_id uuid NOT NULL REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    update_id   text NOT NULL,
    name        text NOT NULL,
    -- rejected | completed | failed
    state       text NOT NULL,
    result      bytea,
    error_type  text NOT NULL DEFAULT '',
    message     text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (workflow_id, update_id)
);
