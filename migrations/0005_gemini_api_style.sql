-- Connections may speak the Gemini API (issue 26).
ALTER TABLE provider_connections DROP CONSTRAINT provider_connections_api_style_check;
ALTER TABLE provider_connections ADD CONSTRAINT provider_connections_api_style_check
    CHECK (api_style IN ('openai', 'anthropic', 'gemini'));
