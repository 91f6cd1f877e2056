"""The reading actions' parameters, and the IMAP SEARCH keys they stand for."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field, field_validator, model_validator

from orchestrator.tools import ToolError

from .imap_reading import quoted

MAILBOX = "The mailbox (folder) to read, e.g. INBOX, Sent, Archive."


def one_line(value: str | None) -> str | None:
    """`value`, refused (a ValueError) with a line break or another control character in it:
    it would end an IMAP command (or a header) and start another."""
    if value is not None and any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise ValueError(f"{value!r} has a line break or another control character")
    return value


class ListMessages(BaseModel):
    mailbox: str = Field(default="INBOX", min_length=1, description=MAILBOX)
    limit: int = Field(default=20, ge=1, le=100, description="At most this many, newest first.")
    unread_only: bool = Field(default=False, description="Only messages not yet read.")

    _mailbox = field_validator("mailbox")(one_line)


class SearchMessages(ListMessages):
    from_address: str | None = Field(default=None, description="Text in the sender (From).")
    to: str | None = Field(default=None, description="Text in the recipients (To).")
    subject: str | None = Field(default=None, description="Text in the subject.")
    text: str | None = Field(default=None, description="Text anywhere in the headers or body.")
    since: date | None = Field(default=None, description="Received on or after, YYYY-MM-DD.")
    before: date | None = Field(default=None, description="Received before, YYYY-MM-DD.")

    _terms = field_validator("from_address", "to", "subject", "text")(one_line)

    @model_validator(mode="after")
    def _something(self) -> SearchMessages:
        if not (
            self.unread_only or any(value for _, value in self.terms()) or self.since or self.before
        ):
            raise ValueError(
                "give at least one of from_address, to, subject, text, since, before, unread_only"
            )
        return self

    def terms(self) -> list[tuple[str, str | None]]:
        """The text criteria by their IMAP search key."""
        return [
            ("FROM", self.from_address),
            ("TO", self.to),
            ("SUBJECT", self.subject),
            ("TEXT", self.text),
        ]


class ReadMessage(BaseModel):
    uid: int = Field(
        ge=1, description="The message's number, as list_messages and search show it (#101)."
    )
    mailbox: str = Field(default="INBOX", min_length=1, description=MAILBOX)
    max_chars: int = Field(
        default=20_000, ge=100, le=200_000, description="Cut the body after this many characters."
    )

    _mailbox = field_validator("mailbox")(one_line)


def search_criteria(params: SearchMessages) -> list[str | bytes]:
    """IMAP SEARCH keys; a non-ASCII term goes last, as the one UTF-8 literal imaplib can send."""
    criteria: list[str | bytes] = ["UNSEEN"] if params.unread_only else []
    if params.since:
        criteria += ["SINCE", params.since.strftime("%d-%b-%Y")]
    if params.before:
        criteria += ["BEFORE", params.before.strftime("%d-%b-%Y")]
    wide = [(key, value) for key, value in params.terms() if value and not value.isascii()]
    if len(wide) > 1:
        raise ToolError(
            "Only one of from_address, to, subject and text may have non-ASCII characters in one search",
            code="invalid_arguments",
            recoverable=False,
        )
    for key, value in params.terms():
        if value and value.isascii():
            criteria += [key, quoted(value)]
    for key, value in wide:
        criteria += [key, value.encode()]
    return criteria
