"""Operating `orchestrator serve`: an access-log line per request, 429 with Retry-After, and a
shutdown that lets running turns finish and takes no new ones."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest
from langchain_core.tools import tool

from orchestrator.api.identity import Identity
from orchestrator.errors import RateLimitedError
from orchestrator.testing.scripted import call_tools
from tests.api.served import KeyTable, blocking_tool, served

KEYS = {"key-ann": "ann"}
HUMAN = {"messages": [{"role": "user", "content": "hello"}]}


async def test_each_request_is_one_access_log_line_with_its_ids(
    database_logins, tmp_path: Path, scripted, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="orchestrator.access")
    async with (
        served(database_logins, tmp_path, scripted("hi"), keys=KEYS) as server,
        httpx.AsyncClient(base_url=server.url, headers={"x-api-key": "key-ann"}) as raw,
    ):
        thread_id = (await raw.post("/threads", json={}, headers={"x-request-id": "req-1"})).json()["thread_id"]
        ran = await raw.post(f"/threads/{thread_id}/runs/wait", json={"assistant_id": "orchestrator", "input": HUMAN})
        refused = await raw.get("/threads/nope", headers={"x-api-key": "wrong"})

    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "orchestrator.access"]
    assert [(line["method"], line["status"]) for line in lines] == [("POST", 200), ("POST", 200), ("GET", 401)]
    made, run, unknown = lines
    assert made["request_id"] == "req-1" and made["user"] == "ann" and made["key_id"] == "test-ann"
    assert run["run_id"] == ran.headers["content-location"].rsplit("/", 1)[-1] and run["request_id"] == ran.headers["x-request-id"]
    assert unknown["user"] is None and refused.status_code == 401
    assert "key-ann" not in caplog.text and "wrong" not in caplog.text


class Limited(KeyTable):
    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        raise RateLimitedError("too many requests for key test-ann: 60 a minute", retry_after=2.4)


async def test_a_path_or_method_no_route_has_is_refused_as_json(database_logins, tmp_path: Path, scripted):
    async with (
        served(database_logins, tmp_path, scripted(), keys=KEYS) as server,
        httpx.AsyncClient(base_url=server.url, headers={"x-api-key": "key-ann"}) as raw,
    ):
        unknown = await raw.get("/no/such/path")
        wrong = await raw.delete("/assistants/search")

    assert unknown.status_code == 404 and unknown.json() == {"detail": "no GET /no/such/path here"}
    assert wrong.status_code == 405 and wrong.json() == {"detail": "no DELETE /assistants/search here"}


async def test_a_rate_limited_key_is_429_with_retry_after(database_logins, tmp_path: Path, scripted):
    async with served(database_logins, tmp_path, scripted(), keys=KEYS) as server:
        server.state.authenticator = Limited(KEYS)
        async with httpx.AsyncClient(base_url=server.url, headers={"x-api-key": "key-ann"}) as raw:
            limited = await raw.post("/threads", json={})

    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "2"
    assert "60 a minute" in limited.json()["detail"]


async def test_a_shutdown_finishes_running_turns_and_takes_no_new_run(database_logins, tmp_path: Path, scripted):
    wait_here, started, release = blocking_tool()
    model = scripted(call_tools(("wait_here", {"note": "z"})), "finished in time")
    async with served(database_logins, tmp_path, model, tools=[wait_here], keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        other = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
        await started.wait()
        board = server.state.board
        draining = asyncio.ensure_future(board.drain(grace_seconds=60))
        async with httpx.AsyncClient(base_url=server.url, headers={"x-api-key": "key-ann"}) as raw:
            ready = await raw.get("/ready")
            refused = await raw.post(f"/threads/{other}/runs", json={"assistant_id": "orchestrator", "input": HUMAN})
        release.set()
        stopped = await draining
        finished = await client.runs.get(thread_id, run["run_id"])

    assert ready.status_code == 503 and ready.json()["reason"] == "shutting down"
    assert refused.status_code == 503
    assert stopped == [] and finished["status"] == "success"


async def test_a_turn_still_running_after_the_grace_time_is_stopped_and_says_so(database_logins, tmp_path: Path, scripted):
    started = asyncio.Event()

    @tool
    async def wait_forever(note: str) -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return note

    model = scripted(call_tools(("wait_forever", {"note": "z"})))
    async with served(database_logins, tmp_path, model, tools=[wait_forever], keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
        await started.wait()
        stopped = await server.state.board.drain(grace_seconds=0)
        ended = await client.runs.get(thread_id, run["run_id"])
        state = await client.threads.get_state(thread_id)

    assert stopped == [run["run_id"]]
    assert ended["status"] == "interrupted"
    assert state["next"] == [] and state["values"]["messages"][0]["content"] == "hello"


async def test_a_runs_spans_carry_the_http_requests_trace_context(
    database_logins, tmp_path: Path, scripted, monkeypatch: pytest.MonkeyPatch
):
    from orchestrator.tracing import provider
    from tests.otlp_receiver import Receiver

    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with Receiver() as receiver:
        provider.shutdown()
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        try:
            async with served(database_logins, tmp_path, scripted("traced"), keys=KEYS) as server:
                client = server.client("key-ann")
                thread_id = (await client.threads.create())["thread_id"]
                await client.runs.wait(
                    thread_id, "orchestrator", input=HUMAN,
                    headers={"traceparent": f"00-{trace_id}-{parent_id}-01"},
                )
            provider.flush()
        finally:
            provider.shutdown()

    (request,) = [s for s in receiver.named("POST /threads/") if s.name.endswith("/runs/wait")]
    (turn,) = receiver.named("turn")
    assert request.trace_id == trace_id and request.parent_id == parent_id
    assert request in receiver.ancestors(turn)


class Away(KeyTable):
    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        from orchestrator.errors import DatabaseUnavailableError

        raise DatabaseUnavailableError("the database at db.example.com does not answer")


async def test_keys_that_cannot_be_looked_up_are_503_not_401(database_logins, tmp_path: Path, scripted):
    async with served(database_logins, tmp_path, scripted(), keys=KEYS) as server:
        server.state.authenticator = Away(KEYS)
        async with httpx.AsyncClient(base_url=server.url, headers={"x-api-key": "key-ann"}) as raw:
            away = await raw.post("/threads", json={})

    assert away.status_code == 503 and "does not answer" in away.json()["detail"]


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))
    return cert, key_file


async def test_with_a_certificate_it_serves_https(database_logins, tmp_path: Path, scripted):
    import ssl

    from orchestrator.api.server import Listen

    cert, key = self_signed(tmp_path)
    listen = Listen(port=0, tls_cert=cert, tls_key=key, grace_seconds=5)
    async with served(database_logins, tmp_path, scripted(), keys=KEYS, listen=listen) as server:
        trusted = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(base_url=server.url, verify=trusted, headers={"x-api-key": "key-ann"}) as raw:
            made = await raw.post("/threads", json={})
        async with httpx.AsyncClient(base_url=server.url.replace("https:", "http:")) as plain:
            with pytest.raises(httpx.HTTPError):
                await plain.get("/ok")

    assert server.url.startswith("https://127.0.0.1:")
    assert made.status_code == 200


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--tls-cert", "missing.pem", "--tls-key", "key.pem"], "missing.pem is not a file"),
        (["--tls-cert", "key.pem", "--tls-key", "cert.pem"], "are not a PEM certificate and its private key"),
        (["--port", "99999"], "65535"),
    ],
)
def test_bad_tls_files_or_port_are_refused_before_it_serves(tmp_path: Path, args: list[str], said: str):
    from tests.helpers import run_cli

    self_signed(tmp_path)
    refused = run_cli("serve", *args, cwd=tmp_path)

    assert refused.returncode == 2
    assert said in " ".join(refused.stderr.replace("│", " ").split()), refused.stderr  # rich's box
    assert "serving" not in refused.stderr and "internal error" not in refused.stderr
