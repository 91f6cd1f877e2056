"""Where an MCP server's definition stands with the user: approved, denied, new or changed."""

from __future__ import annotations

from pydantic import ValidationError

from orchestrator.folders.approvals import ApprovalStore, Pin, Status
from orchestrator.sources.mcp.definitions import ServerDefinition


def pinned(store: ApprovalStore, key: str) -> tuple[Pin, ServerDefinition] | None:
    """The signed answer about the server of folder `key`, with the definition it is about.

    None when there is none, or when the stored definition no longer hashes to
    the signed digest (edited by hand): then it counts as never approved.
    """
    pin = store.pin(key)
    if pin is None:
        return None
    try:
        definition = ServerDefinition.model_validate(pin.definition)
    except ValidationError:
        return None
    return (pin, definition) if definition.digest == pin.digest else None


def pin_status(store: ApprovalStore, key: str, definition: ServerDefinition) -> Status:
    """Whether `definition` is the one the user approved (or denied) for folder `key`."""
    found = pinned(store, key)
    if found is None:
        return Status.NEW
    pin, _ = found
    if pin.digest != definition.digest:
        return Status.CHANGED
    return Status.APPROVED if pin.approved else Status.DENIED


def approved_definition(store: ApprovalStore, key: str) -> ServerDefinition | None:
    """The definition the user approved for folder `key`, if any."""
    found = pinned(store, key)
    return found[1] if found is not None and found[0].approved else None


def decide(
    store: ApprovalStore, key: str, *, name: str, definition: ServerDefinition, approved: bool
) -> None:
    """Record the user's answer about `definition`."""
    pin = Pin(
        name=name,
        digest=definition.digest,
        approved=approved,
        definition=definition.model_dump(mode="json"),
    )
    store.decide_pin(key, pin)
