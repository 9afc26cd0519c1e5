-- Every nominal time of a schedule ends started, skipped (overlap) or missed
-- (catch-up window): per-schedule counts, missed ranges, and the history of
-- edits. The scheduler is the only writer of the counts (one leader, one
-- statement per outcome), so the schedule row is never a shared hot row.
ALTER TABLE azync_schedules
    ADD COLUMN started_count bigint NOT NULL DEFAULT 0,
    ADD COLUMN skipped_count bigint NOT NULL DEFAULT 0,
    ADD COLUMN missed_count  bigint NOT NULL DEFAULT 0;

-- A requested run's overlap override (backfill `overlap=`, trigger
-- `allow_all`); NULL: the schedule's own policy.
ALTER TABLE azync_schedule_runs ADD COLUMN overlap text;

-- Missed nominal times, one row per range (a long outage is one row with its
-- count, never one row per time). `reason`: `catchup` (older than the
-- catch-up window when the scheduler came to them) or `buffer` (a buffered
-- start that would have begun later than the window after its nominal time).
CREATE TABLE azync_schedule_missed (
    schedule_id       text NOT NULL REFERENCES azync_schedules (id) ON DELETE CASCADE,
    first_nominal_at  timestamptz NOT NULL,
    last_nominal_at   timestamptz NOT NULL,
    count             bigint NOT NULL,
    reason            text NOT NULL,
    recorded_at       timestamptz NOT NULL,
    PRIMARY KEY (schedule_id, first_nominal_at)
);

-- Edits of a schedule (update, pause, unpause): when, and what before / after.
CREATE TABLE azync_schedule_changes (
    schedule_id  text NOT NULL REFERENCES azync_schedules (id) ON DELETE CASCADE,
    seq          bigserial,
    at           timestamptz NOT NULL,
    verb         text NOT NULL,
    old_spec     bytea,
    new_spec     bytea,
    old_policy   bytea,
    new_policy   bytea,
    old_action   bytea,
    new_action   bytea,
    note         text NOT NULL DEFAULT '',
    PRIMARY KEY (schedule_id, seq)
);

-- Order in which runs were started (the overlap policy looks at the run
-- started last, which a backfill of old nominal times makes differ from the
-- newest nominal time).
CREATE SEQUENCE azync_schedule_start_seq;
ALTER TABLE azync_schedule_runs ADD COLUMN start_seq bigint;
ALTER TABLE azync_schedule_missed ADD COLUMN count_exact boolean NOT NULL DEFAULT true;
