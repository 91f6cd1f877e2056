-- full-text search over the first 100,000 characters of a message
-- Full text indexes the first 100,000 characters of a message: a tsvector holds at most 1 MB of
-- lexemes, which 100,000 characters cannot exceed (4 bytes a character at most). In place where
-- the server can (PostgreSQL 17).

DO $$ BEGIN
            IF current_setting('server_version_num')::int >= 170000 THEN
                EXECUTE 'ALTER TABLE messages ALTER COLUMN search SET EXPRESSION AS (to_tsvector(''english'', left(content, 100000)))';
            ELSE
                EXECUTE 'ALTER TABLE messages DROP COLUMN search'; EXECUTE 'ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (to_tsvector(''english'', left(content, 100000))) STORED'; EXECUTE 'CREATE INDEX messages_search ON messages USING gin (search)';
            END IF;
        END $$;
