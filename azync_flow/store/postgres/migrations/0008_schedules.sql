-- Schedules: cron/interval specs fired by the leader-only scheduler step.
-- `spec`, `action` and `policy` are the client's msgspec JSON (bytea: kept
-- byte for byte). `cursor_at` is the last nominal instant handled (fired,
-- skipped, buffered or dropped as missed): the scheduler only looks at nominal
-- times after it. `next_fire_at` is when the next one is due (jitter
-- included), NULL once the spec has no more fires; `next_due_at` counts it.
CREATE TABLE azync_schedules (
    id            text PRIMARY KEY,
    spec          bytea NOT NULL,
    action        bytea NOT NULL,
    policy        bytea NOT NULL,
    note          text NOT NULL DEFAULT '',
    paused        boolean NOT NULL DEFAULT false,
    cursor_at     timestamptz NOT NULL,
    next_fire_at  timestamptz,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

CREATE INDEX azync_schedules_due ON azync_schedules (next_fire_at) WHERE NOT paused;

-- One row per (schedule, nominal instant) that was acted on: the ledger that
-- makes a nominal time fire at most once and that `describe` reads. `run_id`
-- is derived from both (the started workflow, DAG run or job id).
CREATE TABLE azync_schedule_runs (
    schedule_id  text NOT NULL REFERENCES azync_schedules (id) ON DELETE CASCADE,
    nominal_at   timestamptz NOT NULL,
    fire_at      timestamptz NOT NULL,
    run_id       uuid NOT NULL,
    outcome      text NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (schedule_id, nominal_at)
);

-- Runs still to start (requested by trigger/backfill, or buffered behind a
-- running one): the scheduler looks for them every tick.
CREATE INDEX azync_schedule_runs_pending ON azync_schedule_runs (schedule_id)
    WHERE outcome IN ('buffered', 'requested');
