-- Why a request failed: every upstream attempt of a request (connection, status,
-- duration, Gatehouse code) when there was more than one or one failed, and the
-- last failed attempt's upstream message (its first 512 bytes as sent, scrubbed of
-- secrets and of any echo of the request body). A request served by its first
-- attempt keeps attempts_detail NULL: the row's own fields are that attempt.
ALTER TABLE requests ADD COLUMN attempts_detail jsonb, ADD COLUMN upstream_error text;
