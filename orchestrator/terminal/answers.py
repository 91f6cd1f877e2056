"""One line answers a question; how a question is shown.

- an approval: `y` approves, `n` rejects (`n too risky`: with a reason for the
  model), `e` edits: the new arguments as one JSON object on the next line (or
  after the `e`); JSON that does not parse, or is no object, is asked again (a
  plan's approval is edited as its tasks, a JSON list);
- an authorization: `y` grants, `n` refuses (a reason may follow);
- a question (`ask_human`): the line is the answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from rich.console import Console

from orchestrator.conversation.session import PendingQuestion
from orchestrator.plans import PLAN_TOOL
from orchestrator.terminal.text import one_line, shown
from orchestrator.tools.hitl import (
    ApproveDecision,
    Decision,
    Question,
    RejectDecision,
    RespondDecision,
    question_risk,
)

DESCRIPTION_LINES = 6
DESCRIPTION_CHARS = 300
YES = ("y", "yes")
NO = ("n", "no")
EDIT = ("e", "edit")
_WORD = re.compile(r"(\w+)(?:[\s,;:]+|$)(.*)", re.DOTALL)
# Edited arguments nest no deeper: parsing, checking and saving them all recurse.
MAX_NESTING = 64
# A JSON string (skipped whole, brackets in it are text) or a bracket.
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


@dataclass(frozen=True)
class EditWanted:
    """The person chose to edit; `text` is what followed the `e` (JSON, or nothing yet)."""

    text: str


@dataclass(frozen=True)
class Unclear:
    """The line answers nothing: `problem` says what would."""

    problem: str


def read_choice(line: str, question: Question) -> Decision | EditWanted | Unclear:
    """What one line answers to `question` (an edit still needs its arguments)."""
    text = line.strip()
    allowed = question["allowed"]
    if not text:
        return Unclear(f"Please answer: {hint(question)}.")
    if "respond" in allowed:
        return RespondDecision(type="respond", message=text)
    word, rest = _first_word(text)
    if word in YES and "approve" in allowed:
        return ApproveDecision(type="approve")
    if word in NO and "reject" in allowed:
        reason = rest.strip()
        if not reason:
            return RejectDecision(type="reject")
        return RejectDecision(type="reject", message=reason)
    if word in EDIT and "edit" in allowed:
        return EditWanted(rest.strip())
    return Unclear(f"Please answer {hint(question)}, not '{text}'.")


def _first_word(text: str) -> tuple[str, str]:
    """`n, too risky` -> ("n", "too risky"): the word (lower case) and what follows it."""
    found = _WORD.match(text)
    return (found.group(1).lower(), found.group(2)) if found else ("", text)


def read_arguments(text: str, *, question: Question | None = None) -> dict[str, object] | Unclear:
    """Edited arguments from one line of JSON; an object, or what is wrong with it.

    A plan (`create_execution_plan`) is edited as its tasks: a JSON list is its
    new tasks, the goal kept (an object still replaces every argument).
    """
    if _nesting(text) > MAX_NESTING:  # before parsing: Python's parser recurses
        return Unclear(f"Nested more than {MAX_NESTING} deep: give the arguments as plain JSON.")
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as error:
        return Unclear(f"Not JSON ({error.msg}): give the arguments as one JSON object.")
    if isinstance(arguments, list) and question is not None and is_plan(question):
        return {**question["action"]["args"], "tasks": arguments}
    if not isinstance(arguments, dict):
        return Unclear("Not a JSON object: give the arguments as one, e.g. {\"path\": \"a.txt\"}.")
    return arguments


def is_plan(question: Question) -> bool:
    """Whether `question` asks about a plan (its tasks are shown, and edited, as a list)."""
    args = question["action"]["args"]
    return question["action"]["name"] == PLAN_TOOL and isinstance(args.get("tasks"), list)


def edit_default(question: Question) -> str:
    """What an edit starts from: the call's arguments as JSON (a plan's: its tasks)."""
    args = question["action"]["args"]
    return json.dumps(args["tasks"] if is_plan(question) else args, ensure_ascii=False, default=str)


def _nesting(text: str) -> int:
    """How deep the brackets of `text` nest at most (outside strings: as JSON reads them)."""
    deepest = depth = 0
    for token in _BRACKETS.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth -= 1
    return deepest


def hint(question: Question) -> str:
    """The answers `question` takes, as the prompt shows them."""
    allowed = question["allowed"]
    if "respond" in allowed:
        return "your answer"
    granting = question["kind"] == "authorization"
    parts = [
        ("approve", "y grant" if granting else "y approve"),
        ("reject", "n [reason] refuse" if granting else "n [reason] reject"),
        ("edit", "e edit"),
    ]
    return " · ".join(text for decision, text in parts if decision in allowed)


def asker_path(question: Question) -> str:
    """Who asks, from the top: `personal_assistant › email_agent` (or `orchestrator`)."""
    return " › ".join(question["agent_path"]) or "orchestrator"


def describe(pending: PendingQuestion, number: int, total: int) -> str:
    """A question as rich markup: kind, who asks, the tool and its arguments, its risk and
    urgency, why (all escaped)."""
    question = pending.question
    action = question["action"]
    lines = [
        f"[bold]\\[{number}/{total}] {question['kind']}[/bold] · {shown(asker_path(question))}"
        f" · [bold]{shown(action['name'])}[/bold]"
    ]
    args = action["args"]
    if question["kind"] == "question" and isinstance(args.get("question"), str):
        lines.append(f"    asks: {shown(args['question'])}")
        if args.get("context"):
            lines.append(f"    context: {shown(str(args['context']))}")
    elif question["kind"] == "authorization" and set(args) == {"tool_name", "reason"}:
        # request_authorization: its description is the reason, said once here
        lines.append(f"    to use: {shown(str(args['tool_name']))}")
        lines.append(f"    because: {shown(str(args['reason']))}")
    elif is_plan(question):  # the whole plan, a task a line (an edit gives the tasks as JSON)
        lines.append(f"    goal: {shown(str(args.get('goal', '')))}")
        lines.extend(f"    {line}" for line in _plan_tasks(args["tasks"]))
    else:
        lines.append(f"    arguments: {shown(json.dumps(args, ensure_ascii=False, default=str))}")
        # The tool's description, a line at a time (its newlines are not shown as `\n`).
        described = str(action.get("description") or "").splitlines()[:DESCRIPTION_LINES]
        lines.extend(f"    {shown(one_line(line, DESCRIPTION_CHARS))}" for line in described if line.strip())
    lines.append(f"    {risk_line(question)}")
    if why := question.get("why"):
        lines.append(f"    why: {shown(why)}")
    if problem := question.get("problem"):
        lines.append(f"    [red]problem:[/red] {shown(problem)}")
    return "\n".join(lines)


# A risk that high is said in red, so that it is not answered in passing.
_RISK_STYLE = {"high": "red", "critical": "bold red"}


def risk_line(question: Question) -> str:
    """`risk: high · urgency: normal`, as rich markup (a high or critical risk in red)."""
    risk = question_risk(question)
    level = risk["risk_level"]
    style = _RISK_STYLE.get(level)
    said = f"[{style}]{level}[/{style}]" if style else level
    return f"risk: {said} · urgency: {risk['urgency']}"


def _plan_tasks(tasks: list[object]) -> list[str]:
    lines = []
    for task in tasks:
        if not isinstance(task, dict):
            lines.append(shown(json.dumps(task, ensure_ascii=False, default=str)))
            continue
        after = task.get("depends_on") or []
        waits = f" [dim](after {shown(', '.join(map(str, after)))})[/dim]" if after else ""
        arguments = json.dumps(task.get("arguments", {}), ensure_ascii=False, default=str)
        lines.append(
            f"{shown(str(task.get('id', '?')))} {shown(str(task.get('description', '')))}: "
            f"[bold]{shown(str(task.get('tool', '?')))}[/bold] {shown(arguments)}{waits}"
        )
    return lines


def show_questions(questions: list[PendingQuestion], console: Console) -> None:
    """All the open questions together, before any is asked."""
    count = len(questions)
    console.print(
        f"[yellow]{count} question{'s' if count > 1 else ''} wait{'' if count > 1 else 's'} "
        "for your answer:[/yellow]"
    )
    for number, pending in enumerate(questions, 1):
        console.print(describe(pending, number, count), highlight=False)
