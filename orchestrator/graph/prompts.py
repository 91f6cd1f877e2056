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

CANCELLED_CALL = "The user cancelled this call before it finished."
CANCELLED_TURN = "(The user cancelled this turn.)"
FOLLOW_UP_LIMIT = (
    "The limit of follow-up turns after one user message was reached "
    "(ORCHESTRATOR_MAX_FOLLOW_UPS): report the result above when the user writes next."
)
