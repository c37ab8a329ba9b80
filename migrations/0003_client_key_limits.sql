-- Client keys become tenants: limits of their own, an enabled switch, a version for
-- If-Match, and unique names of 1–64 of [A-Za-z0-9._-] (like connection names), so a
-- declarative config and the dashboard can name a key unambiguously.

ALTER TABLE client_keys
    ADD COLUMN limits     jsonb NOT NULL DEFAULT '{}'::jsonb
        CHECK (jsonb_typeof(limits) = 'object'),
    ADD COLUMN enabled    boolean NOT NULL DEFAULT true,
    ADD COLUMN version    bigint NOT NULL DEFAULT 1,
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
UPDATE client_keys SET updated_at = created_at;

-- Names that break the rule are sanitised first (every other character becomes '-',
-- then cut to 64; an empty name becomes "key"), then repeats of a name are renamed
-- name-2, name-3, … in creation order, skipping names already taken and cutting the
-- base so the suffix fits in 64. The oldest key keeps the name. Every rename is
-- audited, so an operator can see why a key's name changed.
CREATE TEMPORARY TABLE client_key_renames (id uuid PRIMARY KEY, old_name text NOT NULL) ON COMMIT DROP;

INSERT INTO client_key_renames (id, old_name)
    SELECT id, name FROM client_keys WHERE name !~ '^[A-Za-z0-9._-]{1,64}$';
UPDATE client_keys
    SET name = CASE WHEN name = '' THEN 'key'
                    ELSE left(regexp_replace(name, '[^A-Za-z0-9._-]', '-', 'g'), 64) END
    WHERE name !~ '^[A-Za-z0-9._-]{1,64}$';

DO $$
DECLARE
    r         record;
    n         integer;
    candidate text;
BEGIN
    FOR r IN
        SELECT id, name FROM (
            SELECT id, name, row_number() OVER (PARTITION BY name ORDER BY created_at, id) AS rn
            FROM client_keys) d
        WHERE rn > 1 ORDER BY name, rn
    LOOP
        n := 2;
        LOOP
            candidate := left(r.name, 64 - length('-' || n)) || '-' || n;
            EXIT WHEN NOT EXISTS (SELECT 1 FROM client_keys WHERE name = candidate);
            n := n + 1;
        END LOOP;
        INSERT INTO client_key_renames (id, old_name)
            SELECT id, name FROM client_keys WHERE id = r.id
            ON CONFLICT (id) DO NOTHING;
        UPDATE client_keys SET name = candidate WHERE id = r.id;
    END LOOP;
END $$;

INSERT INTO audit_log (actor, action, entity, entity_id, before, after)
    SELECT 'system', 'update', 'client_key', k.id::text,
           jsonb_build_object('name', r.old_name), jsonb_build_object('name', k.name)
    FROM client_key_renames r JOIN client_keys k USING (id)
    WHERE k.name <> r.old_name;

ALTER TABLE client_keys
    ADD CONSTRAINT client_keys_name_key UNIQUE (name),
    ADD CONSTRAINT client_keys_name_check CHECK (name ~ '^[A-Za-z0-9._-]{1,64}$');

-- usage_daily_keys counts tokens per client key per UTC day (the key's tpd), like
-- usage_daily does per connection: one conditional upsert per dispatched request.
CREATE TABLE usage_daily_keys (
    client_key_id uuid NOT NULL REFERENCES client_keys (id) ON DELETE CASCADE,
    day           date NOT NULL,
    requests      bigint NOT NULL DEFAULT 0,
    tokens        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (client_key_id, day)
);
