-- The to-do list. Databases made before folders had migrations got this table from
-- the core schema (its migration 1), rows and protection included: IF NOT EXISTS keeps them.
CREATE TABLE IF NOT EXISTS tasks (
    user_id text NOT NULL,
    task_id integer NOT NULL,
    title text NOT NULL,
    due date,
    done boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    PRIMARY KEY (user_id, task_id)
);

-- Each user sees only their own tasks, enforced by PostgreSQL (forced row-level security).
SELECT orchestrator_protect('tasks');
