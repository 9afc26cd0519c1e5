-- What each running worker runs: one row per worker process, written only by
-- that worker (at start, by a periodic refresh off the hot path, and at stop),
-- so no transaction ever waits on another's row. A row whose expires_at has
-- passed is a worker that stopped without saying so (killed): not live.
-- `workflows start` reads it to warn when no live worker registers a name.
CREATE TABLE azync_workers (
    id          uuid PRIMARY KEY,
    host        text NOT NULL DEFAULT '',
    pid         int NOT NULL DEFAULT 0,
    workflows   text[] NOT NULL DEFAULT '{}',
    started_at  timestamptz NOT NULL,
    seen_at     timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX azync_workers_workflows ON azync_workers USING gin (workflows);
