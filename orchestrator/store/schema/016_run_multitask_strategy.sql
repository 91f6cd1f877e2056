-- a run keeps the multitask_strategy it was started with (`reject`, `enqueue`, `interrupt`), as the API's Run says
ALTER TABLE runs ADD COLUMN multitask_strategy text NOT NULL DEFAULT 'reject';
