-- One row per alert sent to one webhook. A replica claims a delivery by
-- inserting its row under a transaction-scoped advisory lock on the alert's
-- (event, subject, condition, webhook), after checking that no row of the
-- same four was created within the cooldown: each alert is sent by one
-- replica only. /alerts lists the newest rows.
CREATE TABLE alert_deliveries (
    id          bigserial PRIMARY KEY,
    event       text NOT NULL,
    subject     text NOT NULL,
    condition   text NOT NULL DEFAULT '',
    webhook     text NOT NULL,
    severity    text NOT NULL DEFAULT '',
    summary     text NOT NULL DEFAULT '',
    status      text NOT NULL,
    tries       integer NOT NULL DEFAULT 0,
    last_error  text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX alert_deliveries_claim_idx ON alert_deliveries (event, subject, condition, webhook, created_at);
CREATE INDEX alert_deliveries_created_at_idx ON alert_deliveries (created_at);
