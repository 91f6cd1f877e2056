-- the token is checked on entering; only a value bound to the transaction stays
-- The token of migration 4 is fixed per user and sat in app.user_token, where any SQL
-- of the transaction could read it and later enter that user from any transaction.
-- Now `enter` checks it and keeps only an HMAC of the user bound to this transaction
-- and backend, which opens nothing elsewhere; the token itself is in no setting.
-- The backend's pid and the transaction's start (microseconds since the epoch, whatever
-- TimeZone says) come first: they hold no '/', so no user id can make another's bytes.

CREATE OR REPLACE FUNCTION orchestrator_auth.verified_user() RETURNS text
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$
            SELECT current_setting('app.user_id', true) FROM orchestrator_auth.secret
            WHERE current_setting('app.transaction_token', true)
                = encode(sha256(outer_pad || sha256(inner_pad || convert_to(pg_backend_pid() || '/' || floor(extract(epoch FROM transaction_timestamp()) * 1000000)::bigint || '/' || current_setting('app.user_id', true), 'UTF8'))), 'hex')
        $$;

CREATE OR REPLACE FUNCTION orchestrator_auth.enter(user_id text, token text) RETURNS void
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$ DECLARE bound text; BEGIN
            SELECT encode(sha256(outer_pad || sha256(inner_pad || convert_to(pg_backend_pid() || '/' || floor(extract(epoch FROM transaction_timestamp()) * 1000000)::bigint || '/' || user_id, 'UTF8'))), 'hex') INTO bound FROM orchestrator_auth.secret
            WHERE token = encode(sha256(outer_pad || sha256(inner_pad || convert_to(user_id, 'UTF8'))), 'hex');
            IF bound IS NULL THEN
                RAISE EXCEPTION 'not a valid token for this user' USING ERRCODE = 'insufficient_privilege';
            END IF;
            PERFORM set_config('app.user_id', user_id, true);
            PERFORM set_config('app.transaction_token', bound, true);
        END $$;
