-- The user's ingested documents, in chunks: each with its file and page, its text (and a
-- full-text index of it), and its vector from the orchestrator's embedder when there is one.
-- `embedding` has no fixed size: vectors of different models (named in embedding_model)
-- are never compared.
CREATE TABLE IF NOT EXISTS document_chunks (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id text NOT NULL,
    document text NOT NULL,
    source text NOT NULL,
    page integer,
    chunk integer NOT NULL,
    content text NOT NULL,
    search tsvector GENERATED ALWAYS AS (to_tsvector('english', left(content, 100000))) STORED,
    embedding vector,
    embedding_model text,
    ingested_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS document_chunks_user_document ON document_chunks (user_id, document);
CREATE INDEX IF NOT EXISTS document_chunks_search ON document_chunks USING gin (search);

-- Each user sees only their own documents, enforced by PostgreSQL (forced row-level security).
SELECT orchestrator_protect('document_chunks');
