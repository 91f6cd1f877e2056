-- whole tool results past the model's limit, kept per user under a handle until they expire
-- The model sees a result's first `max_tool_result_chars` and its handle, and reads the rest
-- by range or search (see store/large_results.py). `total_chars` is the whole result's length;
-- `content` holds at most the size limit of it (`kept_chars` of it, the rest dropped).

CREATE TABLE large_results (
                handle text PRIMARY KEY,
                user_id text NOT NULL,
                request_id text,
                content text NOT NULL,
                total_chars bigint NOT NULL,
                kept_chars bigint NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL
            );

CREATE INDEX large_results_expiry ON large_results (user_id, expires_at);

ALTER TABLE large_results ENABLE ROW LEVEL SECURITY;

ALTER TABLE large_results FORCE ROW LEVEL SECURITY;

CREATE POLICY large_results_of_user ON large_results USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

GRANT SELECT, INSERT, UPDATE, DELETE ON large_results TO orchestrator_app;
