"""A fork of the warm process made into the command that asked: its streams, place and environment."""

from __future__ import annotations

import functools
import io
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass

from orchestrator.terminal import tty_questions
from orchestrator.warm.protocol import FORWARDED_SIGNALS


@dataclass(frozen=True)
class Request:
    """What a command hands over: its arguments, environment, umask, descriptors and interpreter."""

    argv: list[str]
    env: dict[str, str]
    umask: int
    descriptors: list[int]  # stdin, stdout, stderr, the working directory[, the terminal]
    path: list[str]  # sys.path but the script's own folder
    options: list[object]  # protocol.interpreter_options
    streams: list[tuple[str, str]]  # the encoding and errors of its stdin, stdout and stderr


def become(request: Request, connection: socket.socket) -> None:
    """Make this fork the command's process: from here on it is as if the command ran here."""
    for number in FORWARDED_SIGNALS:
        signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    stdin, stdout, stderr, here, *terminal = request.descriptors
    for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(source, target)
    os.fchdir(here)
    for descriptor in {stdin, stdout, stderr, here} - {0, 1, 2}:
        os.close(descriptor)
    _use_terminal(terminal[0] if terminal else None)
    os.environ.clear()
    os.environ.update(request.env)
    forget_environment_caches()
    time.tzset()  # local times follow the command's TZ, not the warm process's
    os.umask(request.umask)
    sys.argv = list(request.argv)
    _reopen_standard_streams(request.streams)
    _forget_logging()
    threading.Thread(target=_relay_signals, args=(connection,), name="warm-signals", daemon=True).start()


def _reopen_standard_streams(streams: list[tuple[str, str]]) -> None:
    """New `sys.std*` over descriptors 0-2, encoded and buffered as the command's own were."""
    (in_encoding, in_errors), (out_encoding, out_errors), (err_encoding, err_errors) = streams
    sys.stdin = sys.__stdin__ = _text(0, "r", encoding=in_encoding, errors=in_errors)
    sys.stdout = sys.__stdout__ = _text(1, "w", encoding=out_encoding, errors=out_errors)
    sys.stderr = sys.__stderr__ = _text(2, "w", encoding=err_encoding, errors=err_errors)


def forget_environment_caches() -> None:
    """What libraries read of the environment once per process, read again from the command's.

    langsmith caches its variables (`utils.get_env_var` and a few settings of its
    own, "call .cache_clear() to re-read"), some of them read while it is imported.
    """
    for name, module in list(sys.modules.items()):
        if name == "langsmith" or name.startswith("langsmith."):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):  # pyright: ignore[reportPrivateUsage]  # no public type
                    value.cache_clear()


def _use_terminal(descriptor: int | None) -> None:
    """Questions go to the command's terminal: a fork has no controlling terminal of its own."""
    if descriptor is None:
        return  # none, as /dev/tty is none for the fork
    os.set_inheritable(descriptor, False)  # the command's tools get no handle on it
    tty_questions.TERMINAL = descriptor


def _forget_logging() -> None:
    """Logging as a new process has it: the warm process's own log is not the command's."""
    for handler in list(logging.root.handlers):
        logging.root.removeHandler(handler)
    logging.root.setLevel(logging.WARNING)


def _text(descriptor: int, mode: str, *, encoding: str, errors: str) -> io.TextIOWrapper:
    # Python's own rule: stderr and a terminal are line-buffered, other output is not.
    line_buffered = mode == "w" and (descriptor == 2 or os.isatty(descriptor))
    stream = open(  # noqa: SIM115 (the process's own stream, open to its end)
        descriptor, mode, encoding=encoding, errors=errors, closefd=False, buffering=1 if line_buffered else -1
    )
    assert isinstance(stream, io.TextIOWrapper)
    return stream


def _relay_signals(connection: socket.socket) -> None:
    """Signals the command gets, raised here; the command gone (its end closed): an interrupt."""
    while True:
        try:
            received = connection.recv(16)
        except OSError:
            received = b""
        if not received:
            os.kill(os.getpid(), signal.SIGINT)
            return
        for number in received:
            if number in FORWARDED_SIGNALS:
                os.kill(os.getpid(), number)
