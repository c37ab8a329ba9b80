-- Prompt caching: beside cached_tokens (the input tokens read from the provider's
-- prompt cache), the request log keeps the input tokens written to it. input_tokens
-- stays every prompt token processed, reads and writes included.
ALTER TABLE requests ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0;
