"""pymap's IMAP server (its in-memory `dict` backend) on 127.0.0.1, in this process on a thread
with an event loop of its own, one user (`ada`, `s3cret`) whose mail a test puts in with APPEND."""

from __future__ import annotations

import asyncio
import imaplib
import threading
from argparse import ArgumentParser
from contextlib import AsyncExitStack
from email.parser import BytesParser
from email.policy import default
from socketserver import StreamRequestHandler, ThreadingTCPServer
from types import TracebackType

from pymap.backend.dict import DictBackend
from pymap.imap import IMAPService

from tests.integrations.folders import free_port
from tests.server_thread import ServedOnThread

USER, PASSWORD = "ada", "s3cret"


class ImapServer:
    """Serving while its `with` block lasts; `client()` is a plain IMAP login to check what it holds."""

    def __init__(self) -> None:
        self.port = free_port()
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ImapServer:
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            raise self._failed
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()

    def client(self) -> imaplib.IMAP4:
        """Logged in as the user, by the standard library's client."""
        client = imaplib.IMAP4("127.0.0.1", self.port)
        client.login(USER, PASSWORD)
        return client

    def append(self, mailbox: str, message: bytes, *, seen: bool = False) -> None:
        """Put `message` in `mailbox` (made if missing), read or not, received when its Date says."""
        received = (
            BytesParser(policy=default).parsebytes(message, headersonly=True)["Date"].datetime
        )
        client = self.client()
        client.create(mailbox)  # NO when it exists: fine
        flags = "(\\Seen)" if seen else None
        status, said = client.append(mailbox, flags, imaplib.Time2Internaldate(received), message)
        client.logout()
        assert status == "OK", said

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)  # pymap asks for the thread's loop
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as error:  # told to the test by __enter__
            self._failed = error
            self._ready.set()
        finally:  # connections still open: closed before the loop is
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    async def _serve(self) -> None:
        parser = ArgumentParser()
        parser.add_argument("--debug", action="store_true")
        backends = parser.add_subparsers(dest="backend")
        DictBackend.add_subparser("dict", backends)
        IMAPService.add_arguments(parser)
        parser.set_defaults(skip_services=[], passlib_cfg=None)
        arguments = ["--host", "127.0.0.1", "--port", str(self.port), "--no-tls"]
        args = parser.parse_args(
            [*arguments, "dict", "--demo-user", USER, "--demo-password", PASSWORD]
        )
        backend, config = await DictBackend.init(args)
        config.apply_context()
        async with AsyncExitStack() as stack:
            await backend.start(stack)
            await IMAPService(backend, config).start(stack)
            self._ready.set()
            await self._stop.wait()


class _Answers(StreamRequestHandler):
    server: _ScriptedServer

    def handle(self) -> None:
        if self.server.drop:
            return  # closes at once, before the greeting
        self.wfile.write(b"* OK ready\r\n")
        for line in self.rfile:
            tag, _, rest = line.decode().partition(" ")
            command = rest.split(" ", 1)[0].upper().strip()
            if command == "CAPABILITY":
                self.wfile.write(b"* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n")
            elif command == "EXAMINE":
                self.wfile.write(b"* 0 EXISTS\r\n")
            elif command == "LOGOUT":
                self.wfile.write(f"* BYE\r\n{tag} OK bye\r\n".encode())
                return
            if command in ("CAPABILITY", "LOGIN", "EXAMINE"):
                self.wfile.write(f"{tag} OK done\r\n".encode())
            else:
                self.wfile.write(f"{tag} NO [UNAVAILABLE] {self.server.refusal}\r\n".encode())


class _ScriptedServer(ThreadingTCPServer):
    daemon_threads = True
    drop = False
    refusal = ""


class ScriptedImap(ServedOnThread):
    """Not an IMAP server: a few scripted lines for what pymap never does. It lets anyone log in
    and open a mailbox, then refuses every other command with `refusal`; with `drop`, it closes
    each connection before its greeting."""

    def __init__(self, *, refusal: str = "", drop: bool = False) -> None:
        server = _ScriptedServer(("127.0.0.1", 0), _Answers)
        server.refusal, server.drop = refusal, drop
        self.port = server.server_address[1]
        self._serve(server)
