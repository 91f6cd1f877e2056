"""`chat --server URL`: the terminal chat as a client of `orchestrator serve`.

The same chat as against the local orchestrator: the answer streams, tool
progress and plans show live (the same renderer, fed the same events), Ctrl-C
cancels the run on the server and the chat goes on, questions are asked and
answered the same way, `/cost` adds up what the server said each turn used.
What needs the machine the orchestrator runs on (`/tools`, `/jobs`, `/trace`...)
says it is not available. Nothing of the orchestrator starts here: no
database, no folders, no model.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchestrator.cli.chat_loop import ChatLoop
from orchestrator.cli.common import err, out
from orchestrator.cli.cost import cost_table
from orchestrator.cli.server_client.connection import Server
from orchestrator.cli.server_client.run import (
    chosen_session,
    connect,
    pending,
    rendered,
    run_remote,
)
from orchestrator.conversation.turns import PendingQuestion, TurnResult
from orchestrator.errors import ServerConnectionError, UserError
from orchestrator.terminal.answers import show_questions
from orchestrator.terminal.invocation import command_name
from orchestrator.terminal.lines import LineSource
from orchestrator.terminal.questions import QuestionAsker, answer_until_done
from orchestrator.terminal.signals import Interrupts
from orchestrator.terminal.text import shown
from orchestrator.tools.hitl import Decision
from orchestrator.usage.meter import UsageMeter

if TYPE_CHECKING:
    from orchestrator.settings import Settings

HELP = """\
[bold]/help[/bold]       this list
[bold]/sessions[/bold]   your sessions on the server, latest first
[bold]/history[/bold]    this session's messages
[bold]/pending[/bold]    the questions this session's turn waits on
[bold]/cost[/bold]       the tokens and cost of this chat's turns
[bold]/exit[/bold]       end the chat (also /quit, Ctrl-D, or Ctrl-C twice)
Anything else is a message to the assistant. Ctrl-C cancels a running turn (on the server too).
A question the assistant asks takes one line: y approves, n \\[reason] rejects,
e edits (new arguments as JSON on the next line); an ask_human question takes
your answer. Ctrl-C at a question rejects it.
/tools, /jobs, /cancel, /plan, /requests, /trace, /context and /compact need the
machine the orchestrator runs on: they are not available with --server."""
COMMANDS = ("/help", "/sessions", "/history", "/pending", "/cost", "/exit", "/quit")
LOCAL_ONLY = (
    "/tools", "/jobs", "/tasks", "/cancel", "/plan", "/requests", "/trace", "/context", "/compact",
)
NOT_HERE = "{command} is not available with --server: it needs the machine the orchestrator runs on"
UNKNOWN_COMMAND = "Unknown command {command}; /help lists the commands."
SESSIONS_SHOWN = 20
NO_SESSIONS = "No sessions of yours on the server yet."


class RemoteChat(ChatLoop):
    """The chat loop against a server: lines become turns there, slash commands act here.

    The same prompt, output, questions and Ctrl-C as `ChatRepl`'s; returns the
    exit status (1 if a turn failed).
    """

    def __init__(
        self,
        *,
        server: Server,
        session_id: str,
        new: bool = False,
        lines: LineSource,
        asker: QuestionAsker,
        interrupts: Interrupts,
        out: Console,
        err: Console,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(
            lines=lines, interrupts=interrupts, out=out, err=err, clock=clock or asyncio.get_running_loop().time
        )
        self.server = server
        self.session_id = session_id
        self.new = new  # made for this chat: nothing to keep until a message is sent
        self._sent = False
        self.asker = asker
        self.usage = UsageMeter()  # what this chat's turns used, as the server said
        self._questions_left = False  # /pending showed questions: asked before the next message

    async def run(self, questions: list[PendingQuestion] | None = None) -> int:
        """The chat; `questions` the session's turn waits on are answered first."""
        self.err.print(
            f"[dim]session {escape(self.session_id)} · server {escape(self.server.url)}"
            " · /help for commands[/dim]"
        )
        if questions:
            await self.answer(questions)
        await self.read_lines()
        if self.new and not self._sent:  # an empty session is not kept, nor listed later
            await self.server.forget(self.session_id)
        elif not self._ended:
            again = f"{command_name()} chat {self.server.flags} --session {self.session_id}"
            self.err.print(f"[dim]session {escape(self.session_id)} kept · {escape(again)}[/dim]")
        return 1 if self.failed_turns else 0

    async def turn(self, text: str) -> None:
        """One turn, and the questions it asks; Ctrl-C cancels it and the chat goes on."""
        if self._questions_left:
            self._questions_left = False
            left = await self._pending()
            if left:
                await self.answer(left)
                if self._ended:
                    return
        self._sent = True
        result = await self._run(self._rendered(text=text))
        if result is not None and result.questions:
            await self.answer(result.questions)

    async def answer(self, questions: list[PendingQuestion]) -> None:
        """Ask `questions`, resume the turn with the answers; again while new ones come.

        At end of input they are left open (the chat ends), as in `chat`.
        """

        def resume(decisions: dict[str, Decision]) -> Awaitable[TurnResult | None]:
            return self._run(self._rendered(decisions=decisions))

        # The session is named in the line on questions left open: with the server, so that
        # the command it gives (`chat --session S --server URL`) asks them again.
        named = f"{self.session_id} {self.server.flags}"
        _, self._ended = await answer_until_done(
            questions, asker=self.asker, resume=resume, session_id=named, reject_at_end=False
        )

    def _rendered(
        self, *, text: str | None = None, decisions: Mapping[str, Decision] | None = None
    ) -> Coroutine[object, object, TurnResult | None]:
        return rendered(
            self.server, self.session_id, text=text, decisions=decisions, out=self.out, err=self.err
        )

    def counted(self, result: TurnResult) -> None:
        self.usage.session.merge(result.usage)

    async def command(self, line: str) -> bool:
        """Run a slash command; False ends the chat. A failure is one line, the chat goes on."""
        command = line.split()[0].lower()
        if command in ("/exit", "/quit"):
            return False
        try:
            await self._command(command)
        except UserError as error:
            self.err.print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
        return True

    async def _command(self, command: str) -> None:
        if command == "/help":
            self.out.print(HELP)
        elif command == "/cost":
            self.out.print(cost_table(self.usage), highlight=False)
        elif command == "/sessions":
            await self.show_sessions()
        elif command == "/history":
            await self.show_history()
        elif command == "/pending":
            await self.show_pending()
        elif command in LOCAL_ONLY:
            self.err.print(NOT_HERE.format(command=command), markup=False, highlight=False)
        else:
            self.err.print(escape(UNKNOWN_COMMAND.format(command=command)))

    async def show_sessions(self) -> None:
        """The person's sessions on the server, latest first."""
        found = await self.server.sessions(limit=SESSIONS_SHOWN)
        if not found:
            self.out.print(NO_SESSIONS)
            return
        table = Table(box=None, pad_edge=False)
        for heading in ("session", "started", "last changed"):
            table.add_column(heading, no_wrap=True)
        for thread in found:
            mark = " (this one)" if thread["thread_id"] == self.session_id else ""
            row = (thread["thread_id"] + mark, _when(thread["created_at"]), _when(thread["updated_at"]))
            table.add_row(*(Text(shown(cell)) for cell in row))
        self.out.print(table, highlight=False)

    async def show_history(self) -> None:
        """The session's messages, one line each, as `/history` shows them."""
        from langchain_core.messages import convert_to_messages

        from orchestrator.cli.repl import describe_message

        messages = await self.server.messages(self.session_id)
        try:
            converted = convert_to_messages(messages)  # pyright: ignore[reportArgumentType]  # message dicts
        except (ValueError, TypeError, KeyError) as error:
            raise ServerConnectionError(f"the server sent messages this chat cannot read ({error})") from None
        if not converted:
            self.out.print("No messages in this session yet.")
        for message in converted:
            self.out.print(describe_message(message), highlight=False)

    async def show_pending(self) -> None:
        """The questions the session's turn waits on; they are asked before the next message."""
        questions = await self._pending()
        if not questions:
            self.out.print("No open questions.")
            return
        show_questions(questions, self.out)
        self.out.print("[dim]they are asked before your next message[/dim]")
        self._questions_left = True

    async def _pending(self) -> list[PendingQuestion]:
        return await pending(self.server, self.session_id)


def _when(moment: object) -> str:
    """An ISO 8601 time from the server, as the local time `sessions list` shows."""
    if isinstance(moment, datetime):
        return moment.astimezone().strftime("%Y-%m-%d %H:%M")
    try:
        return datetime.fromisoformat(str(moment)).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return "-"


def on_terminal() -> bool:
    """Whether the chat's lines come from the terminal's line editor."""
    return sys.stdin.isatty() and out.is_terminal


def chat_on_server(url: str, *, session_id: str | None, latest: bool, agent: str | None = None) -> int:
    """`chat --server URL [--agent NAME]`: the chat against that server; the exit status."""
    from orchestrator.terminal.lines import PipedLines, TerminalLines
    from orchestrator.terminal.questions import question_asker

    async def run(settings: Settings, interrupts: Interrupts) -> int:
        server = connect(settings, url, agent=agent)
        try:
            if agent is not None:
                await server.check_assistant()
                err.print(f"Chatting with the agent {escape(agent)} alone.", highlight=False)
            chosen, new = await chosen_session(server, session_id=session_id, latest=latest)
            # A session gone on with may wait for answers; a new one waits for nothing.
            waiting = await pending(server, chosen) if session_id or latest else []
            terminal = on_terminal()
            history = settings.data_dir / "chat_history"  # the local chat's too (chat.HISTORY_FILE)
            lines = TerminalLines(history=history, commands=COMMANDS) if terminal else PipedLines()
            with question_asker(interrupts=interrupts, err=err, lines=lines, on_terminal=terminal) as asker:
                chat = RemoteChat(
                    server=server, session_id=chosen, new=new, lines=lines, asker=asker,
                    interrupts=interrupts, out=out, err=err,
                )
                if waiting:
                    err.print(f"[dim]session {escape(chosen)} waits for your answer to {len(waiting)} question(s)[/dim]")
                return await chat.run(waiting)
        finally:
            await server.close()

    return run_remote(run)
