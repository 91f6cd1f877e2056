-- the model's tool calls are found by text search only, not embedded

DROP INDEX messages_to_embed;

CREATE INDEX messages_to_embed ON messages (id)
                WHERE embedding IS NULL AND role IN ('user', 'assistant')
                    AND NOT (role = 'assistant' AND content LIKE 'calls [%');

UPDATE messages SET embedding = NULL, embedding_model = NULL
                WHERE role = 'assistant' AND content LIKE 'calls [%';
