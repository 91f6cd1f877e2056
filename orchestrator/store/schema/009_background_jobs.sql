-- background calls as jobs: a request's job, whether its result reached its session, a notice when it ends
-- A background call is a job of the queue (schema job_queue): `job_id` is that job's id, set when
-- the call is queued or a worker takes it; `delivered_at` when its result went into its session.
-- When such a request ends, `orchestrator_job_ended` tells whoever listens (LISTEN
-- orchestrator_job_ended) which session it belongs to, by a digest of the session id only: any
-- login may listen, so the payload names nothing. A cancelled job has nothing to report.

ALTER TABLE requests ADD COLUMN job_id bigint, ADD COLUMN delivered_at timestamptz;

CREATE INDEX requests_undelivered ON requests (user_id, session_id)
    WHERE job_id IS NOT NULL AND delivered_at IS NULL;

CREATE FUNCTION orchestrator_job_ended() RETURNS trigger
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
        AS $$ BEGIN
            IF NEW.outcome = 'cancelled' THEN
                NEW.delivered_at := now();
            END IF;
            PERFORM pg_notify(
                'orchestrator_job_ended',
                encode(sha256(convert_to(coalesce(NEW.session_id, ''), 'UTF8')), 'hex')
            );
            RETURN NEW;
        END $$;

CREATE TRIGGER requests_job_ended BEFORE UPDATE OF outcome ON requests
    FOR EACH ROW
    WHEN (NEW.job_id IS NOT NULL AND NEW.outcome IS NOT NULL AND OLD.outcome IS DISTINCT FROM NEW.outcome)
    EXECUTE FUNCTION orchestrator_job_ended();
