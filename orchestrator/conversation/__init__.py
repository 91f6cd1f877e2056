"""One conversation: the session and its parts, what a turn led to, its background jobs.

`session` is the front (`Session`): it runs turns through the agent graph and
streams them, keeps the archive, delivers follow-ups and holds the questions a
turn waits on. `turns` is what a turn led to; `held_text` the streamed answer
text held back while it may be a tool call; `job_board` the background calls
(jobs) a session hands off; `recovery` what a stopped process left running.
The notes the orchestrator adds for the model stay in `orchestrator.notes`,
below the graph and the store, which read them too.
"""
