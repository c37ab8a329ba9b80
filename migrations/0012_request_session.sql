-- The request log names each request's session (the hash of its client key and
-- session id, never the id) and whether the connection choice followed the
-- session's affinity binding (hit, spilled, bound). The session filter reads
-- (session, started_at); rows without a session stay out of that index.
ALTER TABLE requests ADD COLUMN session text, ADD COLUMN affinity text;
CREATE INDEX requests_session_started_at_idx ON requests (session, started_at) WHERE session IS NOT NULL;
