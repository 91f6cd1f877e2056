"""Prompts and user-facing texts of the agent graph."""

from __future__ import annotations

from orchestrator.errors import ConfigError
from orchestrator.settings import Settings, env_name

MAX_PROMPT_CHARS = 100_000  # a system prompt file is text, not a corpus
UNREADABLE_PROMPT = "{setting}: cannot read {path} ({reason})"

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

# Why a tool call was not run, told to the model in the call's tool message.
CALL_CUT_OFF = (
    "The arguments of this call did not arrive whole: your reply ended {how} after "
    "{length} characters of them. It was not run; call it again with complete arguments."
)
CALL_NOT_JSON = (
    "The arguments of this call are not valid JSON ({error}). It was not run; "
    "send them as one JSON object."
)
CALL_NOT_OBJECT = (
    "The arguments of this call are {kind}, not a JSON object. It was not run; "
    "send them as one JSON object ({{}} for none)."
)
CALL_TOO_LARGE = (
    "The {what} of this call ran past {limit} characters, so it was not run and the rest "
    "of your reply was not read. Keep tool names short and send large content in parts."
)
CALL_BAD_NAME = (
    "{name} is not a tool name (a name has up to 64 letters, digits, _ or -), so this call "
    "was not run. Available tools: {available}."
)
NO_RESULT = "No result was recorded for this call; it may not have run."

# For the person: a reply that did not end as a whole reply does.
REPLY_CUT_OFF = (
    "The model's reply was cut off: its stream ended without a finish reason after "
    "{length} characters, so it is not kept as an answer. Try again."
)
NO_CHOICES = "The model server sent an empty reply (no choices, no finish reason). Try again."
# After the text of an answer cut at its length limit: for the person, and the model next turn.
CUT_AT_CAP = (
    "[Reply cut off: it passed the limit of {limit} output tokens ({setting}) and the model "
    "server did not end it, so it was stopped here.]"
)
CUT_BY_SERVER = (
    '[Reply cut off: the model server ended it at a length limit (finish reason "length"){limit}.]'
)


def orchestrator_prompt(settings: Settings) -> str:
    """The orchestrator's own system prompt: the setting's text or file, else the built-in one.

    Raises ConfigError naming the setting when its file cannot be read as text.
    """
    if settings.system_prompt is not None:
        return settings.system_prompt
    path = settings.system_prompt_file
    if path is None:
        return ORCHESTRATOR_PROMPT
    setting = env_name("system_prompt_file")
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "not UTF-8 text"
        raise ConfigError(UNREADABLE_PROMPT.format(setting=setting, path=path, reason=reason)) from None
    if not text.strip() or len(text) > MAX_PROMPT_CHARS:
        reason = "empty" if not text.strip() else f"over {MAX_PROMPT_CHARS:,} characters"
        raise ConfigError(UNREADABLE_PROMPT.format(setting=setting, path=path, reason=reason))
    return text.strip()
