-- The request log's primary key becomes (started_at, id), and the index on started_at
-- alone goes: the key's index serves what that one did (time ranges, the newest first,
-- the keyset cursor on (started_at, id)), so the writer's COPY maintains three indexes
-- per row instead of four (docs/BENCHMARKS.md, "Request log (issue 25)"). A row is
-- still found by its id: a UUIDv7 names its millisecond (store.GetRequest).
ALTER TABLE requests DROP CONSTRAINT requests_pkey;
ALTER TABLE requests ADD PRIMARY KEY (started_at, id);
DROP INDEX requests_started_at_idx;
