-- migrations keyed by component; orchestrator_protect() for the tables of tool folders
-- schema_migrations is keyed by component (`core`, or a tool folder's key) and version, with the
-- SHA-256 of a folder migration's SQL. A tool folder's tables get the core tables' protection
-- from one call in its own migration: SELECT orchestrator_protect('my_table'); on a table
-- with a text user_id column (forced row-level security, the verified user's policy, the
-- application role's grants). Only the owner may call it: migrations run as the owner.

ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS component text NOT NULL DEFAULT 'core';

ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text;

ALTER TABLE schema_migrations DROP CONSTRAINT schema_migrations_pkey;

ALTER TABLE schema_migrations ADD PRIMARY KEY (component, version);

CREATE FUNCTION orchestrator_protect(target regclass) RETURNS void
        LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
        AS $$ DECLARE
            policy text := (SELECT relname FROM pg_class WHERE oid = target) || '_of_user';
            mine text := 'user_id = (SELECT orchestrator_auth.verified_user())';
        BEGIN
            IF NOT EXISTS (
                SELECT FROM pg_attribute
                WHERE attrelid = target AND attname = 'user_id' AND NOT attisdropped
            ) THEN
                RAISE EXCEPTION '% has no user_id column, which its row-level security needs', target;
            END IF;
            EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', target);
            EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', target);
            IF NOT EXISTS (SELECT FROM pg_policy WHERE polrelid = target AND polname = policy) THEN
                EXECUTE format('CREATE POLICY %I ON %s USING (%s) WITH CHECK (%s)', policy, target, mine, mine);
            END IF;
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO orchestrator_app', target);
        END $$;

REVOKE ALL ON FUNCTION orchestrator_protect(regclass) FROM PUBLIC;
