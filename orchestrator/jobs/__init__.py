"""Background calls as jobs of a queue in the product's PostgreSQL, run by workers anywhere.

`job` (a job's arguments, the queue it waits in), `queue` (procrastinate on the
database), `worker` (takes and runs jobs, watches heartbeats), `execute` (one
job: trust, then the dispatch pipeline), `stalled` (jobs whose worker stopped),
`delivery` (a job's result into its session), `runner` (what `chat` and `ask`
hand background calls to; `handover`: a call as a job; `views`: what the person
reads), `trust` (approved folder contents, in the database too), `spawn` (a
worker started for what is left when a command ends).

procrastinate itself (`queue`, `worker`, `execute`, `stalled`) is imported only
when a job is made or a worker starts: a command that makes none never loads it.
"""
