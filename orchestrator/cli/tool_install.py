"""`orchestrator tools install NAME`: a folder's requirements.txt into this Python, after a yes.

Only what this environment lacks is installed, from the file's bytes as hashed (the
question shows them), and never without the person's yes (`--yes` says it on the
command line); a folder you denied is refused. Installing approves nothing: a folder
that failed to load for a missing package is asked about again at the next start. pip runs as this interpreter's module, so
the packages land where the orchestrator runs; its options in the file (`-r`,
`--index-url`) are not passed on: the folder does not choose where packages come from.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated

import typer

from orchestrator.cli.common import err, out, settings_or_exit, user_errors
from orchestrator.errors import UserError
from orchestrator.folders.approvals import ApprovalStore, Status, discover_approved_first
from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.naming import find_in_tree
from orchestrator.folders.requirements import Needed, read_requirements
from orchestrator.install import pip_install
from orchestrator.terminal.text import shown

DENIED = "{name} is denied: `orchestrator tools approve {name}` first, if you trust it now"


def install_tool(
    name: Annotated[str, typer.Argument(help="The folder: its tool name, its path (a/b when nested), or its path as `tools list` prints it.")],
    yes: Annotated[
        bool, typer.Option("--yes", help="Install without asking (you said yes here).")
    ] = False,
) -> None:
    """Install what an approved folder's requirements.txt names and this environment lacks."""
    with user_errors():
        settings = settings_or_exit()
        store = ApprovalStore.of(settings)
        folder = find_in_tree(discover_approved_first(settings, store), name)
        if store.status(folder) == Status.DENIED:
            raise UserError(DENIED.format(name=folder.name))
        unmet = _unmet(folder)
        if not unmet:
            return
        if not (yes or _agreed(folder, unmet)):
            out.print("nothing installed")
            raise typer.Exit(1)
        _install(unmet)
        still = _unmet(folder, quiet=True)
        if still:
            names = ", ".join(item.describe() for item in still)
            raise UserError(f"still missing after pip ran: {names}")
    out.print(f"installed for {shown(folder.name)}: {shown(_names(unmet))}", highlight=False)


def _unmet(folder: ToolFolder, *, quiet: bool = False) -> list[Needed]:
    """Its unmet requirements; said when there is nothing to do."""
    if folder.requirements is None:
        if not quiet:
            out.print(f"{shown(folder.name)} has no requirements.txt: nothing to install")
        return []
    requirements = read_requirements(folder.requirements)
    if requirements.unreadable:
        raise UserError(
            f"{folder.name}'s requirements.txt has lines that are no requirement: "
            + ", ".join(requirements.unreadable)
        )
    if not requirements.unmet and not quiet:
        out.print(f"everything {shown(folder.name)}'s requirements.txt names is installed")
    return requirements.unmet


def _agreed(folder: ToolFolder, unmet: list[Needed]) -> bool:
    from orchestrator.terminal.tty_questions import ApprovalPrompt, person_terminal

    text = (
        f"{shown(folder.name)}'s requirements.txt asks for what this environment lacks: "
        f"{shown(', '.join(item.describe() for item in unmet))}\n"
        f"  to run: {shown(_command(unmet))}"
    )
    with person_terminal() as terminal:
        prompt = ApprovalPrompt(err=err, terminal=terminal)
        return prompt.confirm(text, question="Install them? \\[y/N] ") is True


def _command(unmet: list[Needed]) -> str:
    return pip_install(*(item.requirement for item in unmet))


def _install(unmet: list[Needed]) -> None:
    command = [sys.executable, "-m", "pip", "install", *(item.requirement for item in unmet)]
    try:
        done = subprocess.run(command, check=False)  # pip's own progress, on this terminal
    except OSError as error:
        raise UserError(f"could not run pip ({error}); run it yourself: {_command(unmet)}") from None
    if done.returncode != 0:
        raise UserError(f"pip failed (exit status {done.returncode}); the command: {_command(unmet)}")


def _names(unmet: list[Needed]) -> str:
    return ", ".join(item.requirement for item in unmet)
