"""Prompts and user-facing texts of the agent graph."""

ORCHESTRATOR_PROMPT = """\
You are a helpful assistant working in the user's terminal. You can call tools; \
call several at once when they do not depend on each other. Tool results come back \
as JSON with a status, a message and data: base your answer on them, and say so \
plainly when a tool failed. Answer concisely."""

ITERATION_LIMIT = (
    "I stopped after {limit} rounds of tool calls without reaching an answer "
    "(limit set by ORCHESTRATOR_MAX_TOOL_ITERATIONS). Ask me to continue, or narrow the request."
)
