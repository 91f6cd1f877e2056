"""Model failures explained in one line: what happened, and at which server.

Each failure says what happened: the server could not be reached, closed the
connection before answering, answered an HTTP error, reported an error
mid-reply, cut its reply off, took longer than its timeout, or sent one that
could not be read (an empty one too). Only the
exceptions the OpenAI client, Anthropic's (when the `anthropic` extra is
loaded: its classes have the same names) and LangChain raise for these are
matched (by type, and for built-in types by where they were raised), so our
own bugs still surface as themselves.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from types import FrameType
from urllib.parse import urlsplit

import openai
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableBinding

from orchestrator.errors import IncompleteReplyError, ModelTimeoutError, ModelUnavailableError
from orchestrator.llm.openai_client import openai_client
from orchestrator.redact import redact
from orchestrator.settings import Settings, env_name

# A server's message is shown on one line, at most this long.
MAX_MESSAGE_CHARS = 300
# Where the OpenAI client goes when no base URL is set.
OPENAI_HOST = "api.openai.com"
# Anthropic's client: the variables it reads its key and its server from (langchain-anthropic's).
ANTHROPIC_KEY = "ANTHROPIC_API_KEY"
ANTHROPIC_BASE_URL = "ANTHROPIC_BASE_URL"


def explain_model_error(
    error: Exception, *, settings: Settings | None = None
) -> ModelUnavailableError | None:
    """A one-line error for a failed model call, or None if it is not a model-service problem.

    `settings` name the orchestrator's server and timeout in the hints; a nested
    agent's call, which may go to a server of its own, is explained without them.
    """
    where = _server(error, settings)
    if isinstance(error, _sdk("APIConnectionError")):  # timeouts too
        return _connection_error(error, where=where, settings=settings)
    if isinstance(error, _sdk("AuthenticationError")):
        key = ANTHROPIC_KEY if _anthropic(error) else env_name("openai_api_key")
        return ModelUnavailableError(f"The model server at {where} rejected the API key ({key}).")
    status = getattr(error, "status_code", None)
    if isinstance(error, _sdk("APIStatusError")) and status != 200:
        return ModelUnavailableError(
            f"The model server at {where} answered {status}: {_server_message(error)}"
        )
    if isinstance(error, _sdk("APIResponseValidationError")):
        return _unreadable(where, "its reply does not have the expected fields")
    if isinstance(error, _sdk("APIError")):
        # OpenAI's client raises a bare APIError for an error object in a stream that began
        # with 200; Anthropic's a status error of that 200 for an `error` event.
        return ModelUnavailableError(
            f"The model server at {where} reported an error mid-reply"
            f"{_code(getattr(error, 'body', None))}: "
            f"{_server_message(error)}"
        )
    if isinstance(error, _langchain_error("_client_utils", "StreamChunkTimeoutError")):
        # LangChain's own bound on the wait for each chunk of a stream.
        waited = float(getattr(error, "timeout_s", 0.0))
        return ModelUnavailableError(
            f"The model server at {where} stopped sending its reply mid-stream for {waited:g}s."
        )
    return _reply_error(error, where=where)


def reply_timeout(
    model: Runnable[LanguageModelInput, BaseMessage], *, seconds: float, received: int | None
) -> ModelTimeoutError:
    """A reply that outlasted ORCHESTRATOR_MODEL_TIMEOUT_SECONDS after `received` characters.

    `received` None: not a token of it came.
    """
    server = _served_at(model)
    who = f"The model server at {server}" if server else "The model server"
    waited = f"{seconds:g}s ({env_name('model_timeout_seconds')})"
    if received is None:
        return ModelTimeoutError(f"{who} did not answer within {waited}.")
    return ModelTimeoutError(
        f"{who} did not finish its reply within {waited}: it was stopped after "
        f"{received} characters and not kept. Try again, or raise the setting."
    )


def _served_at(model: Runnable[LanguageModelInput, BaseMessage]) -> str | None:
    """`scheme://host:port` of the OpenAI-compatible server `model` calls (None: not one)."""
    while isinstance(model, RunnableBinding):  # the model with its tools bound
        model = model.bound
    client = openai_client(model)
    if client is None:
        return None
    return _origin(client.openai_api_base or f"https://{OPENAI_HOST}/v1")


def _connection_error(
    error: Exception, *, where: str, settings: Settings | None
) -> ModelUnavailableError:
    """What went wrong with the connection: never reached, closed, cut, or too slow."""
    if _caused_by(error, _http_errors("ConnectError", "ConnectTimeout")):
        if _default_endpoint(where, settings):
            return ModelUnavailableError(
                f"Cannot reach {OPENAI_HOST}: check your network, or set "
                f"{env_name('openai_base_url')} for an OpenAI-compatible server."
            )
        return ModelUnavailableError(
            f"Cannot reach the model server at {where}: "
            f"{_reach_hint(where, settings, anthropic=_anthropic(error))}."
        )
    mid_reply = _reading_body(error)
    if isinstance(error, _sdk("APITimeoutError")):
        waited = _timeout(settings)
        if mid_reply:
            return ModelUnavailableError(
                f"The model server at {where} stopped sending its reply mid-stream for {waited}."
            )
        return ModelUnavailableError(f"The model server at {where} did not answer within {waited}.")
    if mid_reply:
        return ModelUnavailableError(
            f"The reply from the model server at {where} was cut off mid-stream: "
            "the connection dropped before it ended. Try again."
        )
    if _caused_by(error, _http_errors("RemoteProtocolError", "ReadError", "WriteError")):
        return ModelUnavailableError(
            f"The model server at {where} closed the connection before answering."
        )
    return ModelUnavailableError(
        f"The request to the model server at {where} failed: {_first_line(_root_cause(error))}"
    )


def _reply_error(error: Exception, *, where: str) -> ModelUnavailableError | None:
    """A reply that came but could not be read, or said it was an error; None: not one."""
    if isinstance(error, json.JSONDecodeError) and _passed_through(error, "openai."):
        if _passed_through(error, "openai._streaming"):
            return _unreadable(where, "a line of its stream is not JSON")
        return _unreadable(where, "it is empty" if not error.doc.strip() else "it is not JSON")
    # A stream that ended before its first chunk (an empty 200) leaves LangChain nothing.
    if isinstance(error, ValueError) and _raised_in(
        error, "langchain_core.language_models.chat_models", "astream", "stream"
    ):
        return _unreadable(where, "it is empty")
    # LangChain checks a whole reply's shape itself, raising built-in errors.
    if isinstance(error, ValueError | KeyError | TypeError) and _raised_in(
        error, "langchain_openai.chat_models.base", "_create_chat_result"
    ):
        body = error.args[0] if error.args else None
        if isinstance(body, dict):  # the `error` object of a 200 reply
            return ModelUnavailableError(
                f"The model server at {where} reported an error instead of a reply"
                f"{_code(body)}: {_server_message(body)}"
            )
        return _unreadable(where, "it is not a chat completion")
    # A whole reply with no choices leaves LangChain no message to return.
    if isinstance(error, IndexError) and _raised_in(
        error, "langchain_core.language_models.chat_models", "invoke", "ainvoke"
    ):
        return IncompleteReplyError(
            f"The model server at {where} sent an empty reply (no choices). Try again."
        )
    return None


def _unreadable(where: str, why: str) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"The model server at {where} sent a reply that could not be read ({why})."
    )


def _server(error: BaseException, settings: Settings | None) -> str:
    """Where the failing request went (scheme://host:port), else where the settings point."""
    request = getattr(error, "request", None) if isinstance(error, _sdk("APIError")) else None
    if request is not None:
        return _origin(str(request.url))
    if settings is None:
        return "its address"
    return _origin(settings.openai_base_url) if settings.openai_base_url else "the OpenAI API"


def _timeout(settings: Settings | None) -> str:
    if settings is None:
        return "its timeout"
    return f"{settings.model_timeout_seconds:g}s ({env_name('model_timeout_seconds')})"


def _origin(url: str) -> str:
    """`scheme://host:port` of `url`: no credentials, path or query."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: nothing safe to show but the host
        port = None
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _default_endpoint(where: str, settings: Settings | None) -> bool:
    """Whether the request went to OpenAI's own API because no base URL is set."""
    unset = settings is None or settings.openai_base_url is None
    return unset and urlsplit(where).hostname == OPENAI_HOST


def _reach_hint(where: str, settings: Settings | None, *, anthropic: bool = False) -> str:
    if anthropic:
        return f"check {ANTHROPIC_BASE_URL} (or the agent's `llm.base_url`) and that it is running"
    base_url = settings.openai_base_url if settings is not None else None
    if settings is not None and (base_url is None or _origin(base_url) == where):
        return f"check {env_name('openai_base_url')} and that the server is running"
    return "check the agent's `llm.base_url` and that the server is running"


def _code(body: object) -> str:
    # Anthropic's error object has no code: its type (`overloaded_error`) says as much.
    anthropic = isinstance(body, dict) and body.get("type") == "error"
    body = _error_object(body)
    code = body.get("type" if anthropic else "code") if isinstance(body, dict) else None
    return f" ({code})" if code not in (None, "") else ""


def _error_object(body: object) -> object:
    """The `error` object of a body: OpenAI's client hands it over alone, Anthropic's whole
    (`{"type": "error", "error": {"type": ..., "message": ...}}`)."""
    inner = body.get("error") if isinstance(body, dict) else None
    return inner if isinstance(inner, dict) else body


def _server_message(source: Exception | dict[object, object]) -> str:
    """The server's own words, one line, without secrets."""
    body = _error_object(getattr(source, "body", None) if isinstance(source, Exception) else source)
    text = str(body.get("message", "")) if isinstance(body, dict) else ""
    if not text and isinstance(source, Exception):
        text = str(getattr(source, "message", "") or source)
    line = redact(_first_line(text)) if text.strip() else "(no message)"  # whole secrets only
    return line if len(line) <= MAX_MESSAGE_CHARS else line[:MAX_MESSAGE_CHARS] + "..."


def _first_line(value: object) -> str:
    text = str(value).strip()
    if not text:
        return type(value).__name__ if isinstance(value, BaseException) else ""
    return text.splitlines()[0]


def _sdk(name: str) -> tuple[type[BaseException], ...]:
    """The provider clients' exception class `name`: OpenAI's, and Anthropic's once loaded
    (imported only by an `anthropic:` model, from the `anthropic` extra)."""
    kinds: list[type[BaseException]] = [getattr(openai, name)]
    anthropic = sys.modules.get("anthropic")
    kind = getattr(anthropic, name, None)
    if isinstance(kind, type) and issubclass(kind, BaseException):
        kinds.append(kind)
    return tuple(kinds)


def _anthropic(error: BaseException) -> bool:
    """Whether `error` is one of Anthropic's client (langchain-anthropic raises subclasses)."""
    anthropic = sys.modules.get("anthropic")
    kind = getattr(anthropic, "AnthropicError", None)
    return isinstance(kind, type) and isinstance(error, kind)


def _langchain_error(module: str, name: str) -> tuple[type[BaseException], ...]:
    """LangChain's OpenAI error class `name`, if LangChain's OpenAI client is loaded at all."""
    loaded = sys.modules.get(f"langchain_openai.chat_models.{module}")
    kind = getattr(loaded, name, None)
    return (kind,) if isinstance(kind, type) and issubclass(kind, BaseException) else ()


def _http_errors(*names: str) -> tuple[type[BaseException], ...]:
    """The named exception classes of whichever HTTP library the OpenAI client runs on."""
    # openai>=3 runs on httpx2, older releases on httpx; either may be the one in use.
    modules = [module for module in map(sys.modules.get, ("httpx2", "httpx")) if module]
    return tuple(getattr(m, name) for m in modules for name in names if hasattr(m, name))


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _caused_by(error: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    return bool(kinds) and any(isinstance(cause, kinds) for cause in _causes(error))


def _root_cause(error: BaseException) -> BaseException:
    *_, last = _causes(error)
    return last


def _frames(error: BaseException) -> Iterator[FrameType]:
    traceback = error.__traceback__
    while traceback is not None:
        yield traceback.tb_frame
        traceback = traceback.tb_next


def _passed_through(error: BaseException, module: str) -> bool:
    """Whether `error` was raised inside `module` (a name, or a prefix ending in a dot)."""
    return any(
        name == module or (module.endswith(".") and name.startswith(module))
        for name in (str(frame.f_globals.get("__name__", "")) for frame in _frames(error))
    )


def _raised_in(error: BaseException, module: str, *functions: str) -> bool:
    """Whether `error` was raised by one of `functions` of `module` itself."""
    frames = list(_frames(error))
    if not frames:
        return False
    innermost = frames[-1]
    return innermost.f_globals.get("__name__") == module and innermost.f_code.co_name in functions


def _reading_body(error: BaseException) -> bool:
    """Whether the transport failed while the reply's body was being read (it had begun)."""
    readers = ("aiter_raw", "iter_raw")
    return any(
        frame.f_code.co_name in readers
        and str(frame.f_globals.get("__name__", "")) in ("httpx._models", "httpx2._models")
        for cause in _causes(error)
        for frame in _frames(cause)
    )
