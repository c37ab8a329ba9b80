-- Initial schema: provider connections, settings, users, API tokens, client keys,
-- audit log, dashboard sessions and daily usage counters.

CREATE TABLE provider_connections (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                 text NOT NULL UNIQUE,
    provider             text NOT NULL,
    api_style            text NOT NULL CHECK (api_style IN ('openai', 'anthropic')),
    base_url             text NOT NULL,
    api_key_enc          bytea NOT NULL,
    api_key_preview      text NOT NULL DEFAULT '',
    models               text[] NOT NULL DEFAULT '{}',
    priority             integer NOT NULL DEFAULT 0,
    enabled              boolean NOT NULL DEFAULT true,
    rate_limit_overrides jsonb NOT NULL DEFAULT '{}'::jsonb
        CHECK (jsonb_typeof(rate_limit_overrides) = 'object'),
    version              bigint NOT NULL DEFAULT 1,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- settings holds exactly one row (id = 1).
CREATE TABLE settings (
    id         integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    data       jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(data) = 'object'),
    version    bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO settings (id) VALUES (1);

CREATE TABLE users (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email         text NOT NULL,
    password_hash text NOT NULL,
    role          text NOT NULL CHECK (role IN ('admin', 'viewer')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name         text NOT NULL,
    role         text NOT NULL CHECK (role IN ('admin', 'viewer')),
    secret_hash  bytea NOT NULL UNIQUE,
    preview      text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);

CREATE TABLE client_keys (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name         text NOT NULL,
    secret_hash  bytea NOT NULL UNIQUE,
    preview      text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz
);

CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    actor      text NOT NULL,
    action     text NOT NULL,
    entity     text NOT NULL,
    entity_id  text NOT NULL DEFAULT '',
    before     jsonb,
    after      jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    id_hash    bytea PRIMARY KEY,
    user_id    uuid REFERENCES users (id) ON DELETE CASCADE,
    data       bytea NOT NULL DEFAULT ''::bytea,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

-- usage_daily counts dispatched requests and tokens per connection per UTC day (rpd/tpd).
CREATE TABLE usage_daily (
    connection_id uuid NOT NULL REFERENCES provider_connections (id) ON DELETE CASCADE,
    day           date NOT NULL,
    requests      bigint NOT NULL DEFAULT 0,
    tokens        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (connection_id, day)
);
