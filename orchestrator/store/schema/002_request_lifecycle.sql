-- request lifecycle: outcome, closing, owning process, and an audit log of status changes

ALTER TABLE requests
                ADD COLUMN outcome text,
                ADD COLUMN call_name text,
                ADD COLUMN background boolean NOT NULL DEFAULT false,
                ADD COLUMN idempotent boolean NOT NULL DEFAULT false,
                ADD COLUMN owner text,
                ADD COLUMN closed_at timestamptz;

CREATE INDEX requests_open ON requests (user_id, status) WHERE status <> 'closed';

CREATE TABLE request_events (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                request_id text NOT NULL,
                user_id text NOT NULL,
                status text NOT NULL,
                detail text,
                at timestamptz NOT NULL DEFAULT now()
            );

CREATE INDEX request_events_by_request ON request_events (request_id, id);

ALTER TABLE request_events ENABLE ROW LEVEL SECURITY;

ALTER TABLE request_events FORCE ROW LEVEL SECURITY;

CREATE POLICY request_events_of_user ON request_events USING (user_id = current_setting('app.user_id', true)) WITH CHECK (user_id = current_setting('app.user_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON request_events TO orchestrator_app;
