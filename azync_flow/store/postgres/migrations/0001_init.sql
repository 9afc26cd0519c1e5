-- azync_flow schema v1: jobs (queue, event deliveries, DAG tasks, workflow
-- tasks and operations), event ledger, DAGs, workflow executions.
-- Raw payloads are bytea so JSON round-trips byte for byte (jsonb would reject
-- \u0000 and reorder keys); jsonb only where SQL looks inside (meta).

CREATE TABLE azync_events (
    id              uuid PRIMARY KEY,
    type            text NOT NULL,
    aggregate_type  text NOT NULL DEFAULT '',
    aggregate_id    text NOT NULL DEFAULT '',
    version         bigint NOT NULL DEFAULT 0,
    occurred_at     timestamptz NOT NULL,
    payload         bytea NOT NULL,
    meta            jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL
);
CREATE INDEX azync_events_type_occurred ON azync_events (type, occurred_at DESC);

CREATE TABLE azync_subscribers (
    name          text NOT NULL,
    event_type    text NOT NULL,
    max_attempts  int NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (event_type, name)
);

CREATE TABLE azync_dags (
    id               uuid PRIMARY KEY,
    name             text NOT NULL,
    state            text NOT NULL,
    on_failure       text NOT NULL DEFAULT 'cancel',
    idempotency_key  text NOT NULL DEFAULT '',
    failure_reason   text NOT NULL DEFAULT '',
    pause_reason     text NOT NULL DEFAULT '',
    cancel_requested boolean NOT NULL DEFAULT false,
    meta             jsonb NOT NULL DEFAULT '{}'::jsonb,
    trace_context    jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    completed_at     timestamptz
);
CREATE UNIQUE INDEX azync_dags_live_key ON azync_dags (name, idempotency_key)
    WHERE idempotency_key <> '' AND state IN ('running', 'suspended', 'compensating', 'paused');
CREATE INDEX azync_dags_active ON azync_dags (state) WHERE state IN ('running', 'compensating');
CREATE INDEX azync_dags_created ON azync_dags (created_at DESC);

CREATE TABLE azync_dag_deps (
    dag_id          uuid NOT NULL REFERENCES azync_dags (id) ON DELETE CASCADE,
    task_key        text NOT NULL,
    depends_on_key  text NOT NULL,
    PRIMARY KEY (dag_id, task_key, depends_on_key)
);
CREATE INDEX azync_dag_deps_upstream ON azync_dag_deps (dag_id, depends_on_key);

CREATE TABLE azync_dag_signals (
    id           bigserial PRIMARY KEY,
    dag_id       uuid NOT NULL REFERENCES azync_dags (id) ON DELETE CASCADE,
    name         text NOT NULL,
    message_id   text NOT NULL DEFAULT '',
    payload      bytea NOT NULL,
    consumed_at  timestamptz,
    created_at   timestamptz NOT NULL
);
CREATE UNIQUE INDEX azync_dag_signals_dedupe ON azync_dag_signals (dag_id, name, message_id)
    WHERE message_id <> '';
CREATE INDEX azync_dag_signals_unconsumed ON azync_dag_signals (dag_id, name, id)
    WHERE consumed_at IS NULL;

CREATE TABLE azync_workflow_executions (
    id                        uuid PRIMARY KEY,
    name                      text NOT NULL,
    version                   text NOT NULL DEFAULT '',
    state                     text NOT NULL,
    business_idempotency_key  text NOT NULL DEFAULT '',
    task_queue                text NOT NULL DEFAULT '',
    input                     bytea NOT NULL,
    result                    bytea,
    failure_reason            text NOT NULL DEFAULT '',
    suspend_reason            text NOT NULL DEFAULT '',
    cancel_requested          boolean NOT NULL DEFAULT false,
    -- next history seq a pass must append at (the fence for duplicate passes)
    next_seq                  bigint NOT NULL DEFAULT 1,
    meta                      jsonb NOT NULL DEFAULT '{}'::jsonb,
    trace_context             jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at                timestamptz NOT NULL,
    updated_at                timestamptz NOT NULL,
    completed_at              timestamptz
);
CREATE UNIQUE INDEX azync_workflow_executions_live_key
    ON azync_workflow_executions (name, business_idempotency_key)
    WHERE business_idempotency_key <> '' AND state IN ('running', 'suspended');
CREATE INDEX azync_workflow_executions_state ON azync_workflow_executions (state, updated_at);
CREATE INDEX azync_workflow_executions_created ON azync_workflow_executions (created_at DESC);

CREATE TABLE azync_workflow_history (
    workflow_id  uuid NOT NULL REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    seq          bigint NOT NULL,
    type         text NOT NULL,
    payload      bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (workflow_id, seq)
);

CREATE TABLE azync_workflow_signals (
    id           bigserial PRIMARY KEY,
    workflow_id  uuid NOT NULL REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    name         text NOT NULL,
    message_id   text NOT NULL DEFAULT '',
    payload      bytea NOT NULL,
    -- history seq of the SignalReceived event that consumed it; NULL = buffered
    consumed_seq bigint,
    created_at   timestamptz NOT NULL
);
CREATE UNIQUE INDEX azync_workflow_signals_dedupe ON azync_workflow_signals (workflow_id, name, message_id)
    WHERE message_id <> '';
CREATE INDEX azync_workflow_signals_buffered ON azync_workflow_signals (workflow_id, id)
    WHERE consumed_seq IS NULL;

CREATE TABLE azync_workflow_timers (
    workflow_id  uuid NOT NULL REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    seq          bigint NOT NULL,
    fire_at      timestamptz NOT NULL,
    fired_at     timestamptz,
    PRIMARY KEY (workflow_id, seq)
);
CREATE INDEX azync_workflow_timers_due ON azync_workflow_timers (fire_at) WHERE fired_at IS NULL;

CREATE TABLE azync_jobs (
    id                    uuid PRIMARY KEY,
    source                text NOT NULL,
    kind                  text NOT NULL,
    state                 text NOT NULL,
    attempt               int NOT NULL DEFAULT 0,
    max_attempts          int NOT NULL DEFAULT 0,
    max_attempts_explicit boolean NOT NULL DEFAULT false,
    reap_count            int NOT NULL DEFAULT 0,
    payload               bytea,
    meta                  jsonb NOT NULL DEFAULT '{}'::jsonb,
    run_at                timestamptz NOT NULL,
    lease_until           timestamptz,
    lease_token           uuid,
    last_error            text NOT NULL DEFAULT '',
    idempotency_key       text NOT NULL DEFAULT '',
    event_id              uuid REFERENCES azync_events (id) ON DELETE CASCADE,
    replay                boolean NOT NULL DEFAULT false,
    dag_id                uuid REFERENCES azync_dags (id) ON DELETE CASCADE,
    run_id                uuid REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    task_key              text NOT NULL DEFAULT '',
    result                bytea,
    signal_name           text NOT NULL DEFAULT '',
    compensation_kind     text NOT NULL DEFAULT '',
    compensation_payload  bytea,
    sleep_for             interval,
    ignore_dead_deps      boolean NOT NULL DEFAULT false,
    snooze_budget         interval,
    deadline_at           timestamptz,
    -- uncertain-operation audit (workflow operations only)
    uncertain_reason      text NOT NULL DEFAULT '',
    uncertain_since       timestamptz,
    decision              text NOT NULL DEFAULT '',
    decision_by           text NOT NULL DEFAULT '',
    decision_note         text NOT NULL DEFAULT '',
    decided_at            timestamptz,
    enqueued_at           timestamptz NOT NULL,
    started_at            timestamptz,
    failed_at             timestamptz,
    completed_at          timestamptz,
    updated_at            timestamptz NOT NULL
);
-- The lease query reads only runnable rows: a partial index stays small as
-- settled rows pile up, so the drain rate holds over time.
CREATE INDEX azync_jobs_ready ON azync_jobs (source, kind, run_at, id) WHERE state = 'pending';
CREATE INDEX azync_jobs_scheduled ON azync_jobs (run_at) WHERE state = 'scheduled';
CREATE INDEX azync_jobs_leased ON azync_jobs (lease_until) WHERE state = 'active';
CREATE INDEX azync_jobs_completed ON azync_jobs (source, completed_at) WHERE state = 'succeeded';
-- Excludes pending rows on purpose: with pending rows in it, the planner picks
-- this index (plus a sort of every pending row) over azync_jobs_ready on a
-- freshly filled, not yet analyzed table, and a lease costs ~90 ms, not ~0.05 ms.
CREATE INDEX azync_jobs_kind_state ON azync_jobs (source, kind, state) WHERE state <> 'pending';
CREATE UNIQUE INDEX azync_jobs_live_key ON azync_jobs (source, kind, idempotency_key)
    WHERE idempotency_key <> ''
      AND state IN ('pending', 'scheduled', 'active', 'paused', 'blocked', 'waiting', 'uncertain');
CREATE UNIQUE INDEX azync_jobs_dag_task ON azync_jobs (dag_id, task_key) WHERE dag_id IS NOT NULL;
CREATE INDEX azync_jobs_run ON azync_jobs (run_id, task_key) WHERE run_id IS NOT NULL;
CREATE INDEX azync_jobs_event ON azync_jobs (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX azync_jobs_dag_state ON azync_jobs (state, dag_id) WHERE dag_id IS NOT NULL;
-- Churn-heavy table: vacuum early so dead tuples do not slow the lease scan.
ALTER TABLE azync_jobs SET (autovacuum_vacuum_scale_factor = 0.01,
                            autovacuum_vacuum_threshold = 1000,
                            autovacuum_analyze_scale_factor = 0.02,
                            fillfactor = 80);

CREATE TABLE azync_job_attempts (
    id        bigserial PRIMARY KEY,
    job_id    uuid NOT NULL REFERENCES azync_jobs (id) ON DELETE CASCADE,
    attempt   int NOT NULL,
    error     text NOT NULL,
    at        timestamptz NOT NULL
);
CREATE INDEX azync_job_attempts_job ON azync_job_attempts (job_id, id);

CREATE TABLE azync_job_stats (
    source     text NOT NULL,
    kind       text NOT NULL,
    day        date NOT NULL,
    -- counters are spread over a few rows per day so concurrent settles do
    -- not serialise on one row lock; reads sum the shards
    shard      smallint NOT NULL DEFAULT 0,
    enqueued   bigint NOT NULL DEFAULT 0,
    processed  bigint NOT NULL DEFAULT 0,
    failed     bigint NOT NULL DEFAULT 0,
    reaped     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (source, kind, day, shard)
);

CREATE TABLE azync_idempotency_keys (
    source      text NOT NULL,
    kind        text NOT NULL,
    key         text NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (source, kind, key)
);
CREATE INDEX azync_idempotency_keys_expiry ON azync_idempotency_keys (source, expires_at);
