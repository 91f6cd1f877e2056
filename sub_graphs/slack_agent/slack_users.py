"""People's names for their Slack ids (users.info), remembered per workspace."""

from __future__ import annotations

import re

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
# Ids remembered per workspace; past it the oldest are forgotten (names rarely change).
MAX_REMEMBERED = 5000


class UserNames:
    """The name Slack shows for each user id: display name, else real name, else login.

    One users.info call per id the first time it is seen; an id Slack will not describe
    (`user_not_found`, a token without `users:read`) stays as it is, and is not asked again.
    """

    def __init__(self) -> None:
        self._names: dict[str, dict[str, str]] = {}

    def name(self, client: WebClient, workspace: str, user_id: str) -> str:
        """The name of `user_id` in `workspace` (a key of the token and server)."""
        known = self._names.setdefault(workspace, {})
        if user_id not in known:
            if len(known) >= MAX_REMEMBERED:
                del known[next(iter(known))]
            found = _looked_up(client, user_id)
            if found is None:
                return user_id  # asked again next time: Slack may answer then
            known[user_id] = found
        return known[user_id]

    def in_text(self, client: WebClient, workspace: str, text: str) -> str:
        """`text` with each mention `<@U0123>` written `@Name`."""
        return MENTION.sub(lambda m: "@" + self.name(client, workspace, m.group(1)), text)


# Slack's answers that will not change by asking again: the id stays an id.
FINAL = frozenset({"user_not_found", "user_not_visible", "missing_scope", "not_allowed_token_type"})


def _looked_up(client: WebClient, user_id: str) -> str | None:
    try:
        user = client.users_info(user=user_id).get("user") or {}
    except SlackApiError as error:
        return user_id if error.response.get("error") in FINAL else None
    profile = user.get("profile") or {}
    for name in (profile.get("display_name"), user.get("real_name"), user.get("name")):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return user_id
