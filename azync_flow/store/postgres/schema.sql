-- The schema a fresh migrate produces. GENERATED from the catalog: do not edit.
-- Change the schema with a new numbered file in migrations/, then regenerate:
--     python -m azync_flow.store.postgres.schema_dump
-- Each kind of object in name order; the schema name is left out (<schema>
-- where a function pins its search_path).

-- Migrations applied:
--   0001_init.sql
--   0002_workflow.sql
--   0003_dag_recent_changes.sql
--   0004_workflow_terminal_signals.sql
--   0005_leadership_lease.sql
--   0006_workflow_awaited_signals.sql
--   0007_dag_failure_reason.sql
--   0008_schedules.sql
--   0009_child_workflows.sql
--   0010_workflow_queries_updates.sql
--   0011_settle_functions.sql
--   0012_stat_deltas.sql
--   0014_workflow_first_pass_rank.sql
--   0016_workflow_pass_finish.sql
--   0017_schedule_fates.sql
--   0018_worker_registry.sql
--   0019_event_key_order.sql
--   0020_workflow_finish_skips_empty_family.sql
--   0021_workflow_wake_counts.sql
--   0022_state_checks.sql
--   0023_workflow_pass_commit.sql
--   0026_task_queues.sql
--   0027_priorities.sql
--   0028_limits.sql
--   0029_timeouts.sql
--   0030_workflow_search_attributes.sql
--   0031_task_queue_limits.sql
--   0032_generic_plans.sql
--   0033_wakes_after_commit.sql
--   0034_worker_identity.sql
--   0035_lowered_capacity.sql
--   0036_cancelled_calls_hold_slots.sql
--   0039_deadlines_checked_at_lease.sql
--   0040_hot_execution_updates.sql
--   0042_late_completions_and_stopped_attempts.sql
--   0043_lease_plans_once.sql
--   0044_job_lease_plans_once.sql
--   0045_lean_pass_plans.sql
--   0046_pass_fixes.sql
--   0047_wake_task_made_due_during_pass.sql
--   0048_pass_knows_cancel_requests.sql
--   0049_lease_reports_tasks_left.sql

-- Types

CREATE TYPE azync_job_delta AS (
    source text,
    kind text,
    enqueued bigint,
    processed bigint,
    failed bigint,
    reaped bigint
);

-- Sequences

CREATE SEQUENCE azync_dag_signals_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;

CREATE SEQUENCE azync_event_order_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;

CREATE SEQUENCE azync_job_attempts_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;

CREATE SEQUENCE azync_schedule_changes_seq_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;

CREATE SEQUENCE azync_schedule_start_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;

CREATE SEQUENCE azync_workflow_signals_id_seq AS bigint START 1 INCREMENT 1 MINVALUE 1 MAXVALUE 9223372036854775807 CACHE 1;

-- Tables

CREATE TABLE azync_dag_deps (
    dag_id uuid NOT NULL,
    task_key text NOT NULL,
    depends_on_key text NOT NULL,
    CONSTRAINT azync_dag_deps_pkey PRIMARY KEY (dag_id, task_key, depends_on_key)
);

CREATE TABLE azync_dag_signals (
    id bigint DEFAULT nextval('azync_dag_signals_id_seq'::regclass) NOT NULL,
    dag_id uuid NOT NULL,
    name text NOT NULL,
    message_id text DEFAULT ''::text NOT NULL,
    payload bytea NOT NULL,
    consumed_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_dag_signals_pkey PRIMARY KEY (id)
);

CREATE TABLE azync_dags (
    id uuid NOT NULL,
    name text NOT NULL,
    state text NOT NULL,
    on_failure text DEFAULT 'cancel'::text NOT NULL,
    idempotency_key text DEFAULT ''::text NOT NULL,
    failure_reason text DEFAULT ''::text NOT NULL,
    pause_reason text DEFAULT ''::text NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    meta jsonb DEFAULT '{}'::jsonb NOT NULL,
    trace_context jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    completed_at timestamp with time zone,
    CONSTRAINT azync_dags_pkey PRIMARY KEY (id),
    CONSTRAINT azync_dags_state_check CHECK ((state = ANY (ARRAY['running'::text, 'suspended'::text, 'compensating'::text, 'paused'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text])))
);

CREATE TABLE azync_events (
    id uuid NOT NULL,
    type text NOT NULL,
    aggregate_type text DEFAULT ''::text NOT NULL,
    aggregate_id text DEFAULT ''::text NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    occurred_at timestamp with time zone NOT NULL,
    payload bytea NOT NULL,
    meta jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_events_pkey PRIMARY KEY (id)
);

CREATE TABLE azync_idempotency_keys (
    source text NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_idempotency_keys_pkey PRIMARY KEY (source, kind, key)
);

CREATE TABLE azync_job_attempts (
    id bigint DEFAULT nextval('azync_job_attempts_id_seq'::regclass) NOT NULL,
    job_id uuid NOT NULL,
    attempt integer NOT NULL,
    error text NOT NULL,
    at timestamp with time zone NOT NULL,
    CONSTRAINT azync_job_attempts_pkey PRIMARY KEY (id)
);

CREATE TABLE azync_job_stat_deltas (
    source text NOT NULL,
    kind text NOT NULL,
    day date NOT NULL,
    enqueued bigint NOT NULL,
    processed bigint NOT NULL,
    failed bigint NOT NULL,
    reaped bigint NOT NULL
) WITH (autovacuum_vacuum_insert_scale_factor=0, autovacuum_vacuum_insert_threshold=10000, autovacuum_vacuum_scale_factor=0, autovacuum_vacuum_threshold=1000);

CREATE TABLE azync_job_stats (
    source text NOT NULL,
    kind text NOT NULL,
    day date NOT NULL,
    enqueued bigint DEFAULT 0 NOT NULL,
    processed bigint DEFAULT 0 NOT NULL,
    failed bigint DEFAULT 0 NOT NULL,
    reaped bigint DEFAULT 0 NOT NULL,
    CONSTRAINT azync_job_stats_pkey PRIMARY KEY (source, kind, day)
);

CREATE TABLE azync_jobs (
    id uuid NOT NULL,
    source text NOT NULL,
    kind text NOT NULL,
    state text NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    max_attempts integer DEFAULT 0 NOT NULL,
    max_attempts_explicit boolean DEFAULT false NOT NULL,
    reap_count integer DEFAULT 0 NOT NULL,
    payload bytea,
    meta jsonb DEFAULT '{}'::jsonb NOT NULL,
    run_at timestamp with time zone NOT NULL,
    lease_until timestamp with time zone,
    lease_token uuid,
    last_error text DEFAULT ''::text NOT NULL,
    idempotency_key text DEFAULT ''::text NOT NULL,
    event_id uuid,
    replay boolean DEFAULT false NOT NULL,
    dag_id uuid,
    run_id uuid,
    task_key text DEFAULT ''::text NOT NULL,
    result bytea,
    signal_name text DEFAULT ''::text NOT NULL,
    compensation_kind text DEFAULT ''::text NOT NULL,
    compensation_payload bytea,
    sleep_for interval,
    ignore_dead_deps boolean DEFAULT false NOT NULL,
    snooze_budget interval,
    deadline_at timestamp with time zone,
    uncertain_reason text DEFAULT ''::text NOT NULL,
    uncertain_since timestamp with time zone,
    decision text DEFAULT ''::text NOT NULL,
    decision_by text DEFAULT ''::text NOT NULL,
    decision_note text DEFAULT ''::text NOT NULL,
    decided_at timestamp with time zone,
    enqueued_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    failed_at timestamp with time zone,
    completed_at timestamp with time zone,
    updated_at timestamp with time zone NOT NULL,
    first_pass boolean DEFAULT false NOT NULL,
    order_key text,
    order_seq bigint,
    task_queue text DEFAULT 'default'::text NOT NULL,
    workflow_name text,
    blocked_reason text DEFAULT ''::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    limit_key text,
    start_deadline timestamp with time zone,
    close_deadline timestamp with time zone,
    CONSTRAINT azync_jobs_pkey PRIMARY KEY (id),
    CONSTRAINT azync_jobs_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'scheduled'::text, 'active'::text, 'succeeded'::text, 'dead'::text, 'paused'::text, 'skipped'::text, 'blocked'::text, 'waiting'::text, 'cancelled'::text, 'uncertain'::text]))),
    CONSTRAINT azync_jobs_state_source_check CHECK ((((state <> ALL (ARRAY['blocked'::text, 'waiting'::text])) OR (source = 'dag'::text)) AND ((state <> 'uncertain'::text) OR (source = 'workflow'::text))))
) WITH (autovacuum_analyze_scale_factor=0.02, autovacuum_vacuum_scale_factor=0.01, autovacuum_vacuum_threshold=1000, fillfactor=80);

CREATE TABLE azync_leaders (
    name text NOT NULL,
    holder text NOT NULL,
    term bigint NOT NULL,
    elected_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_leaders_pkey PRIMARY KEY (name)
);

CREATE TABLE azync_limit_scopes (
    source text NOT NULL,
    kind text NOT NULL,
    limit_name text NOT NULL,
    CONSTRAINT azync_limit_scopes_pkey PRIMARY KEY (source, kind, limit_name)
);

CREATE TABLE azync_limit_slots (
    limit_name text NOT NULL,
    key text NOT NULL,
    slot integer NOT NULL,
    holder uuid,
    holder_token uuid,
    holder_channel text,
    used_at timestamp with time zone,
    held_until timestamp with time zone,
    CONSTRAINT azync_limit_slots_pkey PRIMARY KEY (limit_name, key, slot)
);

CREATE TABLE azync_limits (
    name text NOT NULL,
    type text NOT NULL,
    capacity integer NOT NULL,
    period interval,
    per_key boolean DEFAULT false NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_limits_pkey PRIMARY KEY (name),
    CONSTRAINT azync_limits_capacity_check CHECK (((capacity >= 1) AND (capacity <= 10000))),
    CONSTRAINT azync_limits_period_check CHECK ((((type = 'rate'::text) AND (period > '00:00:00'::interval)) OR ((type = 'concurrency'::text) AND (period IS NULL)))),
    CONSTRAINT azync_limits_type_check CHECK ((type = ANY (ARRAY['concurrency'::text, 'rate'::text])))
);

CREATE TABLE azync_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    checksum text,
    CONSTRAINT azync_migrations_pkey PRIMARY KEY (version)
);

CREATE TABLE azync_schedule_changes (
    schedule_id text NOT NULL,
    seq bigint DEFAULT nextval('azync_schedule_changes_seq_seq'::regclass) NOT NULL,
    at timestamp with time zone NOT NULL,
    verb text NOT NULL,
    old_spec bytea,
    new_spec bytea,
    old_policy bytea,
    new_policy bytea,
    old_action bytea,
    new_action bytea,
    note text DEFAULT ''::text NOT NULL,
    CONSTRAINT azync_schedule_changes_pkey PRIMARY KEY (schedule_id, seq)
);

CREATE TABLE azync_schedule_missed (
    schedule_id text NOT NULL,
    first_nominal_at timestamp with time zone NOT NULL,
    last_nominal_at timestamp with time zone NOT NULL,
    count bigint NOT NULL,
    reason text NOT NULL,
    recorded_at timestamp with time zone NOT NULL,
    count_exact boolean DEFAULT true NOT NULL,
    CONSTRAINT azync_schedule_missed_pkey PRIMARY KEY (schedule_id, first_nominal_at)
);

CREATE TABLE azync_schedule_runs (
    schedule_id text NOT NULL,
    nominal_at timestamp with time zone NOT NULL,
    fire_at timestamp with time zone NOT NULL,
    run_id uuid NOT NULL,
    outcome text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    overlap text,
    start_seq bigint,
    CONSTRAINT azync_schedule_runs_pkey PRIMARY KEY (schedule_id, nominal_at),
    CONSTRAINT azync_schedule_runs_outcome_check CHECK ((outcome = ANY (ARRAY['requested'::text, 'buffered'::text, 'started'::text, 'skipped'::text, 'missed'::text])))
);

CREATE TABLE azync_schedules (
    id text NOT NULL,
    spec bytea NOT NULL,
    action bytea NOT NULL,
    policy bytea NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    cursor_at timestamp with time zone NOT NULL,
    next_fire_at timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    started_count bigint DEFAULT 0 NOT NULL,
    skipped_count bigint DEFAULT 0 NOT NULL,
    missed_count bigint DEFAULT 0 NOT NULL,
    CONSTRAINT azync_schedules_pkey PRIMARY KEY (id)
);

CREATE TABLE azync_subscribers (
    name text NOT NULL,
    event_type text NOT NULL,
    max_attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    ordered boolean DEFAULT false NOT NULL,
    CONSTRAINT azync_subscribers_pkey PRIMARY KEY (event_type, name)
);

CREATE TABLE azync_workers (
    id uuid NOT NULL,
    host text DEFAULT ''::text NOT NULL,
    pid integer DEFAULT 0 NOT NULL,
    workflows text[] DEFAULT '{}'::text[] NOT NULL,
    started_at timestamp with time zone NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    task_queues text[] DEFAULT '{default}'::text[] NOT NULL,
    activities text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT azync_workers_pkey PRIMARY KEY (id)
);

CREATE TABLE azync_workflow_executions (
    id uuid NOT NULL,
    name text NOT NULL,
    version text DEFAULT ''::text NOT NULL,
    state text NOT NULL,
    business_idempotency_key text DEFAULT ''::text NOT NULL,
    task_queue text DEFAULT 'default'::text NOT NULL,
    input bytea NOT NULL,
    result bytea,
    failure_reason text DEFAULT ''::text NOT NULL,
    suspend_reason text DEFAULT ''::text NOT NULL,
    cancel_requested boolean DEFAULT false NOT NULL,
    next_seq bigint DEFAULT 1 NOT NULL,
    meta jsonb DEFAULT '{}'::jsonb NOT NULL,
    trace_context jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    completed_at timestamp with time zone,
    suspend_seq bigint,
    suspend_operation_id uuid,
    signals_undelivered integer DEFAULT 0 NOT NULL,
    awaited_signals text[] DEFAULT '{}'::text[] NOT NULL,
    run_id uuid,
    run_no integer DEFAULT 1 NOT NULL,
    run_started_at timestamp with time zone,
    parent_id uuid,
    parent_run_id uuid,
    parent_seq bigint,
    parent_close_policy text DEFAULT ''::text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    execution_timeout interval,
    run_timeout interval,
    timeout_at timestamp with time zone,
    search_attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
    reset_from_run integer,
    reset_seq bigint,
    reset_reason text DEFAULT ''::text NOT NULL,
    progress_at timestamp with time zone GENERATED ALWAYS AS (date_bin('00:00:10'::interval, updated_at, '2000-01-01 00:00:00+00'::timestamp with time zone)) STORED,
    CONSTRAINT azync_workflow_executions_pkey PRIMARY KEY (id),
    CONSTRAINT azync_workflow_executions_state_check CHECK ((state = ANY (ARRAY['running'::text, 'suspended'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text, 'terminated'::text])))
) WITH (fillfactor=80);

CREATE TABLE azync_workflow_history (
    workflow_id uuid NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    payload bytea NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_workflow_history_pkey PRIMARY KEY (workflow_id, seq)
);

CREATE TABLE azync_workflow_queries (
    id uuid NOT NULL,
    workflow_id uuid NOT NULL,
    workflow_name text NOT NULL,
    name text NOT NULL,
    args bytea NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    answer bytea,
    error_type text DEFAULT ''::text NOT NULL,
    message text DEFAULT ''::text NOT NULL,
    deadline timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_workflow_queries_pkey PRIMARY KEY (id),
    CONSTRAINT azync_workflow_queries_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'claimed'::text, 'answered'::text, 'failed'::text])))
);

CREATE TABLE azync_workflow_run_history (
    workflow_id uuid NOT NULL,
    run_no integer NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    payload bytea NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_workflow_run_history_pkey PRIMARY KEY (workflow_id, run_no, seq)
);

CREATE TABLE azync_workflow_runs (
    workflow_id uuid NOT NULL,
    run_no integer NOT NULL,
    run_id uuid NOT NULL,
    input bytea NOT NULL,
    started_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone NOT NULL,
    events bigint NOT NULL,
    ended_as text DEFAULT 'continued_as_new'::text NOT NULL,
    reset_seq bigint,
    reset_reason text DEFAULT ''::text NOT NULL,
    state_at_reset text DEFAULT ''::text NOT NULL,
    CONSTRAINT azync_workflow_runs_pkey PRIMARY KEY (workflow_id, run_no)
);

CREATE TABLE azync_workflow_signals (
    id bigint DEFAULT nextval('azync_workflow_signals_id_seq'::regclass) NOT NULL,
    workflow_id uuid NOT NULL,
    name text NOT NULL,
    message_id text DEFAULT ''::text NOT NULL,
    payload bytea NOT NULL,
    consumed_seq bigint,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_workflow_signals_pkey PRIMARY KEY (id)
);

CREATE TABLE azync_workflow_timers (
    workflow_id uuid NOT NULL,
    seq bigint NOT NULL,
    fire_at timestamp with time zone NOT NULL,
    fired_at timestamp with time zone,
    CONSTRAINT azync_workflow_timers_pkey PRIMARY KEY (workflow_id, seq)
);

CREATE TABLE azync_workflow_updates (
    workflow_id uuid NOT NULL,
    update_id text NOT NULL,
    name text NOT NULL,
    state text NOT NULL,
    result bytea,
    error_type text DEFAULT ''::text NOT NULL,
    message text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT azync_workflow_updates_pkey PRIMARY KEY (workflow_id, update_id),
    CONSTRAINT azync_workflow_updates_state_check CHECK ((state = ANY (ARRAY['rejected'::text, 'completed'::text, 'failed'::text])))
);

-- Foreign keys

ALTER TABLE azync_dag_deps ADD CONSTRAINT azync_dag_deps_dag_id_fkey
    FOREIGN KEY (dag_id) REFERENCES azync_dags(id) ON DELETE CASCADE;

ALTER TABLE azync_dag_signals ADD CONSTRAINT azync_dag_signals_dag_id_fkey
    FOREIGN KEY (dag_id) REFERENCES azync_dags(id) ON DELETE CASCADE;

ALTER TABLE azync_job_attempts ADD CONSTRAINT azync_job_attempts_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES azync_jobs(id) ON DELETE CASCADE;

ALTER TABLE azync_jobs ADD CONSTRAINT azync_jobs_dag_id_fkey
    FOREIGN KEY (dag_id) REFERENCES azync_dags(id) ON DELETE CASCADE;

ALTER TABLE azync_jobs ADD CONSTRAINT azync_jobs_event_id_fkey
    FOREIGN KEY (event_id) REFERENCES azync_events(id) ON DELETE CASCADE;

ALTER TABLE azync_jobs ADD CONSTRAINT azync_jobs_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES azync_workflow_executions(id) ON DELETE CASCADE;

ALTER TABLE azync_limit_scopes ADD CONSTRAINT azync_limit_scopes_limit_name_fkey
    FOREIGN KEY (limit_name) REFERENCES azync_limits(name) ON DELETE CASCADE;

ALTER TABLE azync_limit_slots ADD CONSTRAINT azync_limit_slots_limit_name_fkey
    FOREIGN KEY (limit_name) REFERENCES azync_limits(name) ON DELETE CASCADE;

ALTER TABLE azync_schedule_changes ADD CONSTRAINT azync_schedule_changes_schedule_id_fkey
    FOREIGN KEY (schedule_id) REFERENCES azync_schedules(id) ON DELETE CASCADE;

ALTER TABLE azync_schedule_missed ADD CONSTRAINT azync_schedule_missed_schedule_id_fkey
    FOREIGN KEY (schedule_id) REFERENCES azync_schedules(id) ON DELETE CASCADE;

ALTER TABLE azync_schedule_runs ADD CONSTRAINT azync_schedule_runs_schedule_id_fkey
    FOREIGN KEY (schedule_id) REFERENCES azync_schedules(id) ON DELETE CASCADE;

ALTER TABLE azync_workflow_history ADD CONSTRAINT azync_workflow_history_workflow_id_fkey
    FOREIGN KEY (workflow_id) REFERENCES azync_workflow_executions(id) ON DELETE CASCADE;

ALTER TABLE azync_workflow_queries ADD CONSTRAINT azync_workflow_queries_workflow_id_fkey
    FOREIGN KEY (workflow_id) REFERENCES azync_workflow_executions(id) ON DELETE CASCADE;

ALTER TABLE azync_workflow_run_history ADD CONSTRAINT azync_workflow_run_history_workflow_id_run_no_fkey
    FOREIGN KEY (workflow_id, run_no) REFERENCES azync_workflow_runs(workflow_id, run_no) ON DELETE CASCADE;

ALTER TABLE azync_workflow_runs ADD CONSTRAINT azync_workflow_runs_workflow_id_fkey
    FOREIGN KEY (workflow_id) REFERENCES azync_workflow_executions(id) ON DELETE CASCADE;

ALTER TABLE azync_workflow_signals ADD CONSTRAINT azync_workflow_signals_workflow_id_fkey
    FOREIGN KEY (workflow_id) REFERENCES azync_workflow_executions(id) ON DELETE CASCADE;

ALTER TABLE azync_workflow_timers ADD CONSTRAINT azync_workflow_timers_workflow_id_fkey
    FOREIGN KEY (workflow_id) REFERENCES azync_workflow_executions(id) ON DELETE CASCADE;

ALTER TABLE azync_workflow_updates ADD CONSTRAINT azync_workflow_updates_workflow_id_fkey
    FOREIGN KEY (workflow_id) REFERENCES azync_workflow_executions(id) ON DELETE CASCADE;

-- Sequence owners

ALTER SEQUENCE azync_dag_signals_id_seq OWNED BY azync_dag_signals.id;

ALTER SEQUENCE azync_job_attempts_id_seq OWNED BY azync_job_attempts.id;

ALTER SEQUENCE azync_schedule_changes_seq_seq OWNED BY azync_schedule_changes.seq;

ALTER SEQUENCE azync_workflow_signals_id_seq OWNED BY azync_workflow_signals.id;

-- Indexes

CREATE INDEX azync_dag_deps_upstream ON azync_dag_deps USING btree (dag_id, depends_on_key);

CREATE UNIQUE INDEX azync_dag_signals_dedupe ON azync_dag_signals USING btree (dag_id, name, message_id) WHERE (message_id <> ''::text);

CREATE INDEX azync_dag_signals_unconsumed ON azync_dag_signals USING btree (dag_id, name, id) WHERE (consumed_at IS NULL);

CREATE INDEX azync_dags_active ON azync_dags USING btree (state) WHERE (state = ANY (ARRAY['running'::text, 'compensating'::text]));

CREATE INDEX azync_dags_created ON azync_dags USING btree (created_at DESC);

CREATE UNIQUE INDEX azync_dags_live_key ON azync_dags USING btree (name, idempotency_key) WHERE ((idempotency_key <> ''::text) AND (state = ANY (ARRAY['running'::text, 'suspended'::text, 'compensating'::text, 'paused'::text])));

CREATE INDEX azync_events_type_occurred ON azync_events USING btree (type, occurred_at DESC);

CREATE INDEX azync_idempotency_keys_expiry ON azync_idempotency_keys USING btree (source, expires_at);

CREATE INDEX azync_job_attempts_job ON azync_job_attempts USING btree (job_id, id);

CREATE INDEX azync_jobs_close_deadline ON azync_jobs USING btree (close_deadline) WHERE ((close_deadline IS NOT NULL) AND (state = ANY (ARRAY['pending'::text, 'scheduled'::text, 'active'::text, 'paused'::text])));

CREATE INDEX azync_jobs_completed ON azync_jobs USING btree (source, completed_at) WHERE (state = 'succeeded'::text);

CREATE INDEX azync_jobs_dag_recent ON azync_jobs USING btree (updated_at) WHERE (dag_id IS NOT NULL);

CREATE INDEX azync_jobs_dag_state ON azync_jobs USING btree (state, dag_id) WHERE (dag_id IS NOT NULL);

CREATE UNIQUE INDEX azync_jobs_dag_task ON azync_jobs USING btree (dag_id, task_key) WHERE (dag_id IS NOT NULL);

CREATE INDEX azync_jobs_event ON azync_jobs USING btree (event_id) WHERE (event_id IS NOT NULL);

CREATE INDEX azync_jobs_event_order ON azync_jobs USING btree (kind, order_key, order_seq) WHERE ((order_key IS NOT NULL) AND (state = ANY (ARRAY['pending'::text, 'scheduled'::text, 'active'::text])));

CREATE INDEX azync_jobs_event_order_active ON azync_jobs USING btree (kind, order_key) WHERE ((order_key IS NOT NULL) AND (state = 'active'::text));

CREATE INDEX azync_jobs_kind_state ON azync_jobs USING btree (source, kind, state) WHERE (state <> 'pending'::text);

CREATE INDEX azync_jobs_leased ON azync_jobs USING btree (lease_until) WHERE (state = 'active'::text);

CREATE INDEX azync_jobs_limit_ready ON azync_jobs USING btree (source, kind, task_queue, limit_key, azync_due_order(run_at, priority), id) WHERE ((state = 'pending'::text) AND (limit_key IS NOT NULL));

CREATE UNIQUE INDEX azync_jobs_live_key ON azync_jobs USING btree (source, kind, idempotency_key) WHERE ((idempotency_key <> ''::text) AND (state = ANY (ARRAY['pending'::text, 'scheduled'::text, 'active'::text, 'paused'::text, 'blocked'::text, 'waiting'::text, 'uncertain'::text])));

CREATE INDEX azync_jobs_ready ON azync_jobs USING btree (source, kind, task_queue, azync_due_order(run_at, priority), id) WHERE (state = 'pending'::text);

CREATE INDEX azync_jobs_run ON azync_jobs USING btree (run_id, task_key) WHERE (run_id IS NOT NULL);

CREATE INDEX azync_jobs_scheduled ON azync_jobs USING btree (run_at) WHERE (state = 'scheduled'::text);

CREATE INDEX azync_jobs_start_deadline ON azync_jobs USING btree (start_deadline) WHERE ((start_deadline IS NOT NULL) AND (attempt = 0) AND (state = ANY (ARRAY['pending'::text, 'scheduled'::text])));

CREATE INDEX azync_jobs_uncertain ON azync_jobs USING btree (uncertain_since, id) WHERE (state = 'uncertain'::text);

CREATE INDEX azync_jobs_workflow_task_active ON azync_jobs USING btree (run_id) WHERE ((source = 'workflow'::text) AND (task_key = '$wft'::text) AND (state = 'active'::text));

CREATE INDEX azync_jobs_workflow_task_due ON azync_jobs USING btree (task_queue, workflow_name, first_pass, azync_due_order(run_at, priority), id) WHERE ((source = 'workflow'::text) AND (task_key = '$wft'::text) AND (state = 'pending'::text));

CREATE UNIQUE INDEX azync_jobs_workflow_task_runnable ON azync_jobs USING btree (run_id) WHERE ((source = 'workflow'::text) AND (task_key = '$wft'::text) AND (state = ANY (ARRAY['pending'::text, 'scheduled'::text])));

CREATE INDEX azync_jobs_workflow_task_timed ON azync_jobs USING btree (task_queue, workflow_name, run_at, id) WHERE ((source = 'workflow'::text) AND (task_key = '$wft'::text) AND (state = 'scheduled'::text));

CREATE INDEX azync_limit_scopes_limit ON azync_limit_scopes USING btree (limit_name);

CREATE INDEX azync_limit_slots_holder ON azync_limit_slots USING btree (holder) WHERE (holder IS NOT NULL);

CREATE INDEX azync_schedule_runs_pending ON azync_schedule_runs USING btree (schedule_id) WHERE (outcome = ANY (ARRAY['buffered'::text, 'requested'::text]));

CREATE INDEX azync_schedules_due ON azync_schedules USING btree (next_fire_at) WHERE (NOT paused);

CREATE INDEX azync_workers_workflows ON azync_workers USING gin (workflows);

CREATE INDEX azync_workflow_executions_created ON azync_workflow_executions USING btree (created_at DESC);

CREATE UNIQUE INDEX azync_workflow_executions_live_key ON azync_workflow_executions USING btree (name, business_idempotency_key) WHERE ((business_idempotency_key <> ''::text) AND (state = ANY (ARRAY['running'::text, 'suspended'::text])));

CREATE INDEX azync_workflow_executions_parent ON azync_workflow_executions USING btree (parent_id, parent_run_id) WHERE (parent_id IS NOT NULL);

CREATE INDEX azync_workflow_executions_search ON azync_workflow_executions USING gin (search_attributes jsonb_path_ops);

CREATE INDEX azync_workflow_executions_state ON azync_workflow_executions USING btree (state, progress_at, id);

CREATE INDEX azync_workflow_executions_timeout ON azync_workflow_executions USING btree (timeout_at) WHERE ((timeout_at IS NOT NULL) AND (state = ANY (ARRAY['running'::text, 'suspended'::text])));

CREATE INDEX azync_workflow_queries_pending ON azync_workflow_queries USING btree (workflow_name, created_at) WHERE (state = 'pending'::text);

CREATE INDEX azync_workflow_queries_workflow ON azync_workflow_queries USING btree (workflow_id);

CREATE INDEX azync_workflow_signals_buffered ON azync_workflow_signals USING btree (workflow_id, id) WHERE (consumed_seq IS NULL);

CREATE UNIQUE INDEX azync_workflow_signals_dedupe ON azync_workflow_signals USING btree (workflow_id, name, message_id) WHERE (message_id <> ''::text);

CREATE INDEX azync_workflow_timers_due ON azync_workflow_timers USING btree (fire_at) WHERE (fired_at IS NULL);

-- Functions

CREATE OR REPLACE FUNCTION azync_dag_dead_reason(run uuid)
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO '<schema>'
AS $function$
    SELECT 'dead tasks: ' || string_agg(
               x.task_key
               || CASE WHEN EXISTS (SELECT 1 FROM azync_dag_deps e
                                    WHERE e.dag_id = x.dag_id AND e.depends_on_key = x.task_key)
                        AND NOT EXISTS (SELECT 1 FROM azync_dag_deps e
                                        JOIN azync_jobs y
                                          ON y.dag_id = e.dag_id AND y.task_key = e.task_key
                                        WHERE e.dag_id = x.dag_id
                                          AND e.depends_on_key = x.task_key
                                          AND NOT y.ignore_dead_deps)
                       THEN ' [tolerated]' ELSE '' END
               || CASE WHEN x.last_error = '' THEN ''
                       WHEN length(x.last_error) > 500
                       THEN ': ' || left(x.last_error, 497) || '...'
                       ELSE ': ' || x.last_error END,
               '; ' ORDER BY x.failed_at NULLS LAST, x.updated_at, x.task_key)
    FROM azync_jobs x
    WHERE x.dag_id = run AND x.state = 'dead' AND x.task_key NOT LIKE 'comp:%'
$function$;

CREATE OR REPLACE FUNCTION azync_due_order(p_run_at timestamp with time zone, p_priority integer)
 RETURNS timestamp with time zone
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ SELECT p_run_at - p_priority * interval '1 minute' $function$;

CREATE OR REPLACE FUNCTION azync_job_count(p_at timestamp with time zone, p_deltas azync_job_delta[])
 RETURNS bigint
 LANGUAGE plpgsql
 STRICT
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    written bigint;
BEGIN
    WITH w AS (
        INSERT INTO azync_job_stat_deltas (source, kind, day, enqueued, processed, failed,
                                           reaped)
        SELECT u.source, u.kind, (p_at AT TIME ZONE 'UTC')::date,
               sum(coalesce(u.enqueued, 0)), sum(coalesce(u.processed, 0)),
               sum(coalesce(u.failed, 0)), sum(coalesce(u.reaped, 0))
        FROM unnest(p_deltas) AS u
        GROUP BY u.source, u.kind
        HAVING sum(abs(coalesce(u.enqueued, 0)) + abs(coalesce(u.processed, 0))
                   + abs(coalesce(u.failed, 0)) + abs(coalesce(u.reaped, 0))) > 0
        RETURNING 1
    )
    SELECT count(*) INTO written FROM w;
    RETURN written;
END
$function$;

CREATE OR REPLACE FUNCTION azync_job_deadlines()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
BEGIN
    IF NEW.state IN ('pending', 'scheduled') THEN
        NEW.start_deadline := NEW.enqueued_at
            + make_interval(secs => (NEW.meta ->> 'schedule_to_start_s')::float8);
    END IF;
    NEW.close_deadline := NEW.enqueued_at
        + make_interval(secs => (NEW.meta ->> 'schedule_to_close_s')::float8);
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION azync_job_lease(p_at timestamp with time zone, p_source text, p_kind text, p_limit integer, p_lease interval, p_default_max integer, p_override boolean, p_queues text[], p_channel text)
 RETURNS SETOF azync_jobs
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_seqscan TO 'off'
AS $function$
BEGIN
    RETURN QUERY
    WITH limited AS (
        SELECT EXISTS (SELECT 1 FROM azync_limit_scopes s WHERE s.source = p_source AND s.kind = p_kind) AS yes
    ), qlim AS (
        SELECT coalesce(array_agg(q.q), '{}') AS qs FROM unnest(p_queues) AS q(q)
        WHERE (p_source = 'queue' OR p_kind LIKE '$op:%')
          AND EXISTS (SELECT 1 FROM azync_limit_scopes s
                      WHERE s.source = 'task_queue' AND s.kind = q.q)
    ), lim AS (
        SELECT l.* FROM azync_job_lease_limited(
            p_at, p_source, p_kind,
            CASE WHEN (SELECT yes FROM limited) THEN p_queues ELSE (SELECT qs FROM qlim) END,
            p_limit, p_lease, p_default_max, p_override, p_channel) l
        WHERE (SELECT yes FROM limited) OR cardinality((SELECT qs FROM qlim)) > 0
    ), picked AS (
        SELECT c.id FROM unnest(p_queues) AS q(q)
        CROSS JOIN LATERAL (
            SELECT j.id, azync_due_order(j.run_at, j.priority) AS o FROM azync_jobs j
            WHERE j.state = 'pending' AND j.source = p_source AND j.kind = p_kind AND j.task_queue = q.q
              AND j.run_at <= p_at
              -- past a deadline it is the timeouts step's, not a new attempt's
              AND (j.start_deadline IS NULL OR j.attempt > 0
                   OR j.start_deadline > p_at)
              AND (j.close_deadline IS NULL OR j.close_deadline > p_at)
            ORDER BY azync_due_order(j.run_at, j.priority), j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
        WHERE NOT (SELECT yes FROM limited) AND q.q <> ALL ((SELECT qs FROM qlim)::text[])
        ORDER BY c.o, c.id
        LIMIT p_limit - (SELECT count(*) FROM lim)
    ), up AS (
    UPDATE azync_jobs j
    SET state = 'active',
        attempt = j.attempt + 1,
        lease_token = azync_lease_token(),
        lease_until = p_at + p_lease,
        started_at = p_at,
        updated_at = p_at,
        max_attempts = CASE
            WHEN j.max_attempts_explicit THEN j.max_attempts
            WHEN j.started_at IS NULL AND p_override THEN p_default_max
            WHEN j.max_attempts <= 0 THEN p_default_max
            ELSE j.max_attempts END
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*
    )
    SELECT * FROM up
    UNION ALL
    SELECT * FROM lim;
END
$function$;

CREATE OR REPLACE FUNCTION azync_job_lease_limited(p_at timestamp with time zone, p_source text, p_kind text, p_queues text[], p_n integer, p_lease interval, p_default_max integer, p_override boolean, p_channel text)
 RETURNS SETOF azync_jobs
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
DECLARE
    fair text;
    heads int;
    c record;
    j azync_jobs;
    blocked text[] := '{}';
    n int := 0;
    tok uuid;
BEGIN
    IF p_n <= 0 THEN
        RETURN;
    END IF;
    -- the limit whose slots tell when a key was last admitted
    SELECT l.name INTO fair
    FROM azync_limit_scopes s JOIN azync_limits l ON l.name = s.limit_name
    WHERE (s.source = p_source AND s.kind = p_kind)
       OR (s.source = 'task_queue' AND s.kind = ANY (p_queues))
    ORDER BY NOT l.per_key, l.name LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- a key never gets more than its smallest per-key capacity in one call
    heads := least(p_n, coalesce((
        SELECT min(l.capacity) FROM azync_limit_scopes s JOIN azync_limits l ON l.name = s.limit_name
        WHERE s.source = p_source AND s.kind = p_kind AND l.per_key), p_n));
    FOR c IN
        WITH RECURSIVE keys AS (
            (SELECT q.q, (SELECT j2.limit_key FROM azync_jobs j2
                          WHERE j2.state = 'pending' AND j2.source = p_source
                            AND j2.kind = p_kind AND j2.task_queue = q.q
                            AND j2.limit_key IS NOT NULL
                          ORDER BY j2.limit_key LIMIT 1) AS key
             FROM unnest(p_queues) AS q(q))
            UNION ALL
            SELECT k2.q, (SELECT j2.limit_key FROM azync_jobs j2
                          WHERE j2.state = 'pending' AND j2.source = p_source
                            AND j2.kind = p_kind AND j2.task_queue = k2.q
                            AND j2.limit_key > k2.key
                          ORDER BY j2.limit_key LIMIT 1)
            FROM keys k2 WHERE k2.key IS NOT NULL
        )
        SELECT h.id, h.limit_key, h.rank, h.o, kk.served, kk.q
        FROM (SELECT k3.q, k3.key,
                     (SELECT max(s.used_at) FROM azync_limit_slots s
                      WHERE s.limit_name = fair AND s.key = k3.key) AS served
              FROM keys k3 WHERE k3.key IS NOT NULL) kk
        CROSS JOIN LATERAL (
            SELECT j3.id, j3.limit_key, azync_due_order(j3.run_at, j3.priority) AS o,
                   row_number() OVER (ORDER BY azync_due_order(j3.run_at, j3.priority), j3.id)
                       AS rank
            FROM azync_jobs j3
            WHERE j3.state = 'pending' AND j3.source = p_source AND j3.kind = p_kind
              AND j3.task_queue = kk.q AND j3.limit_key = kk.key AND j3.run_at <= p_at
            ORDER BY azync_due_order(j3.run_at, j3.priority), j3.id
            LIMIT heads
        ) h
        ORDER BY h.rank, kk.served NULLS FIRST, h.o, h.id
    LOOP
        EXIT WHEN n >= p_n;
        CONTINUE WHEN (c.q || chr(31) || c.limit_key) = ANY (blocked);
        SELECT * INTO j FROM azync_jobs
        WHERE id = c.id AND state = 'pending'
          AND (start_deadline IS NULL OR attempt > 0 OR start_deadline > p_at)
          AND (close_deadline IS NULL OR close_deadline > p_at)
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        tok := azync_lease_token();
        IF NOT azync_limit_admit(p_at, p_source, p_kind, c.limit_key, j.id, tok, p_channel,
                                 c.q) THEN
            -- a key is blocked per task queue: another queue may have room
            blocked := blocked || (c.q || chr(31) || c.limit_key);
            CONTINUE;
        END IF;
        UPDATE azync_jobs x
        SET state = 'active',
            attempt = x.attempt + 1,
            lease_token = tok,
            lease_until = p_at + p_lease,
            started_at = p_at,
            updated_at = p_at,
            max_attempts = CASE
                WHEN x.max_attempts_explicit THEN x.max_attempts
                WHEN x.started_at IS NULL AND p_override THEN p_default_max
                WHEN x.max_attempts <= 0 THEN p_default_max
                ELSE x.max_attempts END
        WHERE x.id = j.id
        RETURNING x.* INTO j;
        n := n + 1;
        RETURN NEXT j;
    END LOOP;
END
$function$;

CREATE OR REPLACE FUNCTION azync_job_limit_waits(p_source text, p_kind text, p_key text, p_at timestamp with time zone, p_queue text)
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO '<schema>'
AS $function$
    SELECT coalesce(string_agg(
        CASE WHEN sc.source = 'task_queue'
             THEN format('waits for %s limit %L of task queue %L', l.type, l.name, p_queue)
             WHEN l.per_key
             THEN format('waits for %s limit %L (key %L)', l.type, l.name, coalesce(p_key, ''))
             ELSE format('waits for %s limit %L', l.type, l.name) END, '; ' ORDER BY l.name), '')
    FROM (SELECT DISTINCT ON (s.limit_name) s.source, s.limit_name
          FROM azync_limit_scopes s
          WHERE (s.source = p_source AND s.kind = p_kind)
             OR (s.source = 'task_queue' AND s.kind = p_queue)
          ORDER BY s.limit_name, s.source = 'task_queue') sc
    JOIN azync_limits l ON l.name = sc.limit_name
    WHERE true
      AND (SELECT count(*) FROM azync_limit_slots s
           WHERE s.limit_name = l.name
             AND s.key = CASE WHEN l.per_key THEN coalesce(p_key, '') ELSE '' END
             AND CASE WHEN l.type = 'concurrency'
                      THEN s.holder IS NOT NULL
                           AND (s.held_until IS NULL OR s.held_until > p_at)
                      ELSE s.used_at >= p_at - l.period END) >= l.capacity
$function$;

CREATE OR REPLACE FUNCTION azync_job_settle(p_at timestamp with time zone, p_ids uuid[], p_tokens uuid[], p_state text, p_error text, p_result bytea, p_count boolean)
 RETURNS TABLE(id uuid, source text, kind text, attempt integer)
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH done AS (
        UPDATE azync_jobs j
        SET state = p_state,
            result = CASE WHEN p_result IS NOT NULL THEN p_result ELSE j.result END,
            last_error = CASE WHEN p_state = 'succeeded' THEN j.last_error ELSE p_error END,
            completed_at = CASE WHEN p_state = 'dead' THEN j.completed_at ELSE p_at END,
            failed_at = CASE WHEN p_state = 'dead' THEN p_at ELSE j.failed_at END,
            lease_until = NULL, updated_at = p_at
        FROM unnest(p_ids, p_tokens) AS s(id, token)
        WHERE j.id = s.id AND j.lease_token = s.token AND j.state = 'active'
        RETURNING j.id, j.source, j.kind, j.attempt
    ), a AS (
        INSERT INTO azync_job_attempts (job_id, attempt, error, at)
        SELECT d.id, d.attempt, p_error, p_at FROM done d WHERE p_state = 'dead'
    ), stat AS (
        SELECT azync_job_count(p_at, array_agg(ROW(
                   d.source, d.kind, 0, (p_state <> 'dead')::int, (p_state = 'dead')::int, 0
               )::azync_job_delta)) AS n
        FROM done d
        WHERE p_count
    )
    SELECT d.id, d.source, d.kind, d.attempt FROM done d
    WHERE (SELECT count(*) FROM stat) >= 0;
END
$function$;

CREATE OR REPLACE FUNCTION azync_keep_nonidempotent_op()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION azync_lease_token()
 RETURNS uuid
 LANGUAGE sql
 PARALLEL SAFE
AS $function$
    SELECT CASE WHEN length(current_setting('azync.holder', true)) = 8
                THEN overlay(gen_random_uuid()::text
                             PLACING current_setting('azync.holder', true) FROM 1 FOR 8)::uuid
                ELSE gen_random_uuid() END
$function$;

CREATE OR REPLACE FUNCTION azync_limit_admit(p_at timestamp with time zone, p_source text, p_kind text, p_key text, p_job uuid, p_token uuid, p_channel text, p_queue text)
 RETURNS boolean
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    l record;
    k text;
    sl int;
    prev timestamptz;
    names text[] := '{}';
    keys text[] := '{}';
    nos int[] := '{}';
    prevs timestamptz[] := '{}';
BEGIN
    FOR l IN
        SELECT d.name, d.type, d.capacity, d.period, d.per_key
        FROM azync_limits d
        WHERE d.name IN (SELECT s.limit_name FROM azync_limit_scopes s
                         WHERE (s.source = p_source AND s.kind = p_kind)
                            OR (s.source = 'task_queue' AND s.kind = p_queue))
        ORDER BY d.name
    LOOP
        k := CASE WHEN l.per_key THEN coalesce(p_key, '') ELSE '' END;
        FOR attempt IN 1 .. 2 LOOP
            -- lock a free slot (its last use kept to undo it), then take it
            SELECT f.slot, f.used_at INTO sl, prev FROM azync_limit_slots f
            WHERE f.limit_name = l.name AND f.key = k AND f.slot <= l.capacity
              AND CASE WHEN l.type = 'concurrency' THEN (f.holder IS NULL OR f.held_until <= p_at)
                       ELSE f.used_at IS NULL OR f.used_at < p_at - l.period END
            ORDER BY f.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
            IF FOUND AND (
                SELECT count(*) FROM azync_limit_slots b
                WHERE b.limit_name = l.name AND b.key = k
                  AND CASE WHEN l.type = 'concurrency' THEN b.holder IS NOT NULL AND (b.held_until IS NULL OR b.held_until > p_at)
                           ELSE b.used_at >= p_at - l.period END) < l.capacity THEN
                UPDATE azync_limit_slots s
                SET holder = CASE WHEN l.type = 'concurrency' THEN p_job END,
                    holder_token = CASE WHEN l.type = 'concurrency' THEN p_token END,
                    holder_channel = CASE WHEN l.type = 'concurrency' THEN p_channel END,
                    held_until = NULL,
                    used_at = p_at
                WHERE s.limit_name = l.name AND s.key = k AND s.slot = sl;
                EXIT;
            END IF;
            -- none free: on the key's first admission its slots do not exist yet
            IF attempt = 2 OR EXISTS (SELECT 1 FROM azync_limit_slots s
                                      WHERE s.limit_name = l.name AND s.key = k
                                        AND s.slot = l.capacity) THEN
                sl := NULL;
                EXIT;
            END IF;
            -- one creator at a time and no waiting on another's uncommitted
            -- slots (two leases creating two new keys in opposite orders would
            -- deadlock): a lease that cannot create them now admits nothing
            IF NOT pg_try_advisory_xact_lock(hashtextextended('azync_limit_slots:' || l.name
                                                              || ':' || k, 0)) THEN
                sl := NULL;
                EXIT;
            END IF;
            INSERT INTO azync_limit_slots (limit_name, key, slot)
            SELECT l.name, k, g FROM generate_series(1, l.capacity) g
            ON CONFLICT DO NOTHING;
        END LOOP;
        IF sl IS NULL THEN
            -- undo the slots taken for the limits before this one
            UPDATE azync_limit_slots s
            SET holder = NULL, holder_token = NULL, holder_channel = NULL, used_at = u.prev
            FROM unnest(names, keys, nos, prevs) AS u(name, key, slot, prev)
            WHERE s.limit_name = u.name AND s.key = u.key AND s.slot = u.slot;
            RETURN false;
        END IF;
        names := names || l.name;
        keys := keys || k;
        nos := nos || sl;
        prevs := prevs || prev;
    END LOOP;
    RETURN true;
END
$function$;

CREATE OR REPLACE FUNCTION azync_limit_free(p_job uuid, p_token uuid, p_source text, p_kind text, p_task_queue text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
DECLARE
    r record;
    n int := 0;
BEGIN
    FOR r IN
        UPDATE azync_limit_slots s SET holder = NULL, holder_token = NULL, holder_channel = NULL,
                                       held_until = NULL
        FROM azync_limit_slots o
        WHERE s.holder = p_job AND s.holder_token = p_token
          AND o.limit_name = s.limit_name AND o.key = s.key AND o.slot = s.slot
        RETURNING s.limit_name, s.key, s.slot, o.holder_channel AS channel
    LOOP
        n := n + 1;
        IF r.channel IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM azync_limit_slots f JOIN azync_limits l ON l.name = f.limit_name
            WHERE f.limit_name = r.limit_name AND f.key = r.key AND f.slot <> r.slot
              AND f.slot <= l.capacity AND f.holder IS NULL) THEN
            IF EXISTS (SELECT 1 FROM azync_limit_scopes sc
                       WHERE sc.source = 'task_queue' AND sc.kind = p_task_queue
                         AND sc.limit_name = r.limit_name) THEN
                -- a task queue's limit: whatever kind waits on that queue (a
                -- skip scan of azync_jobs_limit_ready: one probe per limited
                -- kind with a backlog, not one row per waiting job)
                PERFORM count(*) FROM (
                    WITH RECURSIVE sk AS (
                        (SELECT j.source, j.kind FROM azync_jobs j
                         WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                         ORDER BY j.source, j.kind LIMIT 1)
                        UNION ALL
                        SELECT nx.source, nx.kind FROM sk CROSS JOIN LATERAL (
                            SELECT j.source, j.kind FROM azync_jobs j
                            WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                              AND (j.source, j.kind) > (sk.source, sk.kind)
                            ORDER BY j.source, j.kind LIMIT 1) nx
                    )
                    SELECT pg_notify(r.channel, sk.source || ':' || sk.kind) FROM sk
                    WHERE EXISTS (SELECT 1 FROM azync_jobs j
                                  WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                                    AND j.source = sk.source AND j.kind = sk.kind
                                    AND j.task_queue = p_task_queue)
                ) w;
            ELSE
                PERFORM pg_notify(r.channel, p_source || ':' || p_kind);
            END IF;
        END IF;
    END LOOP;
    RETURN n;
END
$function$;

CREATE OR REPLACE FUNCTION azync_limit_release()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
BEGIN
    -- ended from outside while its lease lasts (cancelled, terminated, timed
    -- out): its attempt may still run, so its slots stay held until the lease
    -- ends or its worker says it stopped (azync_limit_release_stopped)
    IF TG_OP = 'UPDATE'
       AND (NEW.state = 'cancelled' OR (NEW.state = 'dead' AND NEW.lease_token IS NULL))
       AND OLD.lease_until > coalesce(NEW.updated_at, now()) THEN
        UPDATE azync_limit_slots s SET held_until = OLD.lease_until
        WHERE s.holder = OLD.id AND s.holder_token = OLD.lease_token;
        RETURN NULL;
    END IF;
    PERFORM azync_limit_free(OLD.id, OLD.lease_token, OLD.source, OLD.kind, OLD.task_queue);
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION azync_limit_release_stopped(p_at timestamp with time zone, p_job uuid, p_token uuid)
 RETURNS integer
 LANGUAGE sql
 SET search_path TO '<schema>'
AS $function$
    SELECT coalesce((
        SELECT azync_limit_free(p_job, p_token, j.source, j.kind, j.task_queue)
        FROM azync_jobs j
        WHERE j.id = p_job
          AND (j.state <> 'active' OR j.lease_token IS DISTINCT FROM p_token
               OR j.close_deadline <= p_at)
    ), 0)
$function$;

CREATE OR REPLACE FUNCTION azync_merge_workflow_task()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
DECLARE
    sibling uuid;
BEGIN
    PERFORM 1 FROM azync_workflow_executions WHERE id = NEW.run_id FOR NO KEY UPDATE;
    SELECT id INTO sibling FROM azync_jobs
    WHERE run_id = NEW.run_id AND source = 'workflow' AND task_key = '$wft'
      AND state IN ('pending', 'scheduled') AND id <> NEW.id;
    IF sibling IS NULL THEN
        RETURN NEW;
    END IF;
    UPDATE azync_jobs
    SET run_at = least(run_at, NEW.run_at),
        state = CASE WHEN least(run_at, NEW.run_at) > NEW.updated_at
                     THEN 'scheduled' ELSE 'pending' END,
        updated_at = NEW.updated_at
    WHERE id = sibling;
    NEW.state := 'cancelled';
    NEW.lease_until := NULL;
    NEW.completed_at := NEW.updated_at;
    NEW.last_error := 'superseded by runnable workflow task ' || sibling::text;
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION azync_op_refuse_late_completion()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
BEGIN
    IF OLD.close_deadline <= coalesce(NEW.updated_at, now()) THEN
        RAISE EXCEPTION 'operation % (%) reported its outcome after its schedule-to-close '
                        'deadline (%): the report is refused and the call times out',
                        OLD.id, OLD.task_key, OLD.close_deadline
            USING ERRCODE = 'AZ408';
    END IF;
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION azync_publish_event(p_id uuid, p_type text, p_aggregate_type text, p_aggregate_id text, p_version bigint, p_occurred_at timestamp with time zone, p_payload bytea, p_meta jsonb, p_channel text, p_at timestamp with time zone)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    delivered bigint;
    seq bigint;
BEGIN
    INSERT INTO azync_events (id, type, aggregate_type, aggregate_id, version, occurred_at,
                              payload, meta, created_at)
    VALUES (p_id, p_type, p_aggregate_type, p_aggregate_id, p_version, p_occurred_at,
            p_payload, p_meta, p_at);
    IF EXISTS (SELECT 1 FROM azync_subscribers s WHERE s.event_type = p_type AND s.ordered) THEN
        seq := nextval('azync_event_order_seq');
    END IF;
    WITH ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, run_at, max_attempts,
                                max_attempts_explicit, event_id, enqueued_at, updated_at,
                                order_key, order_seq)
        SELECT gen_random_uuid(), 'event', s.name, 'pending', p_at, s.max_attempts,
               s.max_attempts > 0, p_id, p_at, p_at,
               CASE WHEN s.ordered THEN p_aggregate_id END,
               CASE WHEN s.ordered THEN seq END
        FROM azync_subscribers s
        WHERE s.event_type = p_type
        RETURNING kind
    ), stat AS (
        SELECT azync_job_count(p_at, array_agg(ROW('event', kind, 1, 0, 0, 0)::azync_job_delta))
        FROM ins
    ), wake AS (
        SELECT pg_notify(p_channel, 'event:' || kind) FROM ins
    )
    SELECT count(*) INTO delivered FROM ins
    WHERE (SELECT count(*) FROM wake) >= 0 AND (SELECT count(*) FROM stat) >= 0;
    RETURN delivered;
END
$function$;

CREATE OR REPLACE FUNCTION azync_schedule_workflow_task(p_run uuid, p_kind text, p_run_at timestamp with time zone, p_at timestamp with time zone, p_channel text)
 RETURNS TABLE(id uuid, state text, kind text, inserted boolean)
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH up AS (
        INSERT INTO azync_jobs AS j (id, source, kind, state, run_at, run_id, task_key,
                                     enqueued_at, updated_at, workflow_name, task_queue,
                                     priority)
        SELECT gen_random_uuid(), 'workflow', p_kind,
               CASE WHEN coalesce(p_run_at, p_at) > p_at THEN 'scheduled' ELSE 'pending' END,
               coalesce(p_run_at, p_at), p_run, '$wft', p_at, p_at, e.name, e.task_queue,
               e.priority
        FROM azync_workflow_executions e
        WHERE e.id = p_run
        ON CONFLICT (run_id)
            WHERE source = 'workflow' AND task_key = '$wft' AND state IN ('pending', 'scheduled')
            DO UPDATE SET
                run_at = least(j.run_at, EXCLUDED.run_at),
                state = CASE WHEN least(j.run_at, EXCLUDED.run_at) > EXCLUDED.updated_at
                             THEN 'scheduled' ELSE 'pending' END,
                updated_at = EXCLUDED.updated_at
        RETURNING j.id, j.state, j.kind, (j.xmax = 0) AS inserted
    ), wake AS (
        SELECT azync_wake(p_channel, 'workflow:' || u.kind) FROM up u WHERE u.state = 'pending'
    )
    SELECT u.id, u.state, u.kind, u.inserted FROM up u
    WHERE (SELECT count(*) FROM wake) >= 0;
END
$function$;

CREATE OR REPLACE FUNCTION azync_wake(p_channel text, p_payload text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
BEGIN
    IF current_setting('azync.defer_wakes', true) = 'on' THEN
        PERFORM set_config('azync.wakes',
                           coalesce(current_setting('azync.wakes', true), '') || p_payload || E'\n',
                           true);
    ELSE
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_children_start(p_at timestamp with time zone, p_channel text, p_id uuid, p_run uuid, p_seqs bigint[], p_ids uuid[], p_names text[], p_versions text[], p_inputs bytea[], p_policies text[], p_carriers text[], p_routes text[])
 RETURNS SETOF uuid
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
    RETURN QUERY WITH req AS (
        SELECT u.*, coalesce(u.route::jsonb ->> 'task_queue', 'default') AS task_queue,
               coalesce((u.route::jsonb ->> 'priority')::int, 0) AS priority,
               make_interval(secs => (u.route::jsonb ->> 'execution_timeout_s')::float8)
                   AS execution_timeout,
               make_interval(secs => (u.route::jsonb ->> 'run_timeout_s')::float8)
                   AS run_timeout
        FROM unnest(p_seqs, p_ids, p_names, p_versions, p_inputs, p_policies, p_carriers,
                    p_routes) WITH ORDINALITY
             AS u(seq, id, name, version, input, policy, carrier, route, ord)
    ), ins AS (
        INSERT INTO azync_workflow_executions (id, name, version, state, input, trace_context,
                                               parent_id, parent_run_id, parent_seq,
                                               parent_close_policy, task_queue, priority,
                                               execution_timeout, run_timeout, timeout_at,
                                               created_at, updated_at)
        SELECT r.id, r.name, r.version, 'running', r.input, r.carrier::jsonb, p_id, p_run,
               r.seq, r.policy, r.task_queue, r.priority, r.execution_timeout, r.run_timeout,
               least(p_at + r.execution_timeout, p_at + r.run_timeout), p_at, p_at
        FROM req r
        ORDER BY r.ord
        ON CONFLICT DO NOTHING
        RETURNING id, name, task_queue, priority, created_at
    ), task AS (
        INSERT INTO azync_jobs (id, source, kind, state, run_at, run_id, task_key,
                                enqueued_at, updated_at, workflow_name, task_queue, priority)
        SELECT gen_random_uuid(), 'workflow', '$wft', 'pending', i.created_at, i.id, '$wft',
               i.created_at, i.created_at, i.name, i.task_queue, i.priority
        FROM ins i
        RETURNING run_id
    ), wake AS (
        SELECT azync_wake(p_channel, 'workflow:$wft') FROM (SELECT 1 FROM task LIMIT 1) k
    )
    SELECT t.run_id FROM task t WHERE (SELECT count(*) FROM wake) >= 0;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_close_children(p_id uuid, p_run uuid, p_at timestamp with time zone, p_channel text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    c record;
    n int := 0;
    why text;
BEGIN
    FOR c IN
        SELECT e.id, e.state, e.next_seq, e.parent_close_policy FROM azync_workflow_executions e
        WHERE e.parent_id = p_id AND e.parent_run_id = p_run
          AND e.state IN ('running', 'suspended') AND e.parent_close_policy <> 'abandon'
        ORDER BY e.id
        FOR NO KEY UPDATE
    LOOP
        n := n + 1;
        IF c.parent_close_policy = 'request_cancel' THEN
            UPDATE azync_workflow_executions
            SET cancel_requested = true, updated_at = p_at WHERE id = c.id;
            IF c.state = 'running' THEN
                PERFORM azync_workflow_wake_task(c.id, p_at, p_channel);
            END IF;
            CONTINUE;
        END IF;
        why := 'parent workflow ' || p_id::text || ' closed (parent-close policy terminate)';
        INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
        VALUES (c.id, c.next_seq, 'WorkflowTerminated',
                convert_to(jsonb_build_object('type', 'WorkflowTerminated', 'reason', why,
                                              'terminated_by', 'parent-close-policy')::text,
                           'UTF8'),
                p_at);
        UPDATE azync_workflow_executions
        SET next_seq = c.next_seq + 1, updated_at = p_at WHERE id = c.id;
        UPDATE azync_jobs
        SET state = 'cancelled', lease_token = NULL, lease_until = NULL, last_error = why,
            completed_at = p_at, updated_at = p_at
        WHERE run_id = c.id AND source = 'workflow'
          AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain');
        UPDATE azync_workflow_timers SET fired_at = p_at
        WHERE workflow_id = c.id AND fired_at IS NULL;
        PERFORM azync_workflow_finish(c.id, 'terminated', NULL, why, p_at, p_channel);
    END LOOP;
    RETURN n;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_continue(p_id uuid, p_input bytea, p_new_run uuid, p_cancel_seen boolean, p_at timestamp with time zone, p_channel text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    ex record;
BEGIN
    SELECT e.run_id, e.run_no, e.input, e.next_seq, coalesce(e.run_started_at, e.created_at)
        AS started
    INTO ex FROM azync_workflow_executions e
    WHERE e.id = p_id AND e.state = 'running'
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    PERFORM azync_workflow_close_children(p_id, coalesce(ex.run_id, p_id), p_at, p_channel);
    INSERT INTO azync_workflow_runs (workflow_id, run_no, run_id, input, started_at, ended_at,
                                     events)
    VALUES (p_id, ex.run_no, coalesce(ex.run_id, p_id), ex.input, ex.started, p_at,
            ex.next_seq - 1);
    INSERT INTO azync_workflow_run_history (workflow_id, run_no, seq, type, payload, created_at)
    SELECT workflow_id, ex.run_no, seq, type, payload, created_at
    FROM azync_workflow_history WHERE workflow_id = p_id;
    DELETE FROM azync_workflow_history WHERE workflow_id = p_id;
    DELETE FROM azync_workflow_timers WHERE workflow_id = p_id;
    UPDATE azync_jobs
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = 'its workflow run continued as new', completed_at = p_at, updated_at = p_at
    WHERE run_id = p_id AND source = 'workflow' AND task_key <> '$wft'
      AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain');
    UPDATE azync_workflow_executions
    SET run_id = p_new_run, run_no = ex.run_no + 1, run_started_at = p_at, input = p_input,
        next_seq = 1, awaited_signals = '{}', updated_at = p_at,
        cancel_requested = cancel_requested AND NOT p_cancel_seen,
        timeout_at = least(created_at + execution_timeout, p_at + run_timeout)
    WHERE id = p_id;
    RETURN ex.run_no + 1;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_finish(p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamp with time zone, p_channel text)
 RETURNS TABLE(retired bigint, undelivered integer)
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    r record;
    fam record;
BEGIN
    SELECT * INTO r FROM azync_workflow_finish_run(p_id, p_state, p_result, p_reason, p_at,
                                                   p_channel);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT coalesce(e.run_id, e.id) AS run, e.parent_id INTO fam
    FROM azync_workflow_executions e WHERE e.id = p_id;
    IF EXISTS (
        SELECT 1 FROM azync_workflow_executions c
        WHERE c.parent_id = p_id AND c.parent_run_id = fam.run
          AND c.state IN ('running', 'suspended') AND c.parent_close_policy <> 'abandon'
    ) THEN
        PERFORM azync_workflow_close_children(p_id, fam.run, p_at, p_channel);
    END IF;
    IF fam.parent_id IS NOT NULL THEN
        PERFORM azync_workflow_notify_parent(p_id, p_state, p_result, p_reason, p_at,
                                             p_channel);
    END IF;
    RETURN QUERY SELECT r.retired, r.undelivered;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_finish_run(p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamp with time zone, p_channel text)
 RETURNS TABLE(retired bigint, undelivered integer)
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    ex record;
    n int;
    seq bigint;
    ids bigint[];
    sigs jsonb;
    gone bigint;
BEGIN
    SELECT e.next_seq, e.name, e.trace_context INTO ex
    FROM azync_workflow_executions e
    WHERE e.id = p_id AND e.state IN ('running', 'suspended')
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT count(*)::int, array_agg(s.id ORDER BY s.id),
           jsonb_agg(jsonb_build_object('signal_id', s.id, 'name', s.name,
                                        'message_id', s.message_id) ORDER BY s.id)
    INTO n, ids, sigs
    FROM azync_workflow_signals s
    WHERE s.workflow_id = p_id AND s.consumed_seq IS NULL;
    seq := ex.next_seq;
    IF n > 0 THEN
        INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
        VALUES (p_id, seq, 'SignalsUndelivered',
                convert_to(jsonb_build_object('type', 'SignalsUndelivered', 'seq', seq,
                                              'signals', sigs)::text, 'UTF8'),
                p_at);
        UPDATE azync_workflow_signals SET consumed_seq = seq WHERE id = ANY(ids);
        PERFORM azync_publish_event(
            gen_random_uuid(), 'azync.workflow.signals_undelivered', 'workflow', p_id::text, 0,
            p_at,
            convert_to(jsonb_build_object('workflow_id', p_id, 'workflow_name', ex.name,
                                          'state', p_state, 'history_seq', seq,
                                          'count', n, 'signals', sigs)::text, 'UTF8'),
            ex.trace_context, p_channel, p_at);
        seq := seq + 1;
    END IF;
    UPDATE azync_workflow_executions
    SET state = p_state, result = p_result, failure_reason = p_reason,
        completed_at = p_at, updated_at = p_at, next_seq = seq, signals_undelivered = n
    WHERE id = p_id;
    UPDATE azync_jobs
    SET state = 'cancelled', completed_at = p_at, updated_at = p_at
    WHERE run_id = p_id AND source = 'workflow' AND state IN ('pending', 'scheduled', 'paused');
    GET DIAGNOSTICS gone = ROW_COUNT;
    PERFORM azync_wake(p_channel, 'workflow.done:' || p_id::text);
    RETURN QUERY SELECT gone, n;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_notify_parent(p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamp with time zone, p_channel text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    ch record;
    par record;
    head text;
    etype text;
    emsg text;
    body bytea;
BEGIN
    SELECT e.parent_id, e.parent_run_id, e.parent_seq INTO ch
    FROM azync_workflow_executions e WHERE e.id = p_id;
    IF ch.parent_id IS NULL THEN
        RETURN;
    END IF;
    SELECT e.next_seq, e.state INTO par FROM azync_workflow_executions e
    WHERE e.id = ch.parent_id AND coalesce(e.run_id, e.id) = ch.parent_run_id
      AND e.state IN ('running', 'suspended')
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_state = 'succeeded' THEN
        body := convert_to('{"type":"ChildCompleted","started_seq":' || ch.parent_seq
                           || ',"workflow_id":"' || p_id::text || '","result":', 'UTF8')
                || coalesce(p_result, convert_to('null', 'UTF8')) || convert_to('}', 'UTF8');
        head := 'ChildCompleted';
    ELSE
        head := substring(p_reason FROM '^([A-Za-z_][A-Za-z0-9_.]*): ');
        IF p_state = 'failed' AND head IS NOT NULL THEN
            etype := head;
            emsg := substring(p_reason FROM char_length(head) + 3);
        ELSE
            etype := CASE p_state WHEN 'cancelled' THEN 'WorkflowCancelled'
                                  WHEN 'terminated' THEN 'WorkflowTerminated'
                                  ELSE 'WorkflowFailed' END;
            emsg := p_reason;
        END IF;
        body := convert_to(jsonb_build_object('type', 'ChildFailed', 'started_seq', ch.parent_seq,
                                              'workflow_id', p_id, 'state', p_state,
                                              'error_type', etype, 'message', emsg)::text,
                           'UTF8');
        head := 'ChildFailed';
    END IF;
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    VALUES (ch.parent_id, par.next_seq, head, body, p_at);
    UPDATE azync_workflow_executions
    SET next_seq = par.next_seq + 1, updated_at = p_at WHERE id = ch.parent_id;
    IF par.state = 'running' THEN
        PERFORM azync_workflow_wake_task(ch.parent_id, p_at, p_channel);
    END IF;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_ops_insert(p_at timestamp with time zone, p_channel text, p_id uuid, p_kinds text[], p_payloads bytea[], p_metas text[], p_keys text[], p_run_ats timestamp with time zone[], p_max_attempts integer[], p_routes text[], p_local_keys text[], p_local_lease interval, p_local_budget integer)
 RETURNS TABLE(task_key text, id uuid, kind text, state text, attempt integer, max_attempts integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp with time zone, run_at timestamp with time zone, enqueued_at timestamp with time zone)
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    woken text[] := '{}';
BEGIN
    IF jsonb_path_exists(('[' || coalesce(array_to_string(p_routes, ','), '') || ']')::jsonb,
                         '$[*].limit_key')
       OR EXISTS (SELECT 1 FROM azync_limit_scopes sc
                  WHERE sc.source = 'task_queue'
                     OR (sc.source = 'workflow' AND sc.kind = ANY(p_kinds))) THEN
        -- limited operations: admitted one by one, in order
        RETURN QUERY WITH existing AS (
            SELECT DISTINCT j.task_key FROM azync_jobs j
            WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = ANY(p_keys)
              AND j.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
        ), wanted AS MATERIALIZED (
            SELECT u.*, coalesce(u.run_at, p_at) AS due,
                   (u.run_at IS NULL AND u.key = ANY(coalesce(p_local_keys, '{}'))) AS local,
                   coalesce(u.route::jsonb ->> 'task_queue', 'default') AS task_queue,
                   coalesce((u.route::jsonb ->> 'priority')::int, 0) AS priority,
                   coalesce(u.route::jsonb ->> 'limit_key',
                            CASE WHEN EXISTS (
                                SELECT 1 FROM azync_limit_scopes sc
                                WHERE sc.source = 'task_queue'
                                  AND sc.kind = coalesce(u.route::jsonb ->> 'task_queue', 'default'))
                            THEN '' END) AS limit_key,
                   gen_random_uuid() AS job_id, azync_lease_token() AS token
            FROM unnest(p_kinds, p_payloads, p_metas, p_keys, p_run_ats, p_max_attempts, p_routes)
                 WITH ORDINALITY AS u(kind, payload, meta, key, run_at, max_attempts, route, ord)
            WHERE NOT EXISTS (SELECT 1 FROM existing e WHERE e.task_key = u.key)
        ), req AS MATERIALIZED (
            -- a local operation of a limited kind is leased only when admitted
            -- (CASE: the admission must not run for an operation left pending)
            SELECT w.*,
                   CASE WHEN NOT w.local THEN false
                        WHEN w.limit_key IS NULL AND NOT EXISTS (
                                 SELECT 1 FROM azync_limit_scopes sc
                                 WHERE sc.source = 'workflow' AND sc.kind = w.kind) THEN true
                        ELSE azync_limit_admit(p_at, 'workflow', w.kind, coalesce(w.limit_key, ''),
                                               w.job_id, w.token, p_channel, w.task_queue) END
                       AS leased
            FROM wanted w
            ORDER BY w.ord
        ), ins AS (
            INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at,
                                    max_attempts, max_attempts_explicit, run_id, task_key,
                                    enqueued_at, updated_at, attempt, lease_token,
                                    lease_until, started_at, task_queue, priority, limit_key)
            SELECT r.job_id, 'workflow', r.kind,
                   CASE WHEN r.leased THEN 'active' WHEN r.due > p_at THEN 'scheduled'
                        ELSE 'pending' END,
                   r.payload, r.meta::jsonb, r.due,
                   CASE WHEN r.leased AND r.max_attempts <= 0 THEN p_local_budget
                        ELSE r.max_attempts END,
                   r.max_attempts > 0, p_id, r.key, p_at, p_at,
                   CASE WHEN r.leased THEN 1 ELSE 0 END,
                   CASE WHEN r.leased THEN r.token END,
                   CASE WHEN r.leased THEN p_at + p_local_lease END,
                   CASE WHEN r.leased THEN p_at END,
                   r.task_queue, r.priority, r.limit_key
            FROM req r
            ORDER BY r.ord
            RETURNING task_key, id, kind, state, attempt, max_attempts, lease_token,
                      lease_until, started_at, run_at, enqueued_at
        ), wake AS (
            SELECT azync_wake(p_channel, 'workflow:' || k.kind)
            FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
        )
        SELECT i.* FROM ins i WHERE (SELECT count(*) FROM wake) >= 0;
        RETURN;
    END IF;
    -- No limit applies: one plain insert of those not live already.
    RETURN QUERY
    INSERT INTO azync_jobs AS j (id, source, kind, state, payload, meta, run_at,
                                 max_attempts, max_attempts_explicit, run_id, task_key,
                                 enqueued_at, updated_at, attempt, lease_token,
                                 lease_until, started_at, task_queue, priority)
    SELECT gen_random_uuid(), 'workflow', u.kind,
           CASE WHEN u.local THEN 'active' WHEN u.due > p_at THEN 'scheduled'
                ELSE 'pending' END,
           u.payload, u.meta::jsonb, u.due,
           CASE WHEN u.local AND u.max_attempts <= 0 THEN p_local_budget
                ELSE u.max_attempts END,
           u.max_attempts > 0, p_id, u.key, p_at, p_at,
           CASE WHEN u.local THEN 1 ELSE 0 END,
           CASE WHEN u.local THEN azync_lease_token() END,
           CASE WHEN u.local THEN p_at + p_local_lease END,
           CASE WHEN u.local THEN p_at END,
           coalesce(u.route::jsonb ->> 'task_queue', 'default'),
           coalesce((u.route::jsonb ->> 'priority')::int, 0)
    FROM (SELECT v.*, coalesce(v.run_at, p_at) AS due,
                 (v.run_at IS NULL AND v.key = ANY(coalesce(p_local_keys, '{}'))) AS local
          FROM unnest(p_kinds, p_payloads, p_metas, p_keys, p_run_ats, p_max_attempts, p_routes)
               WITH ORDINALITY AS v(kind, payload, meta, key, run_at, max_attempts, route, ord)
         ) u
    WHERE u.key <> ALL (ARRAY(
        SELECT x.task_key FROM azync_jobs x
        WHERE x.run_id = p_id AND x.task_key = ANY(p_keys) AND x.source = 'workflow'
          AND x.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')))
    RETURNING j.task_key, j.id, j.kind, j.state, j.attempt, j.max_attempts, j.lease_token,
              j.lease_until, j.started_at, j.run_at, j.enqueued_at;
    -- a wake per kind left pending (one for an operation live already is harmless)
    FOR i IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
        IF p_run_ats[i] IS NULL AND NOT p_keys[i] = ANY(coalesce(p_local_keys, '{}'))
           AND NOT p_kinds[i] = ANY(woken) THEN
            PERFORM azync_wake(p_channel, 'workflow:' || p_kinds[i]);
            woken := woken || p_kinds[i];
        END IF;
    END LOOP;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_pass_commit(p_at timestamp with time zone, p_channel text, p_id uuid, p_run uuid, p_jobs uuid[], p_tokens uuid[], p_task boolean, p_errors text[], p_expected bigint, p_types text[], p_payloads bytea[], p_awaited text[], p_op_kinds text[], p_op_payloads bytea[], p_op_metas text[], p_op_keys text[], p_op_run_ats timestamp with time zone[], p_op_max_attempts integer[], p_op_routes text[], p_local_keys text[], p_local_lease interval, p_local_budget integer, p_timer_seqs bigint[], p_timer_delays interval[], p_fired bigint[], p_signal_ids bigint[], p_signal_seqs bigint[], p_update_ids text[], p_update_names text[], p_update_states text[], p_update_results bytea[], p_update_error_types text[], p_update_messages text[], p_child_seqs bigint[], p_child_ids uuid[], p_child_names text[], p_child_versions text[], p_child_inputs bytea[], p_child_policies text[], p_child_carriers text[], p_child_routes text[], p_child_signal_ids uuid[], p_child_signal_names text[], p_child_signal_payloads bytea[], p_child_signal_message_ids text[], p_child_cancels uuid[], p_outcome text, p_result bytea, p_reason text, p_suspend_seq bigint, p_new_run uuid, p_cancel_seen boolean, p_next_at timestamp with time zone, p_next_now boolean, p_signals_wake boolean, p_keep_lease interval)
 RETURNS TABLE(ok boolean, fenced bigint, state text, next_seq bigint, at timestamp with time zone, missing bigint[], leased_keys text[], leased_ids uuid[], leased_attempts integer[], leased_max_attempts integer[], leased_tokens uuid[], leased_until timestamp with time zone[], leased_at timestamp with time zone[])
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
 SET "azync.defer_wakes" TO 'on'
AS $function$
#variable_conflict use_column
DECLARE
    n bigint;
    ex record;
    st text;
    nxt bigint;
    lost bigint[];
    deltas azync_job_delta[];
    more azync_job_delta[];
    checkpoint boolean;
    ends boolean := p_outcome IS NOT NULL AND p_outcome <> 'suspend';
    kids record;
    appended int := 0;
    want timestamptz;
    t record;
    w bigint;
    l_keys text[]; l_ids uuid[]; l_attempts int[]; l_max int[]; l_tokens uuid[];
    l_until timestamptz[]; l_at timestamptz[];
    op record;
    acked record;
BEGIN
    PERFORM set_config('azync.wakes', '', true);  -- this statement's wakes only
    -- Fence: the jobs, THEN the execution row.
    PERFORM FROM azync_jobs j
    WHERE j.id = ANY(p_jobs) AND j.lease_token = p_tokens[array_position(p_jobs, j.id)]
      AND j.state = 'active' AND j.source = 'workflow' AND j.run_id = p_id
      AND (j.task_key = '$wft') = p_task
    ORDER BY j.id
    FOR UPDATE OF j;
    GET DIAGNOSTICS n = ROW_COUNT;
    SELECT e.state, e.next_seq, e.cancel_requested INTO ex FROM azync_workflow_executions e
    WHERE e.id = p_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF n <> cardinality(p_jobs) OR ex.next_seq <> p_expected
       OR NOT (ex.state = 'running' OR (p_task AND ex.state = 'suspended')) THEN
        RETURN QUERY SELECT false, n, ex.state, ex.next_seq, p_at, NULL::bigint[], NULL::text[],
                            NULL::uuid[], NULL::int[], NULL::int[], NULL::uuid[],
                            NULL::timestamptz[], NULL::timestamptz[];
        RETURN;
    END IF;
    IF ex.cancel_requested AND p_cancel_seen IS NOT TRUE
       AND (p_outcome IS NULL OR p_outcome IN ('complete', 'fail')) THEN
        -- a cancel requested after the pass loaded its state: refused, so it
        -- runs again with the request instead of going on (or ending) past it
        RETURN QUERY SELECT false, n, ex.state, ex.next_seq, p_at, NULL::bigint[], NULL::text[],
                            NULL::uuid[], NULL::int[], NULL::int[], NULL::uuid[],
                            NULL::timestamptz[], NULL::timestamptz[];
        RETURN;
    END IF;
    IF cardinality(p_signal_ids) > 0 THEN
        -- Only a pass commit consumes a signal, and it holds the execution row.
        SELECT array_agg(u.id ORDER BY u.id) INTO lost
        FROM (SELECT DISTINCT id FROM unnest(p_signal_ids) AS id) u
        WHERE NOT EXISTS (
            SELECT 1 FROM azync_workflow_signals s
            WHERE s.id = u.id AND s.workflow_id = p_id AND s.consumed_seq IS NULL);
        IF lost IS NOT NULL THEN
            RETURN QUERY SELECT false, n, ex.state, ex.next_seq, p_at, lost, NULL::text[],
                                NULL::uuid[], NULL::int[], NULL::int[], NULL::uuid[],
                                NULL::timestamptz[], NULL::timestamptz[];
            RETURN;
        END IF;
    END IF;
    st := ex.state;

    -- The jobs that carried the pass.
    checkpoint := p_keep_lease IS NOT NULL AND p_outcome IS NULL AND st = 'running';
    IF checkpoint THEN
        UPDATE azync_jobs a SET lease_until = p_at + p_keep_lease, updated_at = p_at
        WHERE a.id = ANY(p_jobs) AND a.state = 'active';
    ELSE
        FOR acked IN
            UPDATE azync_jobs a
            SET state = 'succeeded', completed_at = p_at, lease_until = NULL, updated_at = p_at
            WHERE a.id = ANY(p_jobs) AND a.state = 'active'
              AND p_errors[array_position(p_jobs, a.id)] IS NULL
            RETURNING a.kind
        LOOP
            deltas := deltas || ROW('workflow', acked.kind, 0, 1, 0, 0)::azync_job_delta;
        END LOOP;
        IF cardinality(array_remove(p_errors, NULL)) > 0 THEN
            SELECT array_agg(ROW('workflow', d.kind, 0, 0, 1, 0)::azync_job_delta) INTO more
            FROM unnest(p_jobs, p_tokens, p_errors) AS u(id, token, error),
                 LATERAL azync_job_settle(p_at, ARRAY[u.id], ARRAY[u.token], 'dead', u.error,
                                          NULL, false) d
            WHERE u.error IS NOT NULL;
            deltas := deltas || more;
        END IF;
    END IF;

    -- History.
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    SELECT p_id, p_expected + u.ord - 1, u.type, u.payload, p_at
    FROM unnest(p_types, p_payloads) WITH ORDINALITY AS u(type, payload, ord);
    nxt := p_expected + cardinality(p_types);

    -- Operations (azync_workflow_ops_insert: the one insert of operations).
    IF cardinality(p_op_keys) > 0 THEN
        FOR op IN
            SELECT * FROM azync_workflow_ops_insert(p_at, p_channel, p_id, p_op_kinds,
                                                    p_op_payloads, p_op_metas, p_op_keys,
                                                    p_op_run_ats, p_op_max_attempts,
                                                    p_op_routes, p_local_keys, p_local_lease,
                                                    p_local_budget)
        LOOP
            deltas := deltas || ROW('workflow', op.kind, 1, 0, 0, 0)::azync_job_delta;
            IF op.lease_token IS NOT NULL THEN
                l_keys := l_keys || op.task_key;
                l_ids := l_ids || op.id;
                l_attempts := l_attempts || op.attempt;
                l_max := l_max || op.max_attempts;
                l_tokens := l_tokens || op.lease_token;
                l_until := l_until || op.lease_until;
                l_at := l_at || op.started_at;
            END IF;
        END LOOP;
    END IF;

    -- Children: started with their first workflow task; an id another
    -- execution holds is answered in this history (ChildFailed events, or one
    -- ChildrenNotStarted record after the terminal event when the pass ends
    -- the run: its code never sees them).
    IF cardinality(p_child_ids) > 0 THEN
        WITH req AS (
            SELECT u.*
            FROM unnest(p_child_seqs, p_child_ids) WITH ORDINALITY AS u(seq, id, ord)
        ), ins AS MATERIALIZED (
            SELECT c.id FROM azync_workflow_children_start(
                p_at, p_channel, p_id, p_run, p_child_seqs, p_child_ids, p_child_names,
                p_child_versions, p_child_inputs, p_child_policies, p_child_carriers,
                p_child_routes) AS c(id)
        ), taken AS (
            SELECT r.seq, r.id, r.ord FROM req r
            LEFT JOIN azync_workflow_executions x ON x.id = r.id
            WHERE r.id NOT IN (SELECT id FROM ins)
              AND NOT coalesce(x.parent_id = p_id AND x.parent_run_id = p_run
                               AND x.parent_seq = r.seq, false)
        )
        SELECT (SELECT count(*) FROM ins) AS tasks,
               array_agg(format(
                   '{"started_seq":%s,"workflow_id":%s,"error_type":"WorkflowAlreadyStarted",'
                   '"message":%s}',
                   k.seq, to_json(k.id::text),
                   to_json('workflow id ' || k.id || ' is already used by another execution'))
                   ORDER BY k.ord) AS taken
        INTO kids
        FROM taken k;
        IF kids.tasks > 0 THEN
            deltas := deltas || ROW('workflow', '$wft', kids.tasks, 0, 0, 0)::azync_job_delta;
        END IF;
        IF kids.taken IS NOT NULL THEN
            INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
            SELECT p_id, nxt + u.ord - 1, u.type, convert_to(u.payload, 'UTF8'), p_at
            FROM unnest(
                CASE WHEN ends THEN ARRAY['ChildrenNotStarted']
                     ELSE array_fill('ChildFailed'::text, ARRAY[cardinality(kids.taken)]) END,
                CASE WHEN ends
                     THEN ARRAY['{"type":"ChildrenNotStarted","children":['
                                || array_to_string(kids.taken, ',') || ']}']
                     ELSE ARRAY(SELECT '{"type":"ChildFailed","state":"failed",'
                                       || substr(c, 2)
                                FROM unnest(kids.taken) WITH ORDINALITY AS c(c, o)
                                ORDER BY o) END
            ) WITH ORDINALITY AS u(type, payload, ord);
            appended := CASE WHEN ends THEN 1 ELSE cardinality(kids.taken) END;
            nxt := nxt + appended;
        END IF;
    END IF;
    IF cardinality(p_child_signal_ids) > 0 OR cardinality(p_child_cancels) > 0 THEN
        -- Children signalled or asked to cancel: each live one locked in id
        -- order (as signal_workflow locks one), the signals buffered
        -- (deduplicated by (name, message id)), the cancel requests recorded,
        -- and the workflow task of a running child either changed made due.
        WITH live AS (
            SELECT e.id, e.state FROM azync_workflow_executions e
            WHERE e.id = ANY(p_child_signal_ids || p_child_cancels)
              AND e.state IN ('running', 'suspended')
            ORDER BY e.id
            FOR NO KEY UPDATE
        ), sig AS (
            INSERT INTO azync_workflow_signals (workflow_id, name, message_id, payload,
                                                created_at)
            SELECT u.id, u.name, u.message_id, u.payload, p_at
            FROM unnest(p_child_signal_ids, p_child_signal_names, p_child_signal_payloads,
                        p_child_signal_message_ids) WITH ORDINALITY
                 AS u(id, name, payload, message_id, ord)
            JOIN live l ON l.id = u.id
            ORDER BY u.ord
            ON CONFLICT DO NOTHING
            RETURNING workflow_id
        ), req AS (
            UPDATE azync_workflow_executions e
            SET cancel_requested = true, updated_at = p_at
            FROM live l
            WHERE e.id = l.id AND l.id = ANY(p_child_cancels)
            RETURNING e.id
        ), wake AS (
            SELECT azync_workflow_wake_task(l.id, p_at, p_channel)
            FROM live l
            WHERE l.state = 'running'
              AND (l.id IN (SELECT workflow_id FROM sig) OR l.id IN (SELECT id FROM req))
        )
        SELECT count(*) INTO w FROM wake;
    END IF;

    UPDATE azync_workflow_executions e
    SET next_seq = nxt, updated_at = p_at, awaited_signals = coalesce(p_awaited, e.awaited_signals)
    WHERE e.id = p_id;

    -- Timers, signals, update outcomes.
    IF cardinality(p_timer_seqs) > 0 THEN
        INSERT INTO azync_workflow_timers (workflow_id, seq, fire_at)
        SELECT p_id, u.seq, p_at + u.delay
        FROM unnest(p_timer_seqs, p_timer_delays) AS u(seq, delay)
        ON CONFLICT DO NOTHING;
    END IF;
    IF cardinality(p_fired) > 0 THEN
        UPDATE azync_workflow_timers tm SET fired_at = p_at
        WHERE tm.workflow_id = p_id AND tm.seq = ANY(p_fired) AND tm.fired_at IS NULL;
    END IF;
    IF cardinality(p_signal_ids) > 0 THEN
        UPDATE azync_workflow_signals s SET consumed_seq = u.seq
        FROM unnest(p_signal_ids, p_signal_seqs) AS u(id, seq)
        WHERE s.id = u.id AND s.workflow_id = p_id AND s.consumed_seq IS NULL;
    END IF;
    IF cardinality(p_update_ids) > 0 THEN
        INSERT INTO azync_workflow_updates (workflow_id, update_id, name, state, result,
                                            error_type, message, created_at)
        SELECT p_id, u.id, u.name, u.state, u.result, u.error_type, u.message, p_at
        FROM unnest(p_update_ids, p_update_names, p_update_states, p_update_results,
                    p_update_error_types, p_update_messages)
             AS u(id, name, state, result, error_type, message)
        ON CONFLICT DO NOTHING;
        PERFORM azync_wake(p_channel, 'workflow.update:' || p_id::text);
    END IF;

    -- The outcome: the one terminal transition, continue-as-new, or suspend.
    IF p_outcome IN ('complete', 'fail', 'cancelled') THEN
        st := CASE p_outcome WHEN 'complete' THEN 'succeeded' WHEN 'fail' THEN 'failed'
                             ELSE 'cancelled' END;
        PERFORM azync_workflow_finish(p_id, st, p_result, p_reason, p_at, p_channel);
    ELSIF p_outcome = 'continue' THEN
        PERFORM azync_workflow_continue(p_id, p_result, p_new_run, p_cancel_seen, p_at,
                                        p_channel);
    ELSIF p_outcome = 'suspend' THEN
        UPDATE azync_workflow_executions e
        SET state = 'suspended', suspend_reason = p_reason, suspend_seq = p_suspend_seq,
            suspend_operation_id = NULL, updated_at = p_at
        WHERE e.id = p_id AND e.state = 'running';
        st := 'suspended';
    END IF;

    -- The next workflow task, then the counters (the commit's one counter write).
    IF st = 'running' AND NOT checkpoint THEN
        IF p_next_now OR appended > 0 OR p_outcome = 'continue' THEN
            want := p_at;
        ELSE
            want := least(p_next_at,
                          (SELECT min(tm.fire_at) FROM azync_workflow_timers tm
                           WHERE tm.workflow_id = p_id AND tm.fired_at IS NULL),
                          CASE WHEN p_signals_wake AND EXISTS (
                              SELECT 1 FROM azync_workflow_signals s
                              WHERE s.workflow_id = p_id AND s.consumed_seq IS NULL)
                          THEN p_at END);
        END IF;
        IF want IS NOT NULL THEN
            SELECT * INTO t FROM azync_schedule_workflow_task(p_id, '$wft', want, p_at, p_channel);
            IF t.inserted THEN
                deltas := deltas || ROW('workflow', t.kind, 1, 0, 0, 0)::azync_job_delta;
            END IF;
        ELSIF p_task AND EXISTS (
            SELECT 1 FROM azync_jobs j
            WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = '$wft'
              AND j.state = 'pending') THEN
            -- made due while this pass held the run (a signal): its wake-up came
            -- while leases skipped the run for this task, so wake it again
            PERFORM azync_wake(p_channel, 'workflow:$wft');
        END IF;
    END IF;
    PERFORM azync_job_count(p_at, deltas);
    RETURN QUERY SELECT true, n, st, nxt, p_at, NULL::bigint[], l_keys, l_ids, l_attempts, l_max,
                        l_tokens, l_until, l_at;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_reset(p_at timestamp with time zone, p_channel text, p_id uuid, p_expected bigint, p_keep bigint, p_new_run uuid, p_reason text, p_rerun text[], p_timers bigint[])
 RETURNS TABLE(ok boolean, state text, run_no integer, next_seq bigint, rerun integer, redelivered integer, at timestamp with time zone)
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
#variable_conflict use_column
DECLARE
    ex record;
    n_ops int;
    n_sig int;
    deltas azync_job_delta[];
BEGIN
    SELECT e.state, e.run_id, e.run_no, e.input, e.next_seq,
           coalesce(e.run_started_at, e.created_at) AS started
    INTO ex FROM azync_workflow_executions e
    WHERE e.id = p_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF ex.next_seq <> p_expected OR p_keep < 0 OR p_keep >= ex.next_seq THEN
        RETURN QUERY SELECT false, ex.state, ex.run_no, ex.next_seq, 0, 0, p_at;
        RETURN;
    END IF;
    PERFORM azync_workflow_close_children(p_id, coalesce(ex.run_id, p_id), p_at, p_channel);
    INSERT INTO azync_workflow_runs (workflow_id, run_no, run_id, input, started_at, ended_at,
                                     events, ended_as, reset_seq, reset_reason, state_at_reset)
    VALUES (p_id, ex.run_no, coalesce(ex.run_id, p_id), ex.input, ex.started, p_at,
            ex.next_seq - 1, 'reset', p_keep, p_reason, ex.state);
    INSERT INTO azync_workflow_run_history (workflow_id, run_no, seq, type, payload, created_at)
    SELECT workflow_id, ex.run_no, seq, type, payload, created_at
    FROM azync_workflow_history WHERE workflow_id = p_id;
    DELETE FROM azync_workflow_history WHERE workflow_id = p_id AND seq > p_keep;

    UPDATE azync_jobs
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = 'its workflow run was reset', completed_at = p_at, updated_at = p_at
    WHERE run_id = p_id AND source = 'workflow'
      AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain');
    WITH last AS (
        SELECT DISTINCT ON (j.task_key) j.*
        FROM azync_jobs j
        WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = ANY(p_rerun)
        ORDER BY j.task_key, j.enqueued_at DESC, j.id
    ), ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, max_attempts,
                                max_attempts_explicit, run_id, task_key, enqueued_at,
                                updated_at, task_queue, priority)
        SELECT gen_random_uuid(), 'workflow', l.kind, 'pending', l.payload,
               l.meta || jsonb_build_object('reset_run', p_new_run::text), p_at,
               l.max_attempts, l.max_attempts_explicit, p_id, l.task_key, p_at, p_at,
               l.task_queue, l.priority
        FROM last l
        RETURNING kind
    ), wake AS (
        SELECT pg_notify(p_channel, 'workflow:' || k.kind) FROM (SELECT DISTINCT kind FROM ins) k
    )
    SELECT count(*)::int, array_agg(ROW('workflow', i.kind, 1, 0, 0, 0)::azync_job_delta)
    INTO n_ops, deltas
    FROM ins i WHERE (SELECT count(*) FROM wake) >= 0;

    DELETE FROM azync_workflow_timers t
    WHERE t.workflow_id = p_id AND NOT (t.seq = ANY(p_timers));
    INSERT INTO azync_workflow_timers (workflow_id, seq, fire_at, fired_at)
    SELECT p_id, h.seq,
           h.created_at + ((convert_from(h.payload, 'UTF8')::jsonb ->> 'fire_after_s')::float8
                           * interval '1 second'),
           NULL
    FROM azync_workflow_history h
    WHERE h.workflow_id = p_id AND h.seq = ANY(p_timers) AND h.type = 'TimerStarted'
    ON CONFLICT (workflow_id, seq) DO UPDATE SET fired_at = NULL;

    UPDATE azync_workflow_signals s SET consumed_seq = NULL
    WHERE s.workflow_id = p_id AND s.consumed_seq > p_keep;
    GET DIAGNOSTICS n_sig = ROW_COUNT;

    UPDATE azync_workflow_executions e
    SET state = 'running', run_id = p_new_run, run_no = ex.run_no + 1, run_started_at = p_at,
        next_seq = p_keep + 1, result = NULL, failure_reason = '', suspend_reason = '',
        suspend_seq = NULL, suspend_operation_id = NULL, completed_at = NULL,
        cancel_requested = false, awaited_signals = '{}', signals_undelivered = 0,
        reset_from_run = ex.run_no, reset_seq = p_keep, reset_reason = p_reason,
        updated_at = p_at
    WHERE e.id = p_id;
    PERFORM azync_schedule_workflow_task(p_id, '$wft', p_at, p_at, p_channel);
    deltas := coalesce(deltas, '{}') || ROW('workflow', '$wft', 1, 0, 0, 0)::azync_job_delta;
    PERFORM azync_job_count(p_at, deltas);
    RETURN QUERY SELECT true, 'running'::text, ex.run_no + 1, p_keep + 1, n_ops, n_sig, p_at;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_search_upsert()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
AS $function$
DECLARE
    attrs jsonb := convert_from(NEW.payload, 'UTF8')::jsonb -> 'attributes';
BEGIN
    UPDATE azync_workflow_executions
    SET search_attributes = (search_attributes || jsonb_strip_nulls(attrs))
        - ARRAY(SELECT k FROM jsonb_each(attrs) AS a(k, v) WHERE v = 'null'::jsonb)
    WHERE id = NEW.workflow_id;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_task_lease_load(p_now timestamp with time zone, p_kind text, p_limit integer, p_lease interval, p_known_ids uuid[], p_known_after bigint[], p_first boolean, p_queues text[], p_names text[], p_exclude uuid[])
 RETURNS TABLE(job azync_jobs, load_stale boolean, after_seq bigint, ex azync_workflow_executions, h_seq bigint[], h_type text[], h_payload bytea[], h_created timestamp with time zone[], s_id bigint[], s_name text[], s_message_id text[], s_payload bytea[], due_timer_seqs bigint[], more_due boolean)
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_seqscan TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH pairs AS (
        SELECT q.q, n.n FROM unnest(p_queues) AS q(q), unnest(p_names) AS n(n)
        UNION
        SELECT j.task_queue, j.workflow_name FROM azync_jobs j
        WHERE (p_queues IS NULL OR p_names IS NULL)
          AND j.source = 'workflow' AND j.task_key = '$wft' AND j.state IN ('pending', 'scheduled')
          AND (p_queues IS NULL OR j.task_queue = ANY(p_queues))
          AND (p_names IS NULL OR j.workflow_name = ANY(p_names))
    ), due AS (
        SELECT c.* FROM pairs p
        CROSS JOIN LATERAL (
            SELECT j.id, j.first_pass, azync_due_order(j.run_at, j.priority) AS o,
                   j.xmin::text AS v FROM azync_jobs j
            WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'pending'
              AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
              AND j.first_pass <= p_first
              AND j.run_at <= coalesce(p_now, now())
              AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
              AND NOT EXISTS (
                  SELECT 1 FROM azync_jobs a
                  WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                    AND a.state = 'active')
            ORDER BY j.first_pass, azync_due_order(j.run_at, j.priority), j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
    ), timed AS (
        SELECT c.* FROM pairs p
        CROSS JOIN LATERAL (
            SELECT j.id, j.first_pass, azync_due_order(j.run_at, j.priority) AS o,
                   j.xmin::text AS v FROM azync_jobs j
            WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'scheduled'
              AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
              AND j.run_at <= coalesce(p_now, now())
              AND j.first_pass <= p_first
              AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
              AND NOT EXISTS (
                  SELECT 1 FROM azync_jobs a
                  WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                    AND a.state = 'active')
            ORDER BY j.run_at, j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
    ), picked AS (
        SELECT c.id, c.v FROM (SELECT * FROM due UNION ALL SELECT * FROM timed) c
        ORDER BY c.first_pass, c.o, c.id
        LIMIT p_limit
    ), left_due AS (
        -- Asked only when the lease came back short, in the lease's snapshot:
        -- a due task it did not take (another lease holds its lock, or it is
        -- not yet committed as taken) means the caller should lease again.
        SELECT CASE WHEN (SELECT count(*) FROM picked) < p_limit THEN EXISTS (
            SELECT 1 FROM pairs p
            CROSS JOIN LATERAL (
                SELECT 1 FROM azync_jobs j
                WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'pending'
                  AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
                  AND j.first_pass <= p_first
                  AND j.run_at <= coalesce(p_now, now())
                  AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
                  AND NOT (j.id = ANY(ARRAY(SELECT picked.id FROM picked)))
                  AND NOT EXISTS (
                      SELECT 1 FROM azync_jobs a
                      WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                        AND a.state = 'active')
            ) c) OR EXISTS (
            SELECT 1 FROM pairs p
            CROSS JOIN LATERAL (
                SELECT 1 FROM azync_jobs j
                WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'scheduled'
                  AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
                  AND j.run_at <= coalesce(p_now, now())
                  AND j.first_pass <= p_first
                  AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
                  AND NOT (j.id = ANY(ARRAY(SELECT picked.id FROM picked)))
                  AND NOT EXISTS (
                      SELECT 1 FROM azync_jobs a
                      WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                        AND a.state = 'active')
            ) c) ELSE true END AS more
    ), leased AS (
        UPDATE azync_jobs j
        SET state = 'active',
            attempt = j.attempt + 1,
            lease_token = azync_lease_token(),
            lease_until = coalesce(p_now, now()) + p_lease,
            started_at = coalesce(p_now, now()),
            updated_at = coalesce(p_now, now())
        FROM picked
        WHERE j.id = picked.id
        RETURNING j AS job, picked.v AS locked_version
    ), known AS (
        SELECT k.id, k.after FROM unnest(p_known_ids, p_known_after) AS k(id, after)
    )
    SELECT l.job,
           (SELECT x.xmin::text FROM azync_jobs x WHERE x.id = (l.job).id)
               IS DISTINCT FROM l.locked_version,
           coalesce((SELECT k.after FROM known k WHERE k.id = (l.job).run_id), 0),
           e,
           h.h_seq, h.h_type, h.h_payload, h.h_created, s.s_id, s.s_name, s.s_message_id, s.s_payload,
           ARRAY(SELECT t.seq FROM azync_workflow_timers t
                 WHERE t.workflow_id = e.id AND t.fired_at IS NULL
                   AND t.fire_at <= coalesce(p_now, now())
                 ORDER BY t.fire_at, t.seq),
           (SELECT m.more FROM left_due m)
    FROM leased l
    JOIN azync_workflow_executions e ON e.id = (l.job).run_id
    CROSS JOIN LATERAL (
        SELECT array_agg(x.seq ORDER BY x.seq) AS h_seq, array_agg(x.type ORDER BY x.seq) AS h_type,
               array_agg(x.payload ORDER BY x.seq) AS h_payload,
               array_agg(x.created_at ORDER BY x.seq) AS h_created
        FROM azync_workflow_history x
        WHERE x.workflow_id = e.id
          AND x.seq > coalesce((SELECT k.after FROM known k WHERE k.id = (l.job).run_id), 0)
    ) h
    CROSS JOIN LATERAL (
        SELECT array_agg(g.id ORDER BY g.id) AS s_id, array_agg(g.name ORDER BY g.id) AS s_name,
               array_agg(g.message_id ORDER BY g.id) AS s_message_id,
               array_agg(g.payload ORDER BY g.id) AS s_payload
        FROM azync_workflow_signals g
        WHERE g.workflow_id = e.id AND g.consumed_seq IS NULL
    ) s;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_waits(p_id uuid, p_at timestamp with time zone)
 RETURNS text
 LANGUAGE plpgsql
 STABLE
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
    RETURN (SELECT concat_ws('; ',
        (SELECT string_agg(DISTINCT j.blocked_reason, '; ')
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = '$wft'
           AND j.state IN ('pending', 'scheduled') AND j.blocked_reason <> ''),
        (SELECT format('no live worker serves workflow %L on task queue %L',
                       j.workflow_name, j.task_queue)
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = '$wft'
           AND j.state IN ('pending', 'scheduled') AND j.run_at <= p_at
           AND NOT EXISTS (
               SELECT 1 FROM azync_workers w
               WHERE w.expires_at > p_at AND w.workflows @> ARRAY[j.workflow_name]
                 AND w.task_queues @> ARRAY[j.task_queue])
         LIMIT 1),
        (SELECT 'no live worker serves '
                || string_agg(DISTINCT format('activity %L on task queue %L',
                                              coalesce(j.meta ->> 'activity', j.kind),
                                              j.task_queue), ', ')
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key <> '$wft'
           AND j.state = 'pending'
           AND NOT EXISTS (
               SELECT 1 FROM azync_workers w
               WHERE w.expires_at > p_at AND w.activities @> ARRAY[j.kind]
                 AND w.task_queues @> ARRAY[j.task_queue])),
        (SELECT nullif(string_agg(DISTINCT azync_job_limit_waits(j.source, j.kind, j.limit_key,
                                                                  p_at, j.task_queue), '; '), '')
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key <> '$wft'
           AND j.state = 'pending' AND j.limit_key IS NOT NULL AND j.run_at <= p_at)));
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_wake_task(p_id uuid, p_at timestamp with time zone, p_channel text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO '<schema>'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    t record;
BEGIN
    SELECT * INTO t FROM azync_schedule_workflow_task(p_id, '$wft', p_at, p_at, p_channel);
    IF t.inserted THEN
        PERFORM azync_job_count(p_at, ARRAY[ROW('workflow', t.kind, 1, 0, 0, 0)::azync_job_delta]);
    END IF;
END
$function$;

-- Triggers

CREATE TRIGGER azync_jobs_deadlines BEFORE INSERT ON azync_jobs FOR EACH ROW WHEN (((new.source = 'workflow'::text) AND (new.task_key <> '$wft'::text) AND (new.meta ?| ARRAY['schedule_to_start_s'::text, 'schedule_to_close_s'::text]))) EXECUTE FUNCTION azync_job_deadlines();

CREATE TRIGGER azync_jobs_limit_release AFTER UPDATE OF state, lease_token ON azync_jobs FOR EACH ROW WHEN (((old.limit_key IS NOT NULL) AND (old.state = 'active'::text) AND ((new.state <> 'active'::text) OR (new.lease_token IS DISTINCT FROM old.lease_token)))) EXECUTE FUNCTION azync_limit_release();

CREATE TRIGGER azync_jobs_limit_release_deleted AFTER DELETE ON azync_jobs FOR EACH ROW WHEN (((old.limit_key IS NOT NULL) AND (old.state = 'active'::text))) EXECUTE FUNCTION azync_limit_release();

CREATE TRIGGER azync_jobs_merge_workflow_task BEFORE UPDATE ON azync_jobs FOR EACH ROW WHEN (((old.source = 'workflow'::text) AND (old.task_key = '$wft'::text) AND (old.state <> ALL (ARRAY['pending'::text, 'scheduled'::text])) AND (new.state = ANY (ARRAY['pending'::text, 'scheduled'::text])))) EXECUTE FUNCTION azync_merge_workflow_task();

CREATE TRIGGER azync_jobs_no_blind_retry BEFORE UPDATE ON azync_jobs FOR EACH ROW WHEN (((old.source = 'workflow'::text) AND (old.state = 'active'::text) AND (new.state = 'pending'::text) AND (new.reap_count > old.reap_count) AND ((old.meta ->> 'idempotent'::text) = 'false'::text))) EXECUTE FUNCTION azync_keep_nonidempotent_op();

CREATE TRIGGER azync_jobs_refuse_late_completion BEFORE UPDATE OF state ON azync_jobs FOR EACH ROW WHEN (((old.state = 'active'::text) AND (old.close_deadline IS NOT NULL) AND (new.state = ANY (ARRAY['succeeded'::text, 'dead'::text])) AND (NOT (new.lease_token IS DISTINCT FROM old.lease_token)))) EXECUTE FUNCTION azync_op_refuse_late_completion();

CREATE TRIGGER azync_workflow_history_search_upsert AFTER INSERT ON azync_workflow_history FOR EACH ROW WHEN ((new.type = 'SearchAttributesUpserted'::text)) EXECUTE FUNCTION azync_workflow_search_upsert();
