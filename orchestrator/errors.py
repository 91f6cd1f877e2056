"""Every exception of the orchestrator, under one root and named by who must act.

- **The model** — `ToolError` and its subclasses. The tool node turns them into
  an error tool message and the loop goes on. Two kinds of "try again" are kept
  apart: a `TransientToolError` may succeed as it is (retry it: the executor
  tries again with backoff before the model hears of it); an
  `InvalidToolArgumentsError` fails the same way every time (fix your
  arguments: never retried as it is, the model is told to change them).
- **The person at the terminal** — `UserError` and its subclasses: a setting,
  a database or a model server they must see to. The CLI prints one line and
  exits non-zero (in chat, the session goes on).
- **A developer** — `DeveloperError` and its subclasses: the author of a tool
  (or of a test) broke the contract. Only they can fix it, so these never end a
  user's command: a misused `@action` fails when the class is defined, a broken
  tool folder is skipped with a log line naming it.

Modules that raise these import them from here and still offer them under the
name they always had (`from orchestrator.folders.loader import ToolLoadError`).
Where callers catch a built-in exception (`ValueError`, `OSError`,
`yaml.YAMLError`...), the class keeps that base too.
"""

from __future__ import annotations

from typing import Literal

import yaml
from pydantic import JsonValue, ValidationError

RetryStrategy = Literal["retry_with_backoff", "fix_arguments"]


class OrchestratorError(Exception):
    """Root of every exception the orchestrator defines."""


# --- the model ----------------------------------------------------------------------------


class ToolError(OrchestratorError):
    """A tool call failed in a way the model should hear about and may work around.

    Tools may raise it (or a subclass) themselves to choose the ``code`` and
    whether retrying could help.
    """

    code: str = "tool_failed"
    recoverable: bool = True

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        recoverable: bool | None = None,
        details: dict[str, JsonValue] | None = None,
    ):
        super().__init__(message)
        if code is not None:
            self.code = code
        if recoverable is not None:
            self.recoverable = recoverable
        # What else is known, for a model or a script to act on: the fields that failed, the
        # service's status code... (the error envelope's `details`).
        self.details: dict[str, JsonValue] = details or {}

    @property
    def retry_strategy(self) -> RetryStrategy | None:
        """What another try needs: the same call later, different arguments, or nothing helps.

        The code decides, not the class, so a tool raising
        ``ToolError(..., code="invalid_arguments")`` is read the same way.
        """
        if self.code == InvalidToolArgumentsError.code:
            return "fix_arguments"
        return "retry_with_backoff" if self.recoverable else None


class TransientToolError(ToolError):
    """Retry it: the call may well succeed as it is a moment later (a dropped connection,
    a busy service). The executor retries it with backoff; the model hears only of the last try."""

    code = "transient"
    recoverable = True


class InvalidToolArgumentsError(ToolError):
    """Fix your arguments: they do not match the tool's parameters, and the same call would
    fail the same way. Never retried as it is; the model is told to change them."""

    code = "invalid_arguments"


class UnknownToolError(ToolError):
    """The model called a tool that does not exist at this level."""

    code = "unknown_tool"


class UnresolvedReferenceError(ToolError):
    """A plan's task refers to a value the result of an earlier task does not have
    (`{{t1.data.city}}` when t1 returned no `city`): the task did not run."""

    code = "unresolved_reference"
    recoverable = False


class FolderUnavailableError(ToolError):
    """An approved folder offered from its manifest could not be imported at its first call
    (its code fails now, or its files changed since the start), or no longer gives the tool
    called: the call did not run. Its approval is forgotten when its code is at fault."""

    code = "folder_unavailable"
    recoverable = False


class McpServerError(ToolError):
    """An MCP server could not be started, or is blocked: its tools answer with this."""

    code = "mcp_server_unavailable"


class SandboxUnavailableError(McpServerError):
    """A folder's sandbox rules cannot all be enforced on this machine and
    ORCHESTRATOR_REQUIRE_SANDBOX is set: its process is not started."""

    code = "sandbox_unavailable"
    recoverable = False


class BudgetExceededError(ToolError):
    """A budget stops the turn: the call did not run, and no other will this turn."""

    code = "budget_exceeded"
    recoverable = False


class GiveBack(OrchestratorError):
    """Raised by a worker's executor for a job of a content it no longer holds (its copy
    changed since it loaded it), before anything of the job ran: the job is queued again as
    it was, for a worker that holds it, without counting as an attempt (see `jobs.worker`).
    Nobody is told: it is the queue's business."""


# --- the person at the terminal -----------------------------------------------------------


class UserError(OrchestratorError):
    """Something the user must fix; shown as one line, never a traceback."""


class ConfigError(UserError):
    """A setting is missing or has a bad value."""


class ModelUnavailableError(UserError):
    """The chat model could not be reached or refused the request."""


class IncompleteReplyError(ModelUnavailableError):
    """The model's reply stopped before it ended: a cut stream, or no choices at all."""


class ModelTimeoutError(ModelUnavailableError):
    """The model's reply did not begin, or did not end, within ORCHESTRATOR_MODEL_TIMEOUT_SECONDS."""


class DatabaseUnavailableError(UserError):
    """The database cannot be reached or refused us."""


class DatabasePrivilegeError(UserError):
    """The database login lacks a privilege the schema's migrations need; the message names it
    and the statement a superuser runs to grant it. Never retried: only a person can grant it."""


class EmbeddingModelError(UserError):
    """The local embedding model did not load, failed a batch, or its process stopped."""


class UnknownModelError(EmbeddingModelError):
    """A local embedding model the graph builder does not know how to write (not a mean-pooled BERT)."""


class SessionOwnedError(UserError):
    """The session id is taken by another user."""


class QuestionsWaitingError(UserError):
    """The session's turn waits for answers: a new turn would drop the paused calls."""

    def __init__(self, session_id: str, count: int) -> None:
        super().__init__(
            f"Session {session_id} waits for answers to {count} question(s); answer them first."
        )


class AuthenticationError(UserError):
    """A request to `orchestrator serve` without a valid identity: no key, a revoked or unknown
    key, a JWT that fails its checks. Answered 401; the message says which, never the key."""


class RequestRefusedError(UserError):
    """A request `orchestrator serve` refuses: its HTTP status (404, 409, 422, 503) and why.

    Another user's thread or run is 404, never 403: its existence is not told.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RateLimitedError(UserError):
    """A key sent more requests than its rate allows; answered 429 with `Retry-After`."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServerUserError(UserError):
    """`orchestrator users` was given a user or key it cannot act on: an unknown user or key,
    a user that exists already, a name that cannot be a user id."""


# --- a developer --------------------------------------------------------------------------


class DeveloperError(OrchestratorError):
    """The author of a tool or a test broke the orchestrator's contract; the message says how."""


class ToolContractError(DeveloperError, TypeError):
    """A tool class misuses the API (say, `@action` on a method whose parameters have no
    model); raised when the class is defined, so its author meets it first."""


class ToolFolderError(DeveloperError):
    """A dropped-in tool folder that cannot be used: its files, `tool_config.yaml` or code.

    Named for the folder's author, not the person who dropped it in: what is
    wrong is inside the folder, and all the person at the terminal can do is
    tell its author or remove it. So it is no `UserError` and never ends a
    command: the folder is skipped with a log line naming it, the rest runs.
    """


class ToolConfigError(ToolFolderError, ValueError):
    """A `tool_config.yaml` that cannot be used; the message names the file and the field."""


class RemoteConfigError(ToolFolderError):
    """A folder's remote configuration that cannot be used now (unreachable, too large,
    invalid); the message says why, and the level falls back to a cached copy or its file."""


class ToolLoadError(ToolFolderError):
    """An approved folder whose code cannot be used; the message says why."""


class MissingPackageError(ToolLoadError):
    """An approved folder whose code imports a package this Python lacks; the message says
    which, and how to install it (`orchestrator tools install NAME`)."""


class ComponentMigrationError(ToolLoadError):
    """A tool folder's `migrations/` cannot be applied: a bad file name, a file changed
    since it ran, or SQL that fails; the message names the file."""


class FolderRefusedError(ToolFolderError, ValueError):
    """A folder that cannot be hashed, so cannot be approved; the message says why."""


class RefusedFileError(ToolFolderError, OSError):
    """A path that is not a regular file, or is larger than allowed; the message says which."""


class FileTooLargeError(RefusedFileError):
    """A file with more bytes than the reader allows."""


class YamlTooLargeError(ToolFolderError, yaml.YAMLError):
    """A document that would expand beyond the bounds; the message says which."""


class ScriptExhaustedError(DeveloperError, AssertionError):
    """A `ScriptedChatModel` was asked for more replies than its test scripted.

    An `AssertionError` too, so pytest reports it as the test's failure.
    """


class RemoteConnectionBlocked(DeveloperError, ConnectionRefusedError):
    """A test tried to reach a host other than this machine.

    A `ConnectionRefusedError` too, so the code under test meets it as a refused connection.
    """


def validation_problems(error: ValidationError) -> str:
    """`field: problem; ...` in one line, for a model or a person to act on."""
    return "; ".join(f"{field}: {problem}" for field, problem in _problems(error))


def validation_details(error: ValidationError) -> dict[str, JsonValue]:
    """The same problems as a mapping of field to problem (an error envelope's `details`)."""
    return {"fields": dict(_problems(error))}


def _problems(error: ValidationError) -> list[tuple[str, JsonValue]]:
    return [
        (".".join(str(part) for part in problem["loc"]) or "value", problem["msg"])
        for problem in error.errors()
    ]


__all__ = [
    "RequestRefusedError",
    "AuthenticationError",
    "RateLimitedError",
    "BudgetExceededError",
    "ConfigError",
    "DatabasePrivilegeError",
    "GiveBack",
    "DatabaseUnavailableError",
    "DeveloperError",
    "EmbeddingModelError",
    "UnknownModelError",
    "FileTooLargeError",
    "FolderRefusedError",
    "FolderUnavailableError",
    "IncompleteReplyError",
    "InvalidToolArgumentsError",
    "McpServerError",
    "SandboxUnavailableError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "QuestionsWaitingError",
    "OrchestratorError",
    "RefusedFileError",
    "RemoteConfigError",
    "RemoteConnectionBlocked",
    "ScriptExhaustedError",
    "SessionOwnedError",
    "ServerUserError",
    "ToolConfigError",
    "ToolContractError",
    "ToolError",
    "ToolFolderError",
    "ToolLoadError",
    "ComponentMigrationError",
    "MissingPackageError",
    "TransientToolError",
    "UnknownToolError",
    "UnresolvedReferenceError",
    "UserError",
    "YamlTooLargeError",
]
