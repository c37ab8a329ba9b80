-- Looking up the audit history of one entity (the dashboard's "last changed by",
-- the conflict banner, the filtered audit page) reads the newest rows for it.
CREATE INDEX audit_log_entity_idx ON audit_log (entity, entity_id, id DESC);
