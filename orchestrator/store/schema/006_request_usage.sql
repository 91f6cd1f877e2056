-- tokens and cost of each model call and billed tool call

CREATE TABLE request_usage (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                request_id text NOT NULL,
                parent_request_id text,
                session_id text,
                user_id text NOT NULL,
                turn_id text,
                kind text NOT NULL CHECK (kind IN ('model', 'tool')),
                name text NOT NULL,
                input_tokens bigint NOT NULL DEFAULT 0,
                output_tokens bigint NOT NULL DEFAULT 0,
                cached_input_tokens bigint NOT NULL DEFAULT 0,
                cache_write_tokens bigint NOT NULL DEFAULT 0,
                reasoning_tokens bigint NOT NULL DEFAULT 0,
                cost_usd double precision,
                credits double precision,
                seconds double precision NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now()
            );

COMMENT ON COLUMN request_usage.cost_usd IS 'NULL: no price is known for the model';

CREATE INDEX request_usage_by_user ON request_usage (user_id, created_at);

CREATE INDEX request_usage_by_session ON request_usage (session_id);

ALTER TABLE request_usage ENABLE ROW LEVEL SECURITY;

ALTER TABLE request_usage FORCE ROW LEVEL SECURITY;

CREATE POLICY request_usage_of_user ON request_usage USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

GRANT SELECT, INSERT, UPDATE, DELETE ON request_usage TO orchestrator_app;
