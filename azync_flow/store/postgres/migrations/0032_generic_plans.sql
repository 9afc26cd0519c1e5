-- The hot PL/pgSQL functions plan their statements once per connection.
--
-- PL/pgSQL caches each statement's plan per connection, but with the default
-- plan_cache_mode the planner kept choosing a custom plan, planned anew on
-- every call, for statements over the pass's arrays: azync_workflow_ops_insert
-- spent about 0.5 ms of its 0.9 ms planning, three times per three-activity
-- workflow. None of these statements' plans depends on the arrays' contents
-- or sizes (every access is by execution id, job id, task key or kind), so
-- the generic plan is as good as a custom one and costs nothing per call.
-- azync_due_order is left alone: a SET clause would stop it being inlined.
ALTER FUNCTION azync_workflow_pass_commit SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_ops_insert SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_schedule_workflow_task SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_children_start SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_close_children SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_continue SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_finish SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_finish_run SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_notify_parent SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_workflow_wake_task SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_job_count SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_job_settle SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_limit_admit SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION azync_publish_event SET plan_cache_mode = force_generic_plan;
