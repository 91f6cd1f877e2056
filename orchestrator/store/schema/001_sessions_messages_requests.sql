-- sessions, messages with embeddings and full text, requests; row-level security
-- Row-level security on every table with a user_id: even its owner sees only the current user.
-- The to-do list's `tasks` table, made here until issue 43, is the task_agent folder's: its
-- migrations/001_tasks.sql makes it (IF NOT EXISTS: a database this file once gave the table
-- keeps it, rows and protection). Core migrations are recorded by version, not checksum, so a
-- database that ran the earlier text is not asked to run this one.

CREATE EXTENSION IF NOT EXISTS vector;

DO $$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'orchestrator_app') THEN
                    CREATE ROLE orchestrator_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB;
                END IF;
            END $$;

GRANT orchestrator_app TO CURRENT_USER;

GRANT USAGE ON SCHEMA public TO orchestrator_app;

CREATE TABLE sessions (
                session_id text PRIMARY KEY,
                user_id text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now()
            );

CREATE TABLE messages (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                message_id text NOT NULL UNIQUE,
                session_id text NOT NULL REFERENCES sessions ON DELETE CASCADE,
                user_id text NOT NULL,
                role text NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
                content text NOT NULL,
                tool_name text,
                request_id text,
                created_at timestamptz NOT NULL DEFAULT now(),
                search tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
                embedding vector(384),
                embedding_model text
            );

CREATE INDEX messages_by_user ON messages (user_id, session_id, id);

CREATE INDEX messages_search ON messages USING gin (search);

CREATE INDEX messages_embedding ON messages USING hnsw (embedding vector_cosine_ops);

CREATE INDEX messages_to_embed ON messages (id)
                WHERE embedding IS NULL AND role IN ('user', 'assistant');

CREATE TABLE requests (
                request_id text PRIMARY KEY,
                parent_request_id text,
                session_id text,
                user_id text NOT NULL,
                tool text NOT NULL,
                action text,
                parameters jsonb NOT NULL DEFAULT '{}',
                status text NOT NULL,
                result jsonb,
                error jsonb,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now()
            );

CREATE INDEX requests_by_parent ON requests (parent_request_id);

ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;

ALTER TABLE sessions FORCE ROW LEVEL SECURITY;

CREATE POLICY sessions_of_user ON sessions USING (user_id = current_setting('app.user_id', true)) WITH CHECK (user_id = current_setting('app.user_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON sessions TO orchestrator_app;

ALTER TABLE messages ENABLE ROW LEVEL SECURITY;

ALTER TABLE messages FORCE ROW LEVEL SECURITY;

CREATE POLICY messages_of_user ON messages USING (user_id = current_setting('app.user_id', true)) WITH CHECK (user_id = current_setting('app.user_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON messages TO orchestrator_app;

ALTER TABLE requests ENABLE ROW LEVEL SECURITY;

ALTER TABLE requests FORCE ROW LEVEL SECURITY;

CREATE POLICY requests_of_user ON requests USING (user_id = current_setting('app.user_id', true)) WITH CHECK (user_id = current_setting('app.user_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON requests TO orchestrator_app;
