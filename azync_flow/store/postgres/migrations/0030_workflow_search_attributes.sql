-- Search attributes: typed values an execution carries for listing
-- (``client.list(where=...)``, ``azync-flow workflows list --where``). They
-- are one jsonb map per execution: a keyword is a JSON string, an int or a
-- float a JSON number, a bool a JSON boolean, a datetime the object
-- {"$datetime": "<UTC ISO-8601, microseconds, Z>"} (fixed width, so string
-- order is time order, and never equal to a keyword). A filter is one
-- jsonpath predicate (@@); the jsonb_path_ops GIN index serves its equality
-- parts, a range alone walks the rows (measured in bench/).
ALTER TABLE azync_workflow_executions ADD COLUMN search_attributes jsonb NOT NULL DEFAULT '{}';
CREATE INDEX azync_workflow_executions_search ON azync_workflow_executions
    USING gin (search_attributes jsonb_path_ops);

-- A start sets the map; each SearchAttributesUpserted event merges its
-- "attributes" into it (a JSON null removes the name) in the transaction that
-- appends the event, whichever statement appends it (a pass commit, the hot
-- path). Only that event type fires the function (the WHEN clause is checked
-- without calling it), so other history inserts pay nothing but the check.
CREATE FUNCTION azync_workflow_search_upsert() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    attrs jsonb := convert_from(NEW.payload, 'UTF8')::jsonb -> 'attributes';
BEGIN
    UPDATE azync_workflow_executions
    SET search_attributes = (search_attributes || jsonb_strip_nulls(attrs))
        - ARRAY(SELECT k FROM jsonb_each(attrs) AS a(k, v) WHERE v = 'null'::jsonb)
    WHERE id = NEW.workflow_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER azync_workflow_history_search_upsert
    AFTER INSERT ON azync_workflow_history
    FOR EACH ROW WHEN (NEW.type = 'SearchAttributesUpserted')
    EXECUTE FUNCTION azync_workflow_search_upsert();
