"""`/context` and `/compact [focus]` in chat: the model's window, and compaction on demand."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, SystemMessage
from rich.console import Console
from rich.markup import escape

from orchestrator.conversation.session import Session
from orchestrator.graph.model_pipeline.compaction import (
    CompactionMiddleware,
    ContextUse,
    compact_now,
    context_use,
)
from orchestrator.graph.prompts import orchestrator_prompt
from orchestrator.graph.state import Summary
from orchestrator.llm.tokens import PROFILE, context_window
from orchestrator.runtime import Orchestrator

BAR_WIDTH = 40
PARTS = (("system", "blue"), ("tools", "magenta"), ("summary", "yellow"), ("messages", "green"))


def _compaction(runtime: Orchestrator) -> CompactionMiddleware:
    window, source = context_window(runtime.model, configured=runtime.settings.context_tokens)
    return CompactionMiddleware(
        model=runtime.model,
        window=window,
        tools=runtime.tools,
        window_from_profile=source == PROFILE,
        timeout_seconds=runtime.settings.model_timeout_seconds,
    )


async def _state(session: Session) -> tuple[list[BaseMessage], Summary | None]:
    values = (await session.graph.aget_state(session.config)).values
    return list(values.get("messages", [])), values.get("summary")


async def show_context(runtime: Orchestrator, session: Session, out: Console) -> None:
    """The window's use as a bar: system, tools, summary, messages."""
    messages, summary = await _state(session)
    use = context_use(
        _compaction(runtime),
        system=SystemMessage(orchestrator_prompt(runtime.settings)),
        messages=messages,
        summary=summary,
    )
    out.print(context_bar(use), highlight=False)


def context_bar(use: ContextUse) -> str:
    """One line of rich markup: a bar of the window and the tokens of each part."""
    widths = [round(BAR_WIDTH * getattr(use, name) / use.window) for name, _ in PARTS]
    cells = [f"[{colour}]{'█' * w}[/{colour}]" for w, (_, colour) in zip(widths, PARTS, strict=True)]
    free = max(0, BAR_WIDTH - sum(widths))
    parts = ", ".join(f"{name} {getattr(use, name)}" for name, _ in PARTS)
    percent = 100 * use.used / use.window
    return f"{''.join(cells)}{'░' * free} {use.used}/{use.window} tokens ({percent:.0f}%): {parts}"


async def compact_session(
    runtime: Orchestrator, session: Session, focus: str, *, out: Console
) -> None:
    """Summarise the older messages now (the last ones stay), `focus` told to the model."""
    messages, summary = await _state(session)
    new, done = await compact_now(
        _compaction(runtime),
        system=SystemMessage(orchestrator_prompt(runtime.settings)),
        messages=messages,
        summary=summary,
        focus=focus,
        run=session.context,
    )
    if done is None:
        out.print("Nothing to compact yet.")
        return
    if new is None:
        out.print(
            "Nothing to gain: a summary would not be shorter than the messages it would replace; "
            "the conversation stays as it is."
        )
        return
    await session.keep_summary(new)
    out.print(f"[dim]{escape(done.line())}[/dim]", highlight=False)
