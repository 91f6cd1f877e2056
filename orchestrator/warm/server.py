"""The warm process: the product imported once, a fork of it for each command handed over.

One per OS user and installation (`protocol.installation_key`), started detached
by a command that ran the long way (`launch`), and gone after its idle time
without a command, on `orchestrator warm stop`, or when its code changed under it
(a fingerprint of the installed files, taken before it imported them, no longer
matches: the command it declines runs the long way and starts a new one).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import logging
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from orchestrator.process_exit import exit_now
from orchestrator.warm.child import Request, become
from orchestrator.warm.fingerprint import fingerprint
from orchestrator.warm.preload import preload
from orchestrator.warm.protocol import (
    DECLINED,
    DESCRIPTORS,
    LENGTH,
    MAX_REQUEST,
    STATUS,
    TAKEN,
    interpreter_options,
    path_in,
    receive_exactly,
    runtime_dir,
)

logger = logging.getLogger(__name__)
REQUEST_SECONDS = 5.0  # a command that connects sends its request at once


class WarmProcess:
    """The listening socket, the commands running as forks, and when to stop."""

    def __init__(self, folder: Path, *, minutes: float, run: Callable[[], int]) -> None:
        self.folder = folder
        self.idle_seconds = minutes * 60
        self.run = run
        self.code = fingerprint()  # before the imports: a change during them counts as a change
        # Before the imports too: some add to the import path as they load.
        self.interpreter = json.loads(json.dumps([sys.path, interpreter_options()]))
        self.selector = selectors.DefaultSelector()
        self.listener: socket.socket | None = None
        self.running: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
        self.last_used = time.monotonic()
        self.stop_asked = False  # by SIGTERM (`orchestrator warm stop`)

    def listen(self) -> None:
        """Bind the socket (a stale one from a crash is replaced: the lock says none listens)."""
        path = path_in(self.folder, "sock")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(16)
        self.listener = listener
        self.selector.register(listener, selectors.EVENT_READ)
        self._write_state()

    def serve(self) -> None:
        """Take commands until stopped or idle, then wait for the running ones to end."""
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stop_asked", True))
        self.selector.register(wake_read, selectors.EVENT_READ)
        while self.listener is not None or self.running:
            for key, _ in self.selector.select(timeout=self._timeout()):
                if key.fileobj is self.listener:
                    self._accept()
                elif key.fileobj == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 64)
                else:
                    self._ended(int(key.fd))
            if self.stop_asked:
                self._stop("asked to")
            elif not self.running and time.monotonic() - self.last_used >= self.idle_seconds:
                self._stop("idle")

    def _timeout(self) -> float | None:
        if self.listener is None:
            return None
        return max(0.0, self.idle_seconds - (time.monotonic() - self.last_used)) + 0.05

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            connection, _ = self.listener.accept()
        except OSError as error:  # out of descriptors, or the command gave up: the next one may do
            logger.warning("could not take a command: %s", error)
            return
        self.last_used = time.monotonic()
        try:
            request = self._read_request(connection)
        except (OSError, ValueError, KeyError, TypeError) as error:  # not a request of this version
            logger.warning("a request was refused: %s", error)
            request = None
        if request is None:
            connection.close()
        elif not self._declines(request, connection):
            self._fork(request, connection)

    def _read_request(self, connection: socket.socket) -> Request | None:
        credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", credentials)[1] != os.getuid():
            raise ValueError("a command of another user")
        connection.settimeout(REQUEST_SECONDS)
        message, descriptors, _, _ = socket.recv_fds(connection, LENGTH.size + 65536, DESCRIPTORS)
        try:
            return self._parsed(connection, message, descriptors)
        except BaseException:
            _close(descriptors)
            raise

    def _parsed(self, connection: socket.socket, message: bytes, descriptors: list[int]) -> Request | None:
        if len(descriptors) not in (DESCRIPTORS - 1, DESCRIPTORS) or len(message) < LENGTH.size:
            _close(descriptors)
            return None
        (size,) = LENGTH.unpack_from(message)
        if size > MAX_REQUEST:
            raise ValueError(f"a request of {size} bytes")
        body = message[LENGTH.size :] + receive_exactly(connection, size - len(message) + LENGTH.size)
        connection.settimeout(None)
        fields = json.loads(body)
        return Request(
            argv=list(fields["argv"]), env=dict(fields["env"]), umask=int(fields["umask"]),
            descriptors=descriptors, path=list(fields["path"]), options=list(fields["options"]),
            streams=[(str(encoding), str(errors)) for encoding, errors in fields["streams"]],
        )  # fmt: skip

    def _declines(self, request: Request, connection: socket.socket) -> bool:
        """Declined: another interpreter setup, or this process's code changed since it started."""
        reason = None
        if [request.path, request.options] != self.interpreter:
            reason = "started with another Python path or options"
            logger.debug("theirs: %s; ours: %s", [request.path, request.options], self.interpreter)
        elif fingerprint() != self.code:
            reason = "the installed code changed"
            self._stop(reason)
        if reason is None:
            return False
        logger.info("declined a command: %s", reason)
        with contextlib.suppress(OSError):
            connection.sendall(DECLINED)
        connection.close()
        _close(request.descriptors)
        return True

    def _fork(self, request: Request, connection: socket.socket) -> None:
        pid = os.fork()
        if pid == 0:
            self._as_child(request, connection)
        _close(request.descriptors)
        with contextlib.suppress(OSError):  # the command is gone already: its fork sees so at once
            connection.sendall(TAKEN)
        logger.info("pid %d runs `%s`", pid, " ".join(request.argv[1:2]))
        pidfd = os.pidfd_open(pid)
        self.running[pidfd] = (pid, connection)
        self.selector.register(pidfd, selectors.EVENT_READ)

    def _as_child(self, request: Request, connection: socket.socket) -> None:
        code = 1
        try:
            self.selector.close()
            if self.listener is not None:
                self.listener.close()
            for pidfd, (_, other) in self.running.items():  # the other commands' are not this one's
                os.close(pidfd)
                other.close()
            signal.set_wakeup_fd(-1)
            become(request, connection)
            code = self.run()
        finally:
            exit_now(code)  # the command ends as its own process would

    def _ended(self, pidfd: int) -> None:
        pid, connection = self.running.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        logger.info("pid %d ended with %d", pid, code)
        with contextlib.suppress(OSError):
            connection.sendall(STATUS.pack(code))
        connection.close()
        self.last_used = time.monotonic()

    def _stop(self, reason: str) -> None:
        """Take no more commands; those running end as they would, and are answered."""
        if self.listener is None:
            return
        logger.info("stopping (%s) after %d running command(s) end", reason, len(self.running))
        self.selector.unregister(self.listener)
        self.listener.close()
        self.listener = None
        for suffix in ("sock", "json"):
            with contextlib.suppress(FileNotFoundError):
                path_in(self.folder, suffix).unlink()

    def _write_state(self) -> None:
        state = {"pid": os.getpid(), "since": time.time(), "idle_minutes": self.idle_seconds / 60}
        path_in(self.folder, "json").write_text(json.dumps(state))


def serve(*, minutes: float, run: Callable[[], int]) -> int:
    """Be the warm process until idle or stopped: 0, or 1 when it could not start."""
    folder = runtime_dir(create=True)
    if folder is None or not hasattr(os, "pidfd_open"):
        logger.warning("no warm process: no private runtime folder, or no pidfd on this system")
        return 1
    with _the_only_one(folder) as alone:
        if not alone:
            return 0  # another started first
        process = WarmProcess(folder, minutes=minutes, run=run)
        preload(path_in(folder, "modules"))
        threads = [thread.name for thread in threading.enumerate() if thread is not threading.main_thread()]
        if threads:  # a fork keeps only the thread that forked: these would be missing in each command
            logger.warning("no warm process: importing started threads (%s)", ", ".join(threads))
            return 1
        gc.collect()
        gc.freeze()  # shared with every fork, never copied by a collection
        process.listen()
        logger.info("warm: pid %d, %d modules, idle after %g min", os.getpid(), len(sys.modules), minutes)
        process.serve()
    return 0


@contextlib.contextmanager
def _the_only_one(folder: Path) -> Iterator[bool]:
    descriptor = os.open(path_in(folder, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        yield _locked(descriptor)
    finally:
        os.close(descriptor)



def _close(descriptors: list[int]) -> None:
    for descriptor in descriptors:
        os.close(descriptor)


def _locked(descriptor: int) -> bool:
    """The lock taken, unless another warm process holds it; a moment's look by `state` is waited out."""
    for _ in range(20):
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.01)
    return False
