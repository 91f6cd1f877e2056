"""`orchestrator run`: one approved action from the command line, with JSON or free text."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.common import (
    NoCacheOption,
    UserOption,
    cache_overrides,
    err,
    out,
    user_errors,
)
from orchestrator.cli.startup import DatabaseStart, Startup, prepare_unattended, run_command
from orchestrator.errors import ToolError, UserError
from orchestrator.settings import Settings

if TYPE_CHECKING:
    from orchestrator.actions.address import Address
    from orchestrator.conversation.turns import PendingQuestion
    from orchestrator.runtime import Orchestrator
    from orchestrator.sources.loaded import LoadedTool
    from orchestrator.tools.context import RunContext
    from orchestrator.tools.envelope import Envelope
    from orchestrator.tools.hitl import Decision

NOT_AN_OBJECT = '--json takes the action\'s parameters as one JSON object, e.g. \'{{"to": "a@b.c"}}\': {problem}'
NOTHING_TO_RUN = "Give the request in words, or its parameters with --json"
WHICH_ACTION = "{tool} has several actions: name one before --json ({actions})"
TOO_MANY = "With --json, give at most the action after the folder (got: {words})"


def run_action(
    folder: Annotated[
        str, typer.Argument(help="The folder: its tool name, its path (a/b when nested), or its path as `tools list` prints it.")
    ],
    words: Annotated[
        list[str] | None,
        typer.Argument(help="[ACTION] and the request in words (none with --json but the action)."),
    ] = None,
    parameters: Annotated[
        str | None,
        typer.Option(
            "--json", help="The action's parameters as a JSON object; prints the envelope."
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", help="Approve an action that needs your decision, without asking."),
    ] = False,
    user: UserOption = "local",
    no_cache: NoCacheOption = False,
) -> None:
    """Run one approved action; print its result (exit status 0 only on success).

    With --json the parameters are a JSON object, and the result is printed
    as its envelope (success, message, data, metadata, error); with words,
    readably. Words in `key: value` form are read as they are; a sentence is
    read by the model, when one is configured. A nested folder is addressed
    by its path (a/b). An action that needs your decision asks, as in chat;
    --yes approves it. E.g.: run email_agent send "to: a@b.c, subject: Hi,
    body: Hello".
    """
    words = list(words or [])
    with user_errors():
        arguments = _json_object(parameters) if parameters is not None else None
        if arguments is None and not words:
            raise UserError(NOTHING_TO_RUN)
        if arguments is not None and len(words) > 1:
            raise UserError(TOO_MANY.format(words=" ".join(words)))

    def prepare(settings: Settings, database: DatabaseStart | None) -> Startup:
        middleware = None
        if yes:
            from orchestrator.serve.mcp_server import unattended_middleware

            middleware = unattended_middleware(settings, allow_sensitive=True)
        # Parameters given as JSON: only an agent's action calls the model.
        return prepare_unattended(
            settings, database, middleware=middleware, model_at_first_use=arguments is not None
        )

    async def command(startup: Startup, runtime: Orchestrator) -> int:
        envelope = await _run(startup, runtime, folder, words, arguments, user=user)
        if arguments is not None:
            out.print_json(envelope.model_dump_json())
        else:
            out.print(envelope.text(), markup=False, highlight=False)
        return 0 if envelope.success else 1

    raise typer.Exit(
        run_command(
            command,
            prepare=prepare,
            reads_words=arguments is None,
            embeds_here=False,
            overrides=cache_overrides(no_cache),
        )
    )


async def _run(
    startup: Startup,
    runtime: Orchestrator,
    path: str,
    words: list[str],
    arguments: dict[str, object] | None,
    *,
    user: str,
) -> Envelope:
    from orchestrator.actions.action_runner import RUN_PREFIX, ActionRunner
    from orchestrator.actions.address import check_approved, find_folder, imported_now
    from orchestrator.actions.one_action import run_one
    from orchestrator.terminal.questions import question_asker

    check_approved(startup.reviewed, path)
    folder = await imported_now(find_folder(runtime.sub_agents, path, settings=runtime.settings))
    runner = ActionRunner(runtime, user, middleware=startup.middleware)
    # One context for the run: reading the words is part of its usage and cost.
    context = runner.context(f"{RUN_PREFIX}{uuid.uuid4().hex}")
    if arguments is None:
        address, arguments = await _from_words(folder, words, run=context)
    else:
        address = _named(folder, words[0] if words else None)
    with question_asker(interrupts=startup.interrupts, err=err) as asker:

        async def answer(questions: list[PendingQuestion]) -> dict[str, Decision]:
            from orchestrator.terminal.questions import ENDED

            answers = await asker.ask(questions)
            return {q.id: answers.decisions.get(q.id, ENDED) for q in questions}

        return await run_one(runner, address, arguments, answer=answer, context=context)


def _named(folder: LoadedTool, action: str | None) -> Address:
    from orchestrator.actions.address import actions_of, find_action
    from orchestrator.actions.runnable import action_name

    if action is None:
        tools = actions_of(folder)
        if len(tools) != 1:
            names = ", ".join(map(action_name, tools)) or "none"
            raise UserError(WHICH_ACTION.format(tool=folder.folder.name, actions=names))
        action = action_name(tools[0])
    return find_action(folder, action)


async def _from_words(
    folder: LoadedTool, words: list[str], *, run: RunContext
) -> tuple[Address, dict[str, object]]:
    """The action and its parameters the words give: `[ACTION] text`."""
    from orchestrator.actions.address import Address, actions_of, find_action
    from orchestrator.actions.free_text import parameters_from_text, reading_model, which_action
    from orchestrator.actions.runnable import action_name

    model = reading_model(folder)
    tools = actions_of(folder)
    try:
        if words[0] in {action_name(tool) for tool in tools}:  # the action, then its text (if any)
            address, text = find_action(folder, words[0]), " ".join(words[1:])
        else:
            if not tools:
                find_action(folder, words[0])  # says the folder has no actions of its own
            tool, text = await which_action(" ".join(words), tools, model=model, run=run)
            address = Address(folder, tool)
        return address, await parameters_from_text(text, address.tool, model=model, run=run)
    except ToolError as error:  # the words do not make a call: said in one line
        raise UserError(str(error)) from None


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(NOT_AN_OBJECT.format(problem=error.msg)) from None
    if not isinstance(value, dict):
        raise UserError(NOT_AN_OBJECT.format(problem=f"got {type(value).__name__}"))
    return value
