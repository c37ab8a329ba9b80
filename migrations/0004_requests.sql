-- The request log: one row per gateway request, admitted or not, served or failed
-- (DESIGN "Request log and usage"). Partitioned by UTC day on started_at, so that
-- retention drops whole partitions instead of deleting rows. Partitions are made by
-- the store (RequestLog.Maintain: today and the days ahead, hourly), not here: a
-- migration runs once, days keep coming.
--
-- No foreign keys: a row outlives its key or connection (key_name and
-- connection_name keep what they were called), and the writer's COPY checks nothing
-- per row. Never prompts, answers or secrets.
CREATE TABLE requests (
    id              uuid        NOT NULL,
    started_at      timestamptz NOT NULL,
    key_id          uuid,
    key_name        text,
    connection_id   uuid,
    connection_name text,
    provider        text,
    model           text,
    upstream_model  text,
    route           text        NOT NULL,
    stream          boolean     NOT NULL DEFAULT false,
    status          integer     NOT NULL,
    code            text,
    gate            text,
    priority        text,
    attempts        integer     NOT NULL DEFAULT 0,
    queue_ms        integer     NOT NULL DEFAULT 0,
    ttft_ms         integer,
    upstream_ms     integer     NOT NULL DEFAULT 0,
    total_ms        integer     NOT NULL DEFAULT 0,
    input_tokens    bigint      NOT NULL DEFAULT 0,
    output_tokens   bigint      NOT NULL DEFAULT 0,
    cached_tokens   bigint      NOT NULL DEFAULT 0,
    cost_micros     bigint      NOT NULL DEFAULT 0,
    trace_id        text,
    replica         text,
    -- The partition key must be part of every unique index: the id (a UUIDv7,
    -- time-ordered) looks a row up, started_at prunes the partitions.
    PRIMARY KEY (id, started_at)
) PARTITION BY RANGE (started_at);

CREATE INDEX requests_started_at_idx ON requests (started_at);
CREATE INDEX requests_key_started_at_idx ON requests (key_id, started_at);
CREATE INDEX requests_connection_started_at_idx ON requests (connection_id, started_at);
