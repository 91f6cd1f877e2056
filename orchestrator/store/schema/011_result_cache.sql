-- reused results of idempotent folders' actions, per user, per folder content, until they expire

CREATE TABLE result_cache (
                user_id text NOT NULL,
                folder text NOT NULL,
                content text NOT NULL,
                call_name text NOT NULL,
                arguments text NOT NULL,
                result jsonb NOT NULL,
                request_id text NOT NULL,
                created_at timestamptz NOT NULL,
                expires_at timestamptz NOT NULL,
                PRIMARY KEY (user_id, folder, call_name, arguments)
            );

COMMENT ON COLUMN result_cache.content IS 'the folder''s approved content hash the result was made with';

COMMENT ON COLUMN result_cache.arguments IS 'SHA-256 of the call''s canonical arguments (validated, as JSON with sorted keys)';

CREATE INDEX result_cache_expiry ON result_cache (expires_at);

ALTER TABLE result_cache ENABLE ROW LEVEL SECURITY;

ALTER TABLE result_cache FORCE ROW LEVEL SECURITY;

CREATE POLICY result_cache_of_user ON result_cache USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

GRANT SELECT, INSERT, UPDATE, DELETE ON result_cache TO orchestrator_app;
