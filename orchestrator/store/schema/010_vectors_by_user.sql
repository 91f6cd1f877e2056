-- a user's vectors side by side in one index, so an exact search reads them there and not from the heap
-- An exact search over one user's 1,000 vectors read 1,000 heap pages scattered over the whole
-- table (7 ms at 300,000 messages); from this index, a few hundred contiguous pages and no heap
-- (an index-only scan), the heap read only for the ten rows found. Index-only scans need the
-- visibility map current: vectors are written by an UPDATE after the insert, so autovacuum is
-- asked to come by after 1% of the table changed rather than the default 20%.

CREATE INDEX messages_vectors ON messages (user_id) INCLUDE (session_id, id, embedding)
    WHERE embedding IS NOT NULL;

ALTER TABLE messages SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01);
