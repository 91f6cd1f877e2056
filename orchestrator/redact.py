"""Error text that leaves the process without secrets or the user's file layout.

A tool's error goes to the model (often a third party) and to the terminal. It
may hold what the tool saw: an API key in a failed URL, a password in a
connection string, `/home/<user>/...` in a `FileNotFoundError`. Before it is
shown, values of secret-looking environment variables and of the settings'
secrets become `[redacted]`, the home directory `~`, and absolute paths
outside the places a tool may name `<path>`: its own folder, and the paths the
user configured (a tool's settings: its documents folder, its SQLite file, the
`.env` files they are read from; see `show_paths`). A single name after a slash
(`/search`, a slash command) is a word, not a path: a path has two parts at least.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, SecretStr

SECRET = "[redacted]"
PATH = "<path>"
HOME = "~"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASS|CREDENTIAL", re.IGNORECASE)
# Shorter values, or these, would garble every message they happen to occur in.
MIN_SECRET_CHARS = 4
NOT_SECRETS = frozenset({"true", "false", "none", "null", "yes"})

# `scheme://user:password@host`: the password, wherever the URL came from.
_URL_PASSWORD = re.compile(r"(?<=://)([^\s/:@]*):([^\s/@]+)@")
# An absolute POSIX path: a slash not inside a word, URL or relative path,
# then a name (not a digit: `1 /2` is arithmetic) and at least one more `/` (so a
# slash command or `/word` stays), up to a quote, space or separator.
_NAME = r"[^\s'\"`,;:()<>\[\]{}|/]"
_NOT_AFTER = r"(?<![\w/.:~\\-])"
_ABSOLUTE_PATH = rf"/[A-Za-z_.~]{_NAME}*(?:/{_NAME}*)+"

_remembered: set[str] = set()
_shown: set[str] = set()


def remember(*secrets: str | None) -> None:
    """Redact these values from now on (in this process)."""
    _remembered.update(s for s in secrets if s and _worth_redacting(s))


def show_paths(*paths: Path | str) -> None:
    """Show these paths (and what is below them) as they are, from now on (in this process).

    For what the user configured: hiding their own documents folder or database
    file from them would leave an error they cannot act on.
    """
    for path in paths:
        given = Path(path).expanduser()
        if given.is_absolute() and given != Path("/"):
            _shown.update({str(given), str(given.resolve())})


def remember_settings(settings: BaseModel) -> None:
    """Redact the settings' secrets: API keys and the passwords of database URLs."""
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            remember(value.get_secret_value())
        elif isinstance(value, str):
            remember(*(match.group(2) for match in _URL_PASSWORD.finditer(value)))


def redact(text: str, *, keep: Iterable[Path | str] = ()) -> str:
    """`text` without secrets, with `~` for home and `<path>` for paths outside `keep`."""
    for secret in sorted(_secrets(), key=len, reverse=True):
        text = text.replace(secret, SECRET)
    text = _URL_PASSWORD.sub(rf"\1:{SECRET}@", text)
    roots = {str(Path(root)) for root in keep} | _shown
    text = _paths(frozenset(roots)).sub(_shown_path, text)
    home = _home()
    return re.sub(re.escape(home) + r"(?![\w.-])", HOME, text) if home else text


def _secrets() -> set[str]:
    from_environment = {
        value
        for name, value in os.environ.items()
        if SECRET_NAME.search(name) and _worth_redacting(value)
    }
    return from_environment | _remembered


def _worth_redacting(value: str) -> bool:
    return len(value) >= MIN_SECRET_CHARS and value.lower() not in NOT_SECRETS


@lru_cache(maxsize=64)
def _paths(roots: frozenset[str]) -> re.Pattern[str]:
    """Absolute paths; first those below `roots`, whole even where a root holds a space."""
    below = "|".join(
        rf"{re.escape(root.rstrip('/'))}(?![\w-])(?:/{_NAME}*)*"
        for root in sorted(roots, key=len, reverse=True)
        if root.rstrip("/")
    )
    kept = rf"(?P<kept>{below})|" if below else ""
    return re.compile(rf"{_NOT_AFTER}(?:{kept}{_ABSOLUTE_PATH})")


def _shown_path(match: re.Match[str]) -> str:
    path = match.group()
    if not match.groupdict().get("kept"):
        return PATH
    home = _home()
    return HOME + path[len(home) :] if home and path.startswith(home + "/") else path


def _home() -> str | None:
    # A home of `/` (some service accounts) would turn every slash into `~`.
    try:
        home = str(Path.home()).rstrip("/")
    except RuntimeError:  # no home directory can be determined
        return None
    return home or None
