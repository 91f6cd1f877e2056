"""A command handed to the warm process, when one runs: the command's side.

The standard library only, and nothing of the product: it runs before anything
else is loaded, and costs a few milliseconds when no warm process answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType

from orchestrator.warm.protocol import (
    COMMANDS,
    FORWARDED_SIGNALS,
    STATUS,
    TAKEN,
    interpreter_options,
    minutes_from_environment,
    path_in,
    receive_exactly,
    runtime_dir,
    send_request,
)

LOST = "error: the warm process stopped before the command ended (`orchestrator warm stop` and run it again)"


def wants_warm(argv: list[str]) -> bool:
    """Whether `argv` (without the program) is a command the warm process may run."""
    named = any(tuple(argv[: len(command)]) == command for command in COMMANDS)
    return named and minutes_from_environment() != 0


def run_warm(argv: list[str]) -> int | None:
    """Run `argv` in the warm process: its exit status, or None when none took it (run it here)."""
    if not wants_warm(argv) or not hasattr(socket, "SCM_RIGHTS"):
        return None
    folder = runtime_dir(create=False)
    if folder is None:
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with connection:
        try:
            connection.connect(str(path_in(folder, "sock")))
        except OSError:  # none runs, or one is ending
            return None
        descriptors = _descriptors()
        if descriptors is None:
            return None
        try:
            return _handed_over(connection, descriptors)
        finally:
            for descriptor in descriptors[3:]:
                os.close(descriptor)


def _descriptors() -> list[int] | None:
    """The standard streams, the working directory and the controlling terminal if any."""
    streams = []
    for number in (0, 1, 2):
        try:
            os.fstat(number)
            streams.append(number)
        except OSError:
            return None  # a closed stream: let the command meet it as it would here
    try:
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None  # a working directory deleted: the command says so itself
    try:  # where questions go when standard input is a pipe (`terminal.tty_questions`)
        terminal = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return [*streams, here]
    return [*streams, here, terminal]


def _request() -> bytes:
    mask = os.umask(0)
    os.umask(mask)
    return json.dumps(
        {
            "argv": sys.argv,
            "env": dict(os.environ),
            "umask": mask,
            # The script's own folder comes first and differs by how the command was started.
            "path": sys.path[1:],
            "options": interpreter_options(),
            # As Python chose them for this process's streams (locale, PYTHONIOENCODING).
            "streams": [[stream.encoding, stream.errors] for stream in (sys.stdin, sys.stdout, sys.stderr)],
        }
    ).encode()


def _handed_over(connection: socket.socket, descriptors: list[int]) -> int | None:
    # Forwarded from before the request: a Ctrl-C as it is taken reaches the fork, not a traceback.
    previous = {number: signal.signal(number, _forward_to(connection)) for number in FORWARDED_SIGNALS}
    try:
        try:
            send_request(connection, _request(), descriptors)
            taken = receive_exactly(connection, 1) == TAKEN
        except OSError:
            taken = False
        if not taken:  # declined (its code changed, other options) or ending: run it here
            return None
        try:  # taken: never run here as well, whatever happens now
            status = receive_exactly(connection, STATUS.size)
        except OSError:
            status = b""
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if len(status) < STATUS.size:
        print(LOST, file=sys.stderr)
        return 1
    return _as_exit_status(STATUS.unpack(status)[0])


def _forward_to(connection: socket.socket) -> Callable[[int, FrameType | None], None]:
    def forward(number: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):  # the command ended meanwhile
            connection.send(bytes([number]))

    return forward


def _as_exit_status(code: int) -> int:
    """A command killed by a signal ends this process by the same signal, as a shell expects."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code if code >= 0 else 128 - code
