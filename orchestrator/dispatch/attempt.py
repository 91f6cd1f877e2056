"""One run of one tool: blocking code off the event loop, anything it raises contained.

Whatever a tool raises ends its call, never the turn or the process:
`SystemExit`, `KeyboardInterrupt`, a bare `BaseException`, a `GeneratorExit`
and a `CancelledError` of the tool's own become failed calls like any bug.
Only a real cancellation of the running task (Ctrl-C, a timeout), a coroutine
really being closed and LangGraph's `GraphBubbleUp` go on up. Failure messages
lose their secrets and outside paths on the way out (see `redact`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, Tool
from langgraph.errors import GraphBubbleUp

from orchestrator.errors import ToolError
from orchestrator.redact import redact
from orchestrator.tools.results import ToolResult, result_from_output
from orchestrator.tools.threads import in_thread

logger = logging.getLogger(__name__)

TOOL_FAILED = "{name} failed: {error}"
T = TypeVar("T")


async def attempt(work: Callable[[], Awaitable[object]], *, name: str) -> ToolResult:
    """One run of a tool; whatever it raises, short of a real cancellation, is a ToolError."""
    task = _running_task()
    try:
        return result_from_output(await work())
    except (ToolError, GraphBubbleUp):  # GraphBubbleUp: LangGraph's interrupts pass untouched
        raise
    except OSError as error:  # connections and the like: worth another try
        raise _failure(name, _describe(error), recoverable=True) from None
    except Exception as error:  # a tool's bug must not end the turn, nor be retried
        logger.debug("tool %s raised", name, exc_info=True)
        raise _failure(name, _describe(error)) from None
    except BaseException as error:
        raise _contained(error, name=name, task=task) from None


def langchain_work(
    tool: BaseTool, args: dict[str, object], config: RunnableConfig | None, *, name: str
) -> Callable[[], Awaitable[object]]:
    """How to run a LangChain tool once, blocking code on a thread of its own."""

    async def work() -> object:
        if _blocking(tool):  # LangChain would use the loop's executor, which the exit waits for
            return await in_thread(lambda: tool.invoke(args, config=config), name=name)
        return await _contained_tool(tool).ainvoke(args, config=config)

    return work


# Per tool (by id, with the tool itself to tell a reused id): its copy whose coroutine
# contains SystemExit and the like. Made once: a copy per call cost a tenth of a call.
_CONTAINED: dict[int, tuple[BaseTool, BaseTool]] = {}


def _contained_tool(tool: BaseTool) -> BaseTool:
    """The tool to invoke: for a coroutine tool, a copy that catches what would end the loop.

    LangChain runs the coroutine as a task of its own; asyncio lets SystemExit and
    KeyboardInterrupt raised in any task out of the event loop, which they end.
    So they are caught inside that task, by a wrapper around the coroutine.
    """
    if not (isinstance(tool, StructuredTool) and tool.coroutine is not None):
        return tool
    cached = _CONTAINED.get(id(tool))
    if cached is None or cached[0] is not tool:
        contained = _containing(tool.coroutine, name=tool.name)
        cached = _CONTAINED[id(tool)] = (tool, tool.model_copy(update={"coroutine": contained}))
    return cached[1]


def _containing(
    coroutine: Callable[..., Awaitable[T]], *, name: str
) -> Callable[..., Awaitable[T]]:
    @functools.wraps(coroutine)  # the same signature: LangChain passes `config` by it
    async def contained(*args: object, **kwargs: object) -> T:
        task = _running_task()
        try:
            return await coroutine(*args, **kwargs)
        except Exception:  # ordinary errors are judged in `attempt`
            raise
        except BaseException as error:
            raise _contained(error, name=name, task=task) from None

    return contained


def _contained(
    error: BaseException, *, name: str, task: asyncio.Task[object] | None
) -> BaseException:
    """The ToolError for what a tool raised: SystemExit, KeyboardInterrupt, BaseException,
    its own CancelledError or GeneratorExit.

    What must go on up is returned as it is: a real cancellation of the running
    task (Ctrl-C, a timeout) and a coroutine being closed (`task`, the one the
    call started in, is not the one running then).
    """
    if isinstance(error, GeneratorExit) and (task is None or _running_task() is not task):
        return error
    if isinstance(error, asyncio.CancelledError) and _really_cancelled():
        return error
    logger.debug("tool %s raised", name, exc_info=error)
    return _failure(name, _describe(error))


def _blocking(tool: BaseTool) -> bool:
    """A tool with only a synchronous implementation."""
    if isinstance(tool, StructuredTool | Tool):
        return tool.coroutine is None and tool.func is not None
    # Whether it overrides LangChain's async hook: nothing public says so.
    return type(tool)._arun is BaseTool._arun  # pyright: ignore[reportPrivateUsage]


def _running_task() -> asyncio.Task[object] | None:
    # A coroutine closed by the garbage collector may run where no loop runs.
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _really_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _failure(name: str, error: str, *, recoverable: bool = False) -> ToolError:
    return ToolError(TOOL_FAILED.format(name=name, error=error), recoverable=recoverable)


def sanitised(result: ToolResult, tool: BaseTool | None) -> ToolResult:
    """A failure's message without secrets or paths outside the tool's folder."""
    if result.status != "failure":
        return result
    folder = (tool.metadata or {}).get("folder") if tool is not None else None
    message = redact(result.message, keep=[str(folder)] if folder else [])
    return result if message == result.message else result.model_copy(update={"message": message})


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
