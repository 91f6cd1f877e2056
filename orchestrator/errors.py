"""The one exception hierarchy of the orchestrator, split by who must act.

- ``UserError`` and its subclasses are for the person at the terminal: the CLI
  prints them as one line and exits non-zero (or, in chat, keeps the session).
- ``ToolError`` and its subclasses are for the model: the tool node turns them
  into an error ``ToolMessage`` and the loop goes on.
"""

from __future__ import annotations

from pydantic import ValidationError


class OrchestratorError(Exception):
    """Root of every error the orchestrator raises on purpose."""


class UserError(OrchestratorError):
    """Something the user must fix; shown as one line, never a traceback."""


class ConfigError(UserError):
    """A setting is missing or has a bad value."""


class ModelUnavailableError(UserError):
    """The chat model could not be reached or refused the request."""


class IncompleteReplyError(ModelUnavailableError):
    """The model's reply stopped before it ended: a cut stream, or no choices at all."""


class ToolError(OrchestratorError):
    """A tool call failed in a way the model should hear about and may work around.

    Tools may raise it (or a subclass) themselves to choose the ``code`` and
    whether retrying could help.
    """

    code: str = "tool_failed"
    recoverable: bool = True

    def __init__(self, message: str, *, code: str | None = None, recoverable: bool | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        if recoverable is not None:
            self.recoverable = recoverable


class UnknownToolError(ToolError):
    """The model called a tool that does not exist at this level."""

    code = "unknown_tool"


class InvalidToolArgumentsError(ToolError):
    """The model's arguments do not match the tool's schema."""

    code = "invalid_arguments"


def validation_problems(error: ValidationError) -> str:
    """`field: problem; ...` in one line, for a model or a person to act on."""
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or 'value'}: {problem['msg']}"
        for problem in error.errors()
    )


__all__ = [
    "ConfigError",
    "IncompleteReplyError",
    "InvalidToolArgumentsError",
    "ModelUnavailableError",
    "OrchestratorError",
    "ToolError",
    "UnknownToolError",
    "UserError",
]
