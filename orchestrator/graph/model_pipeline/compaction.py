"""Long conversations: the model sees a summary in place of older messages once they would not fit.

Before each call the prompt (system message, tool schemas, summary, messages)
is counted; past `threshold` of the model's window, the older messages are
summarised by the level's own model and the model sees the summary and the
last messages verbatim. A model message with tool calls and the results that
answer it move together. Compaction runs only when it can bring the prompt
under its target (the threshold; the window itself when the prompt would not
fit at all), counting what it cannot shrink (system prompt, tool schemas, RAG
context) and the longest summary: so it always saves tokens, and the next
waits until the conversation has grown past the target again. When the
system prompt and tools alone take most of the window, the person is told
once a session (see `window_notice`). Here only the model's view changes; the summary is kept
in the state (`summary`) with the id of the last message it covers, so a resumed
session starts from it. Once a turn has ended and its messages are archived, the
session drops from the state the messages of earlier turns a summary stands for
(`summarised`): the archive (and so RAG and `/history`) keeps every one, and a
turn's cost stays that of the window, not of the whole conversation. A message
too large on its own is cut with a marker.
A summary call that fails leaves the turn running on the cut history.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.errors import GraphBubbleUp

from orchestrator.errors import BudgetExceededError
from orchestrator.events import Stage, emit_status
from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.graph.model_pipeline.model_usage import count_model_call, least_cost
from orchestrator.graph.model_pipeline.window_notice import Told, WindowUse
from orchestrator.graph.state import Summary
from orchestrator.llm.summary import SUMMARY_PROMPT, after_summary
from orchestrator.llm.tokens import CHARS_PER_TOKEN, estimate_tokens, message_tokens, prompt_tokens
from orchestrator.notes import turn_start
from orchestrator.tools.context import RunContext
from orchestrator.tools.request_log import CallTask
from orchestrator.tracing.spans import span
from orchestrator.usage.prices import ModelIdentity

logger = logging.getLogger(__name__)

SUMMARY_HEADER = "Summary of the earlier conversation (older messages are not shown):\n"
CUT_MARKER = "\n[... cut: this message was too long for the model's context window ...]"
THRESHOLD = 0.8
SUMMARY_SHARE = 0.15  # of the window, the most a summary may take
MESSAGE_SHARE = 0.25  # of the window, the most one message may take
KEEP_SHARE = 0.4  # of the window, the most the messages kept verbatim take after compacting
MAX_CORRECTION = 4.0  # a server's count trusted up to this many times our estimate
MESSAGE_LINE_CHARS = 2000  # of one message, the most a summary request shows


@dataclass(frozen=True, slots=True)
class Compacted:
    """What one compaction did: messages summarised, tokens the view saved, whether it failed.

    A compaction that saved nothing (`saved_tokens` 0, not failed) left the
    view as it was: its summary would not have been shorter than what it replaced.
    """

    messages: int
    saved_tokens: int
    failed: bool = False

    @property
    def gained(self) -> bool:
        """Whether the model's view is smaller for it."""
        return self.failed or self.saved_tokens > 0

    def line(self, *, agent_path: Sequence[str] = ()) -> str:
        """One quiet line for the person; a nested agent's names the agent (`agent_path`)."""
        where = f"context of {' > '.join(agent_path)}" if agent_path else "context"
        if self.failed:
            return (
                f"{where}: summary failed; {self.messages} older message(s) left out "
                f"of the model's view ({self.saved_tokens} tokens)"
            )
        if not self.gained:
            return (
                f"{where}: a summary of {self.messages} older message(s) would not be shorter "
                "than they are; they stay as they were"
            )
        return (
            f"{where}: {self.messages} older message(s) summarised, "
            f"{self.saved_tokens} tokens saved"
        )


class CompactionMiddleware:
    """Keeps each call's prompt inside `window` tokens by summarising what came first.

    `window_from_profile` says the window is the model profile's (a setting
    would not change it): the note of a crowded window says so.
    """

    def __init__(
        self,
        *,
        model: BaseChatModel,
        window: int,
        tools: Sequence[BaseTool] = (),
        threshold: float = THRESHOLD,
        window_from_profile: bool = False,
        timeout_seconds: float | None = None,
    ) -> None:
        self.model = model
        self.timeout_seconds = timeout_seconds  # the whole summary call's, as any model reply's
        self.window = window
        self.threshold = threshold
        self.identity = ModelIdentity.of(model)
        self.window_from_profile = window_from_profile
        self._tools = tuple(tools)
        self._tool_tokens: int | None = None
        self._told = Told()
        self.summary_chars = int(window * SUMMARY_SHARE) * CHARS_PER_TOKEN  # the most a summary has
        # What the longest summary takes of the prompt, its header included.
        self.summary_room = message_tokens(SystemMessage(SUMMARY_HEADER + " " * self.summary_chars))
        # Server-reported input tokens ÷ our estimate, from the last call that reported them.
        self.correction = 1.0

    @property
    def tool_tokens(self) -> int:
        """What the tools' schemas take of the prompt, counted at the first call that needs it.

        Not at startup: with thousands of tools their schemas took a quarter of
        the time to ready, for a figure no call had asked for yet.
        """
        if self._tool_tokens is None:
            schemas = [convert_to_openai_tool(tool) for tool in self._tools]
            self._tool_tokens = estimate_tokens(json.dumps(schemas)) if schemas else 0
        return self._tool_tokens

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """Call with the summary and the messages after it; compact first when they would not fit."""
        summary = request.state.get("summary")
        head, messages = _leading_system(request.messages)
        messages = _after(messages, summary)
        fixed = self.fixed_tokens(request.system_message, head)
        shown = _shown(summary, messages)
        update: dict[str, object] = {}
        if self._tell(request):
            update["window_noted"] = True
        shares = self.shares(fixed + shown)
        if not shares:
            # Without a summary the model sees the call's messages as they are: no copy of them.
            if summary:
                request = request.override(messages=[*head, *_summary_messages(summary), *messages])
            answer = self._corrected(await handler(request), fixed + shown)
            return _with(answer, update)
        with span("compaction", {"orchestrator.window_tokens": self.window}) as opened:
            summary, kept, done = await compact(
                self,
                system=request.system_message,
                turn=turn_start(list(request.state["messages"])) or "",
                head=head,
                messages=messages,
                summary=summary,
                shares=shares,
                run=request.run,
                task=CallTask.of(request.config),  # its usage kept with the model step's writes
            )
            if opened is not None and done is not None:
                opened.set_attributes(
                    {
                        "orchestrator.summarised_messages": done.messages,
                        "orchestrator.saved_tokens": done.saved_tokens,
                        "orchestrator.summary_failed": done.failed,
                    }
                )
        if done is not None:
            emit_status(Stage.COMPACTED, done.line(agent_path=request.run.agent_path))
            if done.gained:
                update["summary"] = summary
        view = [*head, *_summary_messages(summary), *kept]
        answer = await handler(request.override(messages=view))
        answer = self._corrected(answer, fixed + _shown(summary, kept))
        return _with(answer, update)

    def fixed_tokens(self, system: BaseMessage, head: Sequence[BaseMessage]) -> int:
        """What every call takes whatever compaction does: system prompt, tool schemas, RAG context."""
        return message_tokens(system) + self.tool_tokens + prompt_tokens(head)

    def shares(self, prompt: int) -> tuple[float, ...]:
        """The shares of the window a prompt of `prompt` tokens passes: the targets to compact it under.

        None: it fits. The threshold first, so that the next compaction is some
        turns away; then the window itself, when the prompt would not fit at
        all: compaction then keeps the call possible even when the system
        prompt and tools leave no room to reach the threshold.
        """
        over = self.correction * prompt
        return tuple(share for share in (self.threshold, 1.0) if over > share * self.window)

    def room(
        self, system: BaseMessage, head: Sequence[BaseMessage], *, share: float | None = None
    ) -> int:
        """Tokens (as estimated) the messages may take beside the system prompt, tools and a summary.

        Below `share` of the window (the threshold unless given), the longest
        summary set aside: messages within it and a summary bring the prompt
        under its target whatever the summary says. (So a compaction run when
        the prompt is past that target always saves tokens: what it folds in
        takes more than the longest summary.)
        """
        target = int((self.threshold if share is None else share) * self.window / self.correction)
        return target - self.fixed_tokens(system, head) - self.summary_room

    def budget(
        self, system: BaseMessage, head: Sequence[BaseMessage], *, share: float | None = None
    ) -> int:
        """Tokens the messages kept verbatim after compacting take at most.

        Half the `room`, and at most `KEEP_SHARE` of the window: compacting to
        just under the target would call for another summary a turn later.
        """
        room = self.room(system, head, share=share)
        return min(room // 2, int(KEEP_SHARE * self.window / self.correction))

    def window_use(self, system: BaseMessage) -> WindowUse:
        """What `system` and the tool schemas take of the window."""
        return WindowUse(
            window=self.window,
            system=message_tokens(system),
            tools=self.tool_tokens,
            tool_count=len(self._tools),
            from_profile=self.window_from_profile,
        )

    def _tell(self, request: ModelCall) -> bool:
        """Tell the person, once a session, when the system prompt and tools crowd the window."""
        use = self.window_use(request.system_message)
        if not use.crowded(correction=self.correction) or request.state.get("window_noted"):
            return False
        if not self._told.first_time(request.run.session_id or ""):
            return False
        emit_status(Stage.COMPACTED, use.line(agent_path=request.run.agent_path))
        return True

    def _corrected(self, answer: ModelAnswer, estimate: int) -> ModelAnswer:
        """Learn from the input tokens the server reported how far off the estimate was."""
        usage = answer.reply.message.usage_metadata if answer.reply is not None else None
        reported = usage.get("input_tokens", 0) if usage else 0
        if reported > 0 and estimate > 0:
            # Only ever counted higher than the estimate: it errs high on purpose.
            self.correction = min(MAX_CORRECTION, max(1.0, reported / estimate))
        return answer


def _with(answer: ModelAnswer, update: dict[str, object]) -> ModelAnswer:
    return answer.override(update={**answer.update, **update}) if update else answer


async def compact(
    middleware: CompactionMiddleware,
    *,
    system: BaseMessage,
    turn: str,
    head: Sequence[BaseMessage],
    messages: Sequence[BaseMessage],
    summary: Summary | None,
    focus: str = "",
    shares: Sequence[float] = (),
    run: RunContext | None = None,
    task: CallTask | None = None,
) -> tuple[Summary | None, list[BaseMessage], Compacted | None]:
    """The summary, the messages kept verbatim, and what was done (None: nothing to do).

    With `shares` (see `CompactionMiddleware.shares`) only when the prompt can
    be brought under the first it can; without (a person's `/compact`) the
    older messages are summarised whenever there are some. A summary no
    shorter than what it would replace is dropped: the summary and messages
    stay as they were (and `Compacted.gained` is False).
    `turn` is the id of the message that began the turn (kept with the summary). The
    summary call is checked against the budgets of `run` and counted on its meter.
    """
    window = middleware.window
    limit = max(1, int(window * MESSAGE_SHARE)) * CHARS_PER_TOKEN
    cut = [_cut(message, limit) for message in messages]
    older, kept = _selected(middleware, system, head, cut, shares=shares)
    if not older:
        return summary, cut, None
    if not shares and prompt_tokens(older) <= _framing(summary):  # no summary call: it cannot gain
        return summary, cut, Compacted(len(older), 0)
    before = _shown(summary, messages)
    upto = older[-1].id or ""
    try:
        prompt = summary_request(
            older,
            previous=summary["text"] if summary else "",
            focus=focus,
            max_chars=int(window * middleware.threshold * (1 - SUMMARY_SHARE)) * CHARS_PER_TOKEN,
        )
        text = await _summary_call(middleware, prompt, run=run, task=task)
    except GraphBubbleUp:
        raise
    except Exception as error:  # noqa: BLE001 - a failed summary never costs the turn
        logger.warning("compaction: summary failed: %s: %s", type(error).__name__, error)
        previous = summary["text"] if summary else ""
        saved = max(0, before - _shown(_written(previous, upto, turn), kept))
        done = Compacted(len(older), saved, failed=True)
        return _written(previous, upto, turn, saved=saved, failed=True), kept, done
    text = text[: middleware.summary_chars]
    saved = before - _shown(_written(text, upto, turn), kept)
    if saved <= 0:
        return summary, cut, Compacted(len(older), 0)
    done = Compacted(len(older), saved)
    return _written(text, upto, turn, saved=saved), kept, done


def _selected(
    middleware: CompactionMiddleware,
    system: BaseMessage,
    head: Sequence[BaseMessage],
    messages: list[BaseMessage],
    *,
    shares: Sequence[float],
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """(older, kept): the messages to summarise (none: compaction cannot help) and those kept.

    Under the first of `shares` the last messages and a summary can be
    brought; none of them: nothing. Without `shares`, a person's `/compact`.
    """
    if not shares:
        return _split(messages, budget=middleware.budget(system, head), force=True)
    for share in shares:
        older, kept = _split(messages, budget=middleware.budget(system, head, share=share), force=False)
        if older and prompt_tokens(kept) <= middleware.room(system, head, share=share):
            return older, kept
    return [], messages


def _shown(summary: Summary | None, kept: Sequence[BaseMessage]) -> int:
    """Tokens the summary and the messages after it take of the prompt."""
    return prompt_tokens(_summary_messages(summary)) + prompt_tokens(kept)


def _framing(summary: Summary | None) -> int:
    """Tokens a summary takes before it says anything; less to fold in cannot gain."""
    return 0 if summary and summary["text"] else prompt_tokens([SystemMessage(SUMMARY_HEADER)])


def _written(text: str, upto: str, turn: str, *, saved: int = 0, failed: bool = False) -> Summary:
    return Summary(text=text, upto=upto, turn=turn, saved=saved, failed=failed)


async def _summary_call(
    middleware: CompactionMiddleware,
    prompt: list[BaseMessage],
    *,
    run: RunContext | None,
    task: CallTask | None,
) -> str:
    """The summary the model writes for `prompt`, counted like any model call.

    Raises BudgetExceededError, without calling the model, when a budget of
    `run` would be passed.
    """
    if run is not None and run.usage is not None:
        stop = run.usage.before_model(least_cost(run, middleware.identity, prompt))
        if stop is not None:
            raise BudgetExceededError(stop.message)
    started = time.monotonic()
    # Not streamed: the summary is not the answer. Past its time it fails as a summary does.
    async with asyncio.timeout(middleware.timeout_seconds):
        reply = await middleware.model.ainvoke(prompt, config={"callbacks": [], "tags": ["nostream"]})
    if run is not None:
        seconds = time.monotonic() - started
        await count_model_call(run, middleware.identity, reply, sent=prompt, seconds=seconds, task=task)
    return reply.text.strip()


def summary_request(
    messages: Sequence[BaseMessage],
    *,
    previous: str = "",
    focus: str = "",
    max_chars: int = 100_000,
) -> list[BaseMessage]:
    """The request for a summary of `previous` (an earlier summary) and `messages`.

    The request itself must fit the window: past `max_chars` the oldest
    messages are left out of it (the earlier summary never is).
    """
    lines = [f"{_speaker(m)}: {m.text}"[:MESSAGE_LINE_CHARS] for m in messages if m.text]
    room = max_chars - len(previous)
    shown: list[str] = []
    for line in reversed(lines):
        room -= len(line) + 1
        if room < 0:
            break
        shown.append(line)
    shown.reverse()
    if previous:
        shown.insert(0, f"Earlier summary: {previous}")
    instruction = SUMMARY_PROMPT + (f" Focus on: {focus}." if focus else "")
    return [SystemMessage(instruction), HumanMessage("\n".join(shown))]


def _speaker(message: BaseMessage) -> str:
    if isinstance(message, ToolMessage):
        return f"tool result ({message.name or message.tool_call_id})"
    if isinstance(message, AIMessage):
        calls = ", ".join(call["name"] for call in message.tool_calls)
        return f"assistant (calls {calls})" if calls else "assistant"
    return "person" if isinstance(message, HumanMessage) else message.type


def _leading_system(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """Context messages before the conversation (RAG's), and the conversation."""
    start = 0
    while start < len(messages) and isinstance(messages[start], SystemMessage):
        start += 1
    return list(messages[:start]), list(messages[start:])


def _after(messages: list[BaseMessage], summary: Summary | None) -> list[BaseMessage]:
    """The messages the summary does not cover (all of them when its last one is gone)."""
    return after_summary(messages, summary["upto"]) if summary else messages


def summarised(messages: Sequence[BaseMessage], summary: Summary | None) -> list[BaseMessage]:
    """The messages of a conversation that `summary` stands for (the model no longer sees them)."""
    rest = _after(list(messages), summary)
    return list(messages[: len(messages) - len(rest)])


def _summary_messages(summary: Summary | None) -> list[BaseMessage]:
    if not summary or not summary["text"]:
        return []
    return [SystemMessage(SUMMARY_HEADER + summary["text"])]


def _cut(message: BaseMessage, limit: int) -> BaseMessage:
    """`message`, its text cut to `limit` characters with a marker when longer."""
    if not isinstance(message.content, str) or len(message.content) <= limit:
        return message
    keep = max(0, limit - len(CUT_MARKER))
    return message.model_copy(update={"content": message.content[:keep] + CUT_MARKER})


def _units(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """The messages in groups that never part: a model message and the results of its calls."""
    units: list[list[BaseMessage]] = []
    for message in messages:
        if isinstance(message, ToolMessage) and units and _calls(units[-1][0]):
            units[-1].append(message)
        else:
            units.append([message])
    return units


def _calls(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and bool(message.tool_calls)


def _split(
    messages: Sequence[BaseMessage], *, budget: int, force: bool
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """(older, kept): the last whole groups that fit in `budget` (always the last), the rest before.

    With `force` (a person's `/compact`) at most half the budget is kept.
    """
    units = _units(messages)
    limit = budget // 2 if force else budget
    kept_units = 0
    used = 0
    for unit in reversed(units):
        tokens = prompt_tokens(unit)
        if kept_units and used + tokens > limit:
            break
        used += tokens
        kept_units += 1
    if force and kept_units == len(units) and len(units) > 1:
        kept_units -= 1
    older = [m for unit in units[: len(units) - kept_units] for m in unit]
    kept = [m for unit in units[len(units) - kept_units :] for m in unit]
    return older, kept


def latest_within(messages: Sequence[BaseMessage], *, budget: int) -> list[BaseMessage]:
    """The last messages that take at most `budget` tokens, whole groups as compaction keeps
    them; at least the last one, cut with the marker when it alone would not fit."""
    _, kept = _split(messages, budget=budget, force=False)
    if len(kept) == 1 and prompt_tokens(kept) > budget:
        kept = [_cut(kept[0], max(1, budget) * CHARS_PER_TOKEN)]
    return kept


@dataclass(frozen=True, slots=True)
class ContextUse:
    """How the next call's prompt would use the window, in tokens (what `/context` shows)."""

    window: int
    system: int
    tools: int
    summary: int
    messages: int

    @property
    def used(self) -> int:
        """Tokens the prompt takes in all."""
        return self.system + self.tools + self.summary + self.messages


def context_use(
    middleware: CompactionMiddleware,
    *,
    system: BaseMessage,
    messages: list[BaseMessage],
    summary: Summary | None,
) -> ContextUse:
    """What the prompt of a call on `messages` (a state's) would take of the window."""
    return ContextUse(
        window=middleware.window,
        system=message_tokens(system),
        tools=middleware.tool_tokens,
        summary=prompt_tokens(_summary_messages(summary)),
        messages=prompt_tokens(_after(messages, summary)),
    )


async def compact_now(
    middleware: CompactionMiddleware,
    *,
    system: BaseMessage,
    messages: list[BaseMessage],
    summary: Summary | None,
    focus: str = "",
    run: RunContext | None = None,
) -> tuple[Summary | None, Compacted | None]:
    """A person's `/compact [focus]`: the new summary, and what was done.

    No summary when there was nothing to summarise (no `Compacted` either), or
    when a summary would not have been shorter than what it replaced (its
    `Compacted` says so): the conversation stays as it was.
    """
    new, _, done = await compact(
        middleware,
        system=system,
        turn=turn_start(messages) or "",
        head=(),
        messages=_after(messages, summary),
        summary=summary,
        focus=focus,
        run=run,
    )
    return (new, done) if done is not None and done.gained else (None, done)
