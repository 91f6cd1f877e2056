-- a user is entered with a token only the application can make
-- The user a transaction acts for is the one `orchestrator_auth.enter` was given a valid token
-- for: HMAC-SHA256 of the id under `orchestrator_auth.secret.key`, which only the owner reads.
-- The policies ask `orchestrator_auth.verified_user()` once per statement (an InitPlan), which
-- checks the token again: setting app.user_id by hand afterwards only blinds.
-- The key is 64 bytes, SHA-256's block size, so the pads are key XOR 0x36 / 0x5c.

CREATE SCHEMA orchestrator_auth;

REVOKE ALL ON SCHEMA orchestrator_auth FROM PUBLIC;

GRANT USAGE ON SCHEMA orchestrator_auth TO orchestrator_app;

CREATE TABLE orchestrator_auth.secret (
        single boolean PRIMARY KEY DEFAULT true CHECK (single),
        key bytea NOT NULL,
        inner_pad bytea NOT NULL,
        outer_pad bytea NOT NULL
    );

DO $$ DECLARE
        key bytea := sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'))
            || sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'));
        inner_pad bytea := key;
        outer_pad bytea := key;
    BEGIN
        FOR i IN 0..63 LOOP
            inner_pad := set_byte(inner_pad, i, get_byte(key, i) # 54);
            outer_pad := set_byte(outer_pad, i, get_byte(key, i) # 92);
        END LOOP;
        INSERT INTO orchestrator_auth.secret (key, inner_pad, outer_pad) VALUES (key, inner_pad, outer_pad);
    END $$;

CREATE FUNCTION orchestrator_auth.verified_user() RETURNS text
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$
            SELECT current_setting('app.user_id', true) FROM orchestrator_auth.secret
            WHERE current_setting('app.user_token', true) = encode(sha256(outer_pad || sha256(
                inner_pad || convert_to(current_setting('app.user_id', true), 'UTF8'))), 'hex')
        $$;

CREATE FUNCTION orchestrator_auth.enter(user_id text, token text) RETURNS void
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$ BEGIN
            PERFORM set_config('app.user_id', user_id, true);
            PERFORM set_config('app.user_token', token, true);
            IF orchestrator_auth.verified_user() IS DISTINCT FROM user_id THEN
                RAISE EXCEPTION 'not a valid token for this user' USING ERRCODE = 'insufficient_privilege';
            END IF;
        END $$;

REVOKE ALL ON FUNCTION orchestrator_auth.verified_user(), orchestrator_auth.enter(text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION orchestrator_auth.verified_user(), orchestrator_auth.enter(text, text) TO orchestrator_app;

ALTER POLICY sessions_of_user ON sessions USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

ALTER POLICY messages_of_user ON messages USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

ALTER POLICY requests_of_user ON requests USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

-- `tasks` only where migration 1 made it (before issue 43): the task_agent folder's own
-- migration protects the table it makes (orchestrator_protect, migration 8).
DO $$ BEGIN
        IF to_regclass('tasks') IS NOT NULL THEN
            ALTER POLICY tasks_of_user ON tasks USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));
        END IF;
    END $$;

ALTER POLICY request_events_of_user ON request_events USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));
