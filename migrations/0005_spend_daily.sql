-- Spend per (UTC day, client key, connection, upstream model): requests, tokens and
-- cost in micro-dollars at the prices setting. Written by the request log's writer in
-- the same transaction as the rows it sums, so the two always agree. No foreign keys:
-- spend outlives a deleted key or connection, and a write never fails because one
-- went away meanwhile.
CREATE TABLE spend_daily (
    day           date   NOT NULL,
    client_key_id uuid   NOT NULL,
    connection_id uuid   NOT NULL,
    model         text   NOT NULL,
    requests      bigint NOT NULL DEFAULT 0,
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cost_micros   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (client_key_id, day, connection_id, model)
);
