"""The chat loop: user lines become turns, slash commands act on the session."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from rich.console import Console
from rich.markup import escape

from orchestrator.cli.background_results import show_background_results
from orchestrator.cli.chat_loop import ChatLoop
from orchestrator.cli.cost import cost_table
from orchestrator.cli.terminal_turn import (
    data_dir_gone,
    failure_line,
    recover_from,
    rendered_answer,
    rendered_turn,
)
from orchestrator.conversation.job_board import BackgroundJob
from orchestrator.conversation.session import PendingQuestion, Session, TurnResult
from orchestrator.graph.planning.plan_tool import PLAN_DESCRIPTION
from orchestrator.notes import FROM_ORCHESTRATOR, is_note
from orchestrator.plans import PLAN_TOOL
from orchestrator.runtime import Orchestrator
from orchestrator.sources.loaded import LoadedTool
from orchestrator.terminal.answers import show_questions
from orchestrator.terminal.checklist import checklist
from orchestrator.terminal.invocation import command_name
from orchestrator.terminal.lines import LineSource
from orchestrator.terminal.questions import AnswerChannel, QuestionAsker, answer_until_done
from orchestrator.terminal.render import shown_name
from orchestrator.terminal.signals import Interrupts
from orchestrator.terminal.text import display_path, shown
from orchestrator.tools.hitl import Decision

HELP = """\
[bold]/help[/bold]       this list
[bold]/tools[/bold]      the tools the assistant can call
[bold]/history[/bold]    this session's messages
[bold]/jobs[/bold]       background jobs of this session, running and finished (also /tasks)
[bold]/cancel ID[/bold]  cancel a running background job (the start of its id will do)
[bold]/pending[/bold]    the questions this session's turn waits on
[bold]/plan[/bold]       this session's last plan, task by task
[bold]/requests[/bold]   this session's tool calls: ids, status and how long each took
[bold]/trace[/bold]      the last turn as a timeline: each model and tool call a bar
[bold]/cost[/bold]       this session's tokens by model, cost and time
[bold]/context[/bold]    how much of the model's context window the conversation takes
[bold]/compact[/bold] \\[focus]  summarise older messages for the model now (all are kept)
[bold]/exit[/bold]       end the session (also /quit, Ctrl-D, or Ctrl-C twice)
Anything else is a message to the assistant. Ctrl-C cancels a running turn.
A question the assistant asks takes one line: y approves, n \\[reason] rejects,
e edits (new arguments as JSON on the next line); an ask_human question takes
your answer. Ctrl-C at a question rejects it."""
COMMANDS = (
    "/help", "/tools", "/history", "/jobs", "/cancel", "/pending", "/plan", "/requests", "/trace",
    "/cost", "/context", "/compact", "/exit",
    "/quit",
)  # `/tasks`, the old name of /jobs, still works but is not offered
# The database's clock and this process's may differ a little: the turn's window is widened.
TRACE_SLACK = timedelta(seconds=1)
UNKNOWN_COMMAND = "Unknown command {command}; /help lists the commands."
PREVIEW_CHARS = 200


class ChatRepl(ChatLoop):
    """Reads lines until end of input or /exit; returns the exit code (1 if a turn failed).

    A turn that asks questions has them answered (by `asker`; by default with
    the next lines of `lines`) before the next line is read as a message.

    After each answer a dim line gives the turn's tokens and cost when its
    price is known: on `out` when it is a terminal, else on `err`, so that
    piped output stays the answers alone.
    """

    def __init__(
        self,
        *,
        runtime: Orchestrator,
        session: Session,
        lines: LineSource,
        interrupts: Interrupts,
        out: Console,
        err: Console,
        asker: QuestionAsker | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(lines=lines, interrupts=interrupts, out=out, err=err, clock=clock)
        self.runtime = runtime
        self.session = session
        # By default questions are answered with the next lines of the chat's input.
        channel = AnswerChannel(lines=lines, console=err, echo=True)
        self.asker = asker or QuestionAsker(lambda: channel, interrupts=interrupts)
        self._questions_left = False  # a follow-up turn paused on questions meanwhile
        show_background_results(runtime, session, out=out, err=err, costs=self.costs)
        reported = session.on_follow_up

        def follow_up(task: BackgroundJob, result: TurnResult | None) -> None:
            if reported is not None:
                reported(task, result)
            self._questions_left = self._questions_left or bool(result and result.questions)

        session.on_follow_up = follow_up

    async def run(self, questions: list[PendingQuestion] | None = None) -> int:
        """The chat; `questions` the session's turn waits on are answered first."""
        self.err.print(
            f"[dim]session {self.session.session_id} · user {escape(self.session.user_id)}"
            " · /help for commands[/dim]"
        )
        if questions:
            await self.answer(questions)
        await self.read_lines()
        # Ended: the questions' line said it; its data directory gone: the error line said it.
        if self.session.storage is not None and not self._ended and not data_dir_gone(self.session):
            session_id = self.session.session_id
            again = f"{command_name()} chat --session {session_id}"
            self.err.print(f"[dim]session {session_id} kept · {escape(again)}[/dim]", highlight=False)
        return 1 if self.failed_turns else 0

    async def turn(self, text: str) -> None:
        """One turn, and the questions it asks; Ctrl-C cancels it and the chat goes on."""
        if self._questions_left:
            self._questions_left = False
            left = await self.session.pending()
            if left:
                await self.answer(left)
                if self._ended:
                    return
        result = await self._run(rendered_turn(self.session, text, out=self.out, err=self.err))
        if result is not None and result.questions:
            await self.answer(result.questions)

    async def answer(self, questions: list[PendingQuestion]) -> None:
        """Ask `questions`, resume the turn once with the answers; again while new ones come.

        At end of input they are left open (the chat ends): `chat --session`
        asks them again.
        """

        def resume(decisions: dict[str, Decision]) -> Awaitable[TurnResult | None]:
            return self._run(rendered_answer(self.session, decisions, out=self.out, err=self.err))

        _, self._ended = await answer_until_done(
            questions,
            asker=self.asker,
            resume=resume,
            session_id=self.session.session_id,
            reject_at_end=False,
        )

    def stops_after_turn(self) -> bool:
        return data_dir_gone(self.session) is not None  # said by the turn's error line: every turn would fail

    async def command(self, line: str) -> bool:
        """Run a slash command; False ends the session."""
        command = line.split()[0].lower()
        if command in ("/exit", "/quit"):
            return False
        if command == "/help":
            self.out.print(HELP)
        elif command == "/tools":
            self.show_tools()
        elif command == "/history":
            await self.show_history()
        elif command in ("/jobs", "/tasks"):  # /tasks: its old name
            await self.show_jobs()
        elif command == "/cancel":
            await self.cancel(line.split()[1:])
        elif command == "/pending":
            await self.show_pending()
        elif command == "/plan":
            await self.show_plan()
        elif command == "/requests":
            await self.show_requests()
        elif command == "/trace":
            await self.show_trace()
        elif command == "/cost":
            self.out.print(cost_table(self.session.usage), highlight=False)
        elif command in ("/context", "/compact"):
            await self.context_command(command, line.partition(" ")[2].strip())
        else:
            self.err.print(escape(UNKNOWN_COMMAND.format(command=command)))
        return True

    async def context_command(self, command: str, focus: str) -> None:
        """`/context` or `/compact [focus]`; a failure is one line, the chat goes on."""
        from orchestrator.cli.context_commands import compact_session, show_context

        try:
            if command == "/context":
                await show_context(self.runtime, self.session, self.out)
            else:
                await compact_session(self.runtime, self.session, focus, out=self.out)
        except Exception as error:  # the chat goes on (a summary call that failed, say)
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)

    async def show_history(self) -> None:
        try:
            history = await self.session.history()
        except Exception as error:  # the chat goes on (a database that is gone, say)
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
            await recover_from(error, self.session, err=self.err)
            return
        for message in history:
            self.out.print(describe_message(message), highlight=False)

    async def show_pending(self) -> None:
        """The questions the session's turn waits on."""
        try:
            questions = await self.session.pending()
        except Exception as error:  # the chat goes on
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
            return
        if not questions:
            self.out.print("No open questions.")
            return
        show_questions(questions, self.out)
        self.out.print("[dim]they are asked before your next message[/dim]")
        self._questions_left = True

    async def show_plan(self) -> None:
        """The session's last plan as a checklist."""
        try:
            plan = await self.session.plan()
        except Exception as error:  # the chat goes on
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
            return
        if plan is None:
            self.out.print("No plan in this session yet.")
            return
        for line in checklist(plan):
            self.out.print(line, highlight=False)

    async def show_jobs(self) -> None:
        """The session's background jobs, running and ended, wherever they run."""
        try:
            tasks = await self.runtime.jobs.jobs_of(self.session.session_id)
        except Exception as error:  # the chat goes on (a database that is gone, say)
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
            return
        if not tasks:
            self.out.print("No background jobs in this session.")
        for task in tasks:
            self.out.print(job_line(task), highlight=False)

    async def cancel(self, arguments: list[str]) -> None:
        """Cancel the job not ended whose id is, or starts with, the one given."""
        if len(arguments) != 1:
            self.err.print("usage: /cancel ID (/jobs lists the ids)")
            return
        given = arguments[0]
        try:
            tasks = await self.runtime.jobs.jobs_of(self.session.session_id)
            running = [t.job_id for t in tasks if t.status in LIVE and t.job_id.startswith(given)]
            if len(running) > 1 and given not in running:
                listed = ", ".join(running)
                self.err.print(f"{escape(given)} starts several running jobs' ids: {listed}")
                return
            task_id = given if given in running or not running else running[0]
            cancelled = await self.runtime.jobs.cancel_job(task_id)
        except Exception as error:  # the chat goes on
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
            return
        if cancelled:
            self.out.print(f"cancelling job {escape(task_id)}")
        else:
            self.err.print(f"No running job {escape(given)}; /jobs lists them.")

    async def show_requests(self) -> None:
        """The session's tool calls: request id, name, status and how long each took."""
        from orchestrator.store.session_list import session_calls

        storage = self.session.storage
        if storage is None:
            self.out.print("No request log: this session is not stored.")
            return
        try:
            calls = await session_calls(
                storage.database, self.session.session_id, user_id=self.session.user_id
            )
        except Exception as error:  # the chat goes on
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
            return
        if not calls:
            self.out.print("No tool calls in this session yet.")
        for call in calls:
            took = "running" if call.seconds is None else f"{call.seconds:.2f}s"
            state = call.outcome or call.status
            self.out.print(
                f"{'  ' if call.nested else ''}{call.request_id}  {shown(call.name)}  {state}  {took}",
                highlight=False,
            )

    async def show_trace(self) -> None:
        """The last turn as a waterfall: its model and tool calls on one time axis."""
        from orchestrator.store.timeline import turn_timeline
        from orchestrator.terminal.waterfall import waterfall

        storage, last = self.session.storage, self.session.last_turn
        if storage is None:
            self.out.print("No request log: this session is not stored.")
            return
        if last is None:
            self.out.print("No turn yet in this chat.")
            return
        try:
            rows = await turn_timeline(
                storage.database,
                user_id=self.session.user_id,
                session_id=self.session.session_id,
                turn_id=last.turn_id,
                since=last.began - TRACE_SLACK,
                until=last.ended + TRACE_SLACK,
            )
        except Exception as error:  # the chat goes on
            self.err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
            return
        if not rows:
            self.out.print("The last turn made no model or tool call the log holds.")
        for row in waterfall(rows, columns=self.out.width):
            self.out.print(row, highlight=False)

    def show_tools(self) -> None:
        """The tools the model can call, then each sub-agent with the tree below it."""
        from_folders = {t.name for loaded in self.runtime.sub_agents for t in loaded.langchain}
        for tool in self.runtime.tools:
            if tool.name not in from_folders:
                self._print_tool(tool, depth=0)
        if self.runtime.settings.planning:  # the graph's own tool (see docs/planning.md)
            self.out.print(f"[bold]{PLAN_TOOL}[/bold]  {escape(PLAN_DESCRIPTION.split('. ')[0])}.")
        for loaded in self.runtime.sub_agents:
            self._print_sub_agent(loaded, depth=0)

    def _print_sub_agent(self, loaded: LoadedTool, *, depth: int) -> None:
        folder = loaded.folder
        self.out.print(
            f"{'  ' * depth}[bold cyan]{escape(folder.name)}[/bold cyan] {escape(folder.config.version)}"
            f"  [dim]{escape(display_path(folder.path))}[/dim]",
            highlight=False,
        )
        for tool in loaded.langchain:
            self._print_tool(tool, depth=depth + 1)
        for child in loaded.children:
            self._print_sub_agent(child, depth=depth + 1)

    def _print_tool(self, tool: BaseTool, *, depth: int) -> None:
        summary = tool.description.splitlines()[0] if tool.description else ""
        self.out.print(f"{'  ' * depth}[bold]{escape(tool.name)}[/bold]  {escape(summary)}")


LIVE = ("queued", "running")  # the states of a job that has not ended


def job_line(task: BackgroundJob) -> str:
    """One line of `/jobs`: id, tool, status, when, and where it runs (a worker's name)."""
    ended = f", ended {task.finished_at:%H:%M:%S}" if task.finished_at else ""
    where = f" on {shown(task.where)}" if task.where and task.status == "running" else ""
    waiting = f"\n  {escape(task.waiting)}" if task.waiting else ""
    return (
        f"{task.job_id}  {shown(task.tool)}  {task.status}{where}  "
        f"(started {task.started_at:%H:%M:%S}{ended}){waiting}"
    )


def describe_message(message: BaseMessage) -> str:
    """One line of /history for a message (rich markup; untrusted text escaped and cut)."""
    if is_note(message):
        return f"  [dim]{_preview(message.text.removeprefix(FROM_ORCHESTRATOR))}[/dim]"
    if isinstance(message, HumanMessage):
        return f"[bold]you[/bold]: {_preview(message.text)}"
    if isinstance(message, ToolMessage):
        return f"  [dim]{escape(shown_name(message.name or 'tool'))} → {_preview(message.text)}[/dim]"
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = ", ".join(f"{shown_name(c['name'])}({json.dumps(c['args'])})" for c in message.tool_calls)
        return f"[bold]assistant[/bold] calls {_preview(calls)}"
    return f"[bold]assistant[/bold]: {_preview(message.text)}"


def _preview(text: str) -> str:
    flat = " ".join(text[: PREVIEW_CHARS * 4].split())
    return shown(flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…")
