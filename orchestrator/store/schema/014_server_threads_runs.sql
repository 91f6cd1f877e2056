-- `orchestrator serve`: a thread is a session, with the metadata a client gave it; its runs
-- The sessions table gains what the LangGraph API says of a thread. A run is one turn (or the
-- answers to a paused one) a client asked for: kept so that a server killed mid-run knows, once
-- restarted, which runs it left and settles each (see orchestrator/api/recovery.py).

ALTER TABLE sessions ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}';

ALTER TABLE sessions ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

CREATE TABLE runs (
                run_id text PRIMARY KEY,
                thread_id text NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
                user_id text NOT NULL,
                assistant_id text NOT NULL,
                status text NOT NULL CHECK (status IN ('pending', 'running', 'success', 'error', 'interrupted')),
                metadata jsonb NOT NULL DEFAULT '{}',
                error text,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now()
            );

CREATE INDEX runs_of_thread ON runs (thread_id, created_at);

CREATE INDEX runs_unsettled ON runs (status) WHERE status IN ('pending', 'running');

ALTER TABLE runs ENABLE ROW LEVEL SECURITY;

ALTER TABLE runs FORCE ROW LEVEL SECURITY;

CREATE POLICY runs_of_user ON runs USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

GRANT SELECT, INSERT, UPDATE, DELETE ON runs TO orchestrator_app;
