-- standalone agents' own conversations (`state: standalone`), one per user and agent path
-- `messages` are those after the summary (LangChain's message dicts): the summary stands for
-- the older ones, which are not kept (see store/agent_conversations.py).

CREATE TABLE agent_conversations (
                user_id text NOT NULL,
                agent_path text NOT NULL,
                messages jsonb NOT NULL,
                summary jsonb,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (user_id, agent_path)
            );

ALTER TABLE agent_conversations ENABLE ROW LEVEL SECURITY;

ALTER TABLE agent_conversations FORCE ROW LEVEL SECURITY;

CREATE POLICY agent_conversations_of_user ON agent_conversations USING (user_id = (SELECT orchestrator_auth.verified_user())) WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()));

GRANT SELECT, INSERT, UPDATE, DELETE ON agent_conversations TO orchestrator_app;
