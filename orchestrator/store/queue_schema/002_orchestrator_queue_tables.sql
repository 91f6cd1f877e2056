-- the queue's functions find their tables from any caller; jobs by request; approvals; worker processes
-- procrastinate's functions name their tables unqualified: given a search_path of their own, they
-- find them whatever the caller's is, and no schema of the caller's can stand in for them.

DO $$ DECLARE item record; BEGIN
    FOR item IN
        SELECT p.oid::regprocedure AS signature
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'job_queue'
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = job_queue, pg_catalog, pg_temp', item.signature);
    END LOOP;
END $$;

-- A background call's job holds its request id among its arguments.
CREATE INDEX procrastinate_jobs_by_request ON job_queue.procrastinate_jobs ((args ->> 'request_id'));

-- The tool folder contents the user approved (as in data/tool_registry/), for workers on any
-- machine: a worker runs a folder's tool only at a content hash approved here.
CREATE TABLE job_queue.approved_folders (
    folder_key text NOT NULL,
    digest text NOT NULL,
    name text NOT NULL,
    version text NOT NULL,
    approved boolean NOT NULL,
    decided_at timestamptz NOT NULL,
    recorded_by text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (folder_key, digest)
);

-- The process behind each worker registration: where a job runs, and the queues it takes jobs
-- from (one per folder content it loaded; none when it only holds the calls its own process
-- moved to the background).
CREATE TABLE job_queue.worker_processes (
    worker_id bigint PRIMARY KEY REFERENCES job_queue.procrastinate_workers (id) ON DELETE CASCADE,
    owner text NOT NULL,
    queues text[] NOT NULL,
    concurrency integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
