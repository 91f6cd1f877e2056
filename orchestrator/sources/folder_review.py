"""The folders a start may load: the answers given already, else those of the person asked now."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.folders.approvals import Ask, Reviewed, review_folders

if TYPE_CHECKING:
    from orchestrator.settings import Settings


def reviewed_folders(settings: Settings, *, ask: Ask | None, reviewed: Reviewed | None) -> Reviewed:
    """`reviewed` when given; else the folder tree, `ask` put each new or changed folder.

    Without `ask` nobody is asked: nothing new is approved now.
    """
    return reviewed or review_folders(settings, ask or _nobody_answers)


def _nobody_answers(*_: object) -> None:
    return None  # no one to ask: nothing new is approved now
