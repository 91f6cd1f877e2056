"""`orchestrator chat` and `orchestrator ask`: a conversation, or one turn (see `startup`)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import (
    JsonOption,
    NoCacheOption,
    UserOption,
    cache_overrides,
    err,
    identifier,
    out,
    user_errors,
)
from orchestrator.cli.json_out import stdout_to_stderr
from orchestrator.cli.startup import JobOptions, Startup, run_command
from orchestrator.errors import UserError
from orchestrator.terminal.signals import Interrupts

if TYPE_CHECKING:
    from orchestrator.conversation.job_board import BackgroundJob
    from orchestrator.conversation.session import PendingQuestion, Session, TurnResult
    from orchestrator.runtime import Orchestrator
    from orchestrator.terminal.lines import LineSource
    from orchestrator.terminal.questions import QuestionAsker
    from orchestrator.tools.hitl import Decision

SessionOption = Annotated[
    str | None,
    typer.Option("--session", "-s", help="Continue this session id (default: new).", callback=identifier),
]
ContinueOption = Annotated[
    bool, typer.Option("--continue", "-c", help="Go on with your latest session.")
]
ResumeOption = Annotated[
    bool, typer.Option("--resume", "-r", help="Choose one of your recent sessions to go on with.")
]
AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        "-a",
        help="Chat with this approved agent folder alone: its tools, model and instructions.",
    ),
]
ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="Talk to the `orchestrator serve` at this URL (key: ORCHESTRATOR_API_KEY) "
        "instead of running the orchestrator here.",
    ),
]
HISTORY_FILE = "chat_history"
ONE_SESSION = "give one of --session, --continue and --resume"
NOT_WITH_SERVER = "{flag} cannot go with --server: {why}"
WHO_YOU_ARE = "the server knows who you are from your API key"
LOCAL_ONLY = "it needs the orchestrator running on this machine"


def chat(
    context: typer.Context,
    user: UserOption = "local",
    session: SessionOption = None,
    latest: ContinueOption = False,
    pick: ResumeOption = False,
    agent: AgentOption = None,
    no_cache: NoCacheOption = False,
    server: ServerOption = None,
) -> None:
    """Chat with the assistant; lines may be piped in, end of input ends the session."""
    if sum((session is not None, latest, pick)) > 1:
        raise typer.BadParameter(ONE_SESSION)
    if server is not None:
        from orchestrator.cli.server_client.chat import chat_on_server

        _local_only_flags(context, resume=pick, no_cache=no_cache)
        raise typer.Exit(chat_on_server(server, session_id=session, latest=latest, agent=agent))

    async def run(startup: Startup, runtime: Orchestrator) -> int:
        from orchestrator.cli.repl import ChatRepl
        from orchestrator.cli.session_commands import chosen_session
        from orchestrator.cli.terminal_turn import resume_turn
        from orchestrator.terminal.questions import question_asker

        if agent is not None:
            runtime = runtime.for_agent(agent)
            err.print(f"Chatting with the agent {escape(agent)} alone.", highlight=False)
        lines, on_terminal = _line_source(startup)
        chosen = await chosen_session(
            runtime, user, session_id=session, latest=latest, pick=pick, lines=lines
        )
        conversation = _open_session(runtime, user, chosen)
        with question_asker(
            interrupts=startup.interrupts, err=err, lines=lines, on_terminal=on_terminal
        ) as asker:
            repl = ChatRepl(
                runtime=runtime,
                session=conversation,
                lines=lines,
                asker=asker,
                interrupts=startup.interrupts,
                out=out,
                err=err,
            )
            await _recover(runtime, user)
            questions = await resume_turn(conversation, out=out, err=err)
            if questions is None:
                return 1
            if not questions:
                await _while_away(runtime, conversation)
            return await repl.run(questions)

    raise typer.Exit(
        run_command(
            run, messages_on_stdin=True, jobs=JobOptions(), overrides=cache_overrides(no_cache)
        )
    )


AnswersOption = Annotated[
    bool,
    typer.Option(
        "--answers-from-stdin",
        help="Standard input holds the answers to questions, one a line, not message text.",
    ),
]
NoWaitOption = Annotated[
    bool,
    typer.Option(
        "--no-wait",
        help="Return once answered: background jobs go on in a worker and report into the "
        "session when it is next opened.",
    ),
]


def ask(
    context: typer.Context,
    text: Annotated[
        str, typer.Argument(help="The message to send ('-': standard input alone).")
    ],
    user: UserOption = "local",
    session: SessionOption = None,
    as_json: JsonOption = False,
    answers_from_stdin: AnswersOption = False,
    no_wait: NoWaitOption = False,
    no_cache: NoCacheOption = False,
    server: ServerOption = None,
) -> None:
    """Send one message and print the answer (--json: answer, tool_calls, questions, iterations).

    Piped standard input is sent too, before the message. Questions the turn
    asks are asked on the terminal; with none, they are rejected, or, with
    --answers-from-stdin, answered from standard input, one line each. A
    budget that stops the turn makes the exit status 3. Background jobs the
    turn starts are waited for, and reported, unless --no-wait.
    """
    from orchestrator.cli.ask_input import message_to_send

    if server is not None:
        _local_only_flags(context, no_cache=no_cache)
    with user_errors():
        text = message_to_send(text, answers_from_stdin=answers_from_stdin)
    if server is not None:
        from orchestrator.cli.server_client.ask import ask_on_server

        raise typer.Exit(ask_on_server(server, text, session_id=session, as_json=as_json))

    async def run(startup: Startup, runtime: Orchestrator) -> int:
        from orchestrator.cli.session_commands import chosen_session
        from orchestrator.terminal.questions import question_asker

        chosen = await chosen_session(
            runtime, user, session_id=session, latest=False, pick=False, lines=None
        )
        conversation = _open_session(runtime, user, chosen)
        with question_asker(interrupts=startup.interrupts, err=err) as asker:
            if as_json:
                return await _ask_json(
                    runtime, conversation, text, startup.interrupts, asker, wait=not no_wait
                )
            return await _ask(runtime, conversation, text, asker, wait=not no_wait)

    # --no-wait: this process takes no job, and hands what outlives its budget to a worker.
    jobs = JobOptions(takes_jobs=False, hand_over=True) if no_wait else JobOptions()
    # What it stores is embedded after it, by a process of its own: its exit waits for no model.
    raise typer.Exit(
        run_command(run, jobs=jobs, embeds_here=False, overrides=cache_overrides(no_cache))
    )


def _local_only_flags(context: typer.Context, *, resume: bool = False, no_cache: bool = False) -> None:
    """With --server, a flag for what only runs here is a one-line error (the first one given)."""
    source = context.get_parameter_source("user")
    named = source is not None and source.name != "DEFAULT"
    for flag, given in (("--user", named), ("--resume", resume), ("--no-cache", no_cache)):
        if given:
            why = WHO_YOU_ARE if flag == "--user" else LOCAL_ONLY
            with user_errors():
                raise UserError(NOT_WITH_SERVER.format(flag=flag, why=why))


async def _ask(
    runtime: Orchestrator, session: Session, text: str, asker: QuestionAsker, *, wait: bool = True
) -> int:
    from orchestrator.cli.ask_input import exit_status
    from orchestrator.cli.background_results import show_background_results
    from orchestrator.cli.cost import show_turn_cost
    from orchestrator.cli.terminal_turn import rendered_turn, resume_turn

    # Each turn's cost line goes to stderr: standard output is the answers alone.
    show_background_results(runtime, session, out=out, err=err, costs=err)
    await _recover(runtime, session.user_id)
    waiting = await resume_turn(session, out=out, err=err)
    if waiting is None:
        return 1
    if waiting and await _rendered_answers(session, waiting, asker) is None:
        return 1
    await _while_away(runtime, session)
    result = await rendered_turn(session, text, out=out, err=err)
    if result is not None and result.questions:
        result = await _rendered_answers(session, result.questions, asker)
    show_turn_cost(result, err)
    if not wait:
        return exit_status(result)
    await _wait_for_jobs(runtime, session)
    left = await session.pending()  # a background job's follow-up turn may ask too
    if left and await _rendered_answers(session, left, asker) is None:
        return 1
    return exit_status(result)


async def _rendered_answers(
    session: Session, questions: list[PendingQuestion], asker: QuestionAsker
) -> TurnResult | None:
    """Answer `questions` (end of input rejects), resuming with live output; None on failure."""
    from orchestrator.cli.terminal_turn import rendered_answer
    from orchestrator.terminal.questions import answer_until_done

    def resume(decisions: dict[str, Decision]) -> Awaitable[TurnResult | None]:
        return rendered_answer(session, decisions, out=out, err=err)

    result, _ = await answer_until_done(
        questions, asker=asker, resume=resume, session_id=session.session_id, reject_at_end=True
    )
    return result


async def _ask_json(
    runtime: Orchestrator,
    session: Session,
    text: str,
    interrupts: Interrupts,
    asker: QuestionAsker,
    *,
    wait: bool = True,
) -> int:
    # Standard output is the JSON object's alone: what a tool prints goes to stderr.
    with stdout_to_stderr() as print_json:
        return await _json_turn(runtime, session, text, interrupts, asker, print_json, wait=wait)


async def _json_turn(
    runtime: Orchestrator,
    session: Session,
    text: str,
    interrupts: Interrupts,
    asker: QuestionAsker,
    print_json: Callable[[dict[str, object]], None],
    *,
    wait: bool = True,
) -> int:
    from orchestrator.cli.ask_input import exit_status, turn_json
    from orchestrator.cli.terminal_turn import failure_line

    follow_ups: list[dict[str, object]] = []

    def collect(task: BackgroundJob, result: TurnResult | None) -> None:
        entry = {"job_id": task.job_id, "tool": task.tool, "status": task.status}
        follow_ups.append({**entry, **(result.to_json() if result else {"answer": None})})

    session.on_follow_up = collect
    body: dict[str, object] = {"session_id": session.session_id, "user_id": session.user_id}
    try:
        await _recover(runtime, session.user_id)
        if await session.open():
            await session.resume()  # an interrupted turn is finished first, quietly
        await _quiet_answers(session, await session.pending(), asker)  # so is a waiting one
        await _while_away(runtime, session)
        result = await session.run(text)
        result = await _quiet_answers(session, result.questions, asker) or result
        if wait:
            await _wait_for_jobs(runtime, session)
            await _quiet_answers(session, await session.pending(), asker)
    except asyncio.CancelledError:
        name = interrupts.received.name if interrupts.received else "cancelled"
        stopped = turn_json(None, session=session, error=f"interrupted ({name})")
        print_json({**stopped, "follow_ups": follow_ups, **body})
        raise
    except Exception as error:
        line = failure_line(error)
        err.print(f"error: {line}", markup=False, highlight=False)
        print_json({**turn_json(None, session=session, error=line), "follow_ups": follow_ups, **body})
        return 1
    print_json({**turn_json(result, session=session), "follow_ups": follow_ups, **body})
    return exit_status(result)


async def _quiet_answers(
    session: Session, questions: list[PendingQuestion], asker: QuestionAsker
) -> TurnResult | None:
    """Answer `questions` (end of input rejects), resuming without live output; the turn's end."""
    from orchestrator.terminal.questions import answer_until_done

    async def resume(decisions: dict[str, Decision]) -> TurnResult:
        return await session.answer(decisions)

    result, _ = await answer_until_done(
        questions, asker=asker, resume=resume, session_id=session.session_id, reject_at_end=True
    )
    return result


def _open_session(runtime: Orchestrator, user_id: str, session_id: str | None) -> Session:
    conversation = runtime.session(user_id=user_id, session_id=session_id)
    conversation.on_busy = lambda: err.print(
        f"[dim]session {escape(conversation.session_id)} is running a turn in another process: "
        "waiting for it to end (Ctrl-C stops)[/dim]"
    )
    return conversation


async def _recover(runtime: Orchestrator, user_id: str) -> None:
    """Tell the user what became of the calls a stopped process left running."""
    from orchestrator.conversation.recovery import recover

    for item in await recover(runtime, user_id=user_id):
        what = "running it again" if item.outcome == "requeued" else "marked failed"
        err.print(
            f"[yellow]note:[/yellow] {escape(item.call.call_name)} ({item.call.request_id}) "
            f"was left running by a stopped process: {what}",
            highlight=False,
        )


async def _wait_for_jobs(runtime: Orchestrator, session: Session) -> None:
    """`ask` is one exchange: it waits for the background jobs it started, and their reports."""
    waiting = runtime.jobs.waiting(session.session_id)
    if waiting:
        err.print(f"[dim]waiting for {waiting} background job(s); Ctrl-C stops[/dim]")
        await runtime.jobs.drain(session.session_id)


async def _while_away(runtime: Orchestrator, session: Session) -> None:
    """Report what background jobs of the session ended while no one had it open."""
    ended = await runtime.jobs.catch_up(session.session_id)
    if not ended:
        return
    err.print("[dim]while you were away:[/dim]")
    for task in ended:
        err.print(f"  [dim]job {task.job_id} ({escape(task.tool)}): {task.status}[/dim]", highlight=False)
    for task in ended:
        await session.deliver(task)  # its follow-up turn, printed as any follow-up is


def _line_source(startup: Startup) -> tuple[LineSource, bool]:
    """Where chat lines come from, and whether that is the terminal's line editor."""
    from orchestrator.cli.repl import COMMANDS
    from orchestrator.terminal.lines import PipedLines, TerminalLines

    if sys.stdin.isatty() and out.is_terminal:
        history = startup.settings.data_dir / HISTORY_FILE
        return TerminalLines(history=history, commands=COMMANDS), True
    return PipedLines(first=startup.leftover), False

