-- the server's users and their API keys (`orchestrator users`), the machine owner's alone
-- A key is shown once, when it is issued; what is kept is SHA-256 of it (a key is 256 random
-- bits, so a plain hash is enough and lets a request find its key by one index lookup).
-- `last_used_at` is written at most once a minute per key, not on every request.
-- Only the owner login reads or writes these tables (`orchestrator users`, and `orchestrator
-- serve` deciding who a request is): orchestrator_app is granted nothing, and row-level security
-- with no policy leaves any other login that is ever granted them without a row.

CREATE TABLE api_users (
                user_id text PRIMARY KEY,
                created_at timestamptz NOT NULL DEFAULT now()
            );

CREATE TABLE api_keys (
                key_id text PRIMARY KEY,
                user_id text NOT NULL REFERENCES api_users (user_id),
                key_hash bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
                created_at timestamptz NOT NULL DEFAULT now(),
                revoked_at timestamptz,
                last_used_at timestamptz
            );

COMMENT ON COLUMN api_keys.key_hash IS 'SHA-256 of the whole key; the key itself is never kept';

CREATE INDEX api_keys_of_user ON api_keys (user_id);

ALTER TABLE api_users ENABLE ROW LEVEL SECURITY;

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;

REVOKE ALL ON api_users, api_keys FROM PUBLIC;
