-- Money budgets (key limits budgetUsdDaily and budgetUsdMonthly): what a client key
-- has spent and holds in reservations, in micro-dollars, per UTC day (period 'd',
-- start the day) and per UTC month (period 'm', start the month's first day). A
-- reservation adds to the day's and the month's rows in one transaction, each only
-- while it stays within its budget, so replicas sharing the database never reserve
-- past a budget together; settling adds the difference to the actual cost. Counted
-- only for keys with a money budget; spend for reports is spend_daily's.
CREATE TABLE key_spend_reserved (
    client_key_id uuid   NOT NULL REFERENCES client_keys (id) ON DELETE CASCADE,
    period        "char" NOT NULL CHECK (period IN ('d', 'm')),
    start         date   NOT NULL,
    micros        bigint NOT NULL DEFAULT 0 CHECK (micros >= 0),
    PRIMARY KEY (client_key_id, period, start)
);
