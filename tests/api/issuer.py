"""A local OpenID Connect issuer on 127.0.0.1: its openid-configuration, its JWKS, tokens it signs."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from jwt.algorithms import RSAAlgorithm

from tests.server_thread import ServedOnThread, send_json

AUDIENCE = "orchestrator-server"


def rsa_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Issuer(ServedOnThread):
    """Serves /.well-known/openid-configuration and /jwks (the public halves of `keys`, by kid);
    counts the JWKS's fetches. `sign` makes a token with one of its keys."""

    def __init__(self) -> None:
        self.keys: dict[str, RSAPrivateKey] = {"k1": rsa_key()}
        self.jwks_fetches = 0
        self.jwks_text: str | None = None  # served in place of the JWKS when set
        self.jwks_uri: str | None = None  # what the openid-configuration names, if not its /jwks
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    send_json(self, 200, {"issuer": served.url, "jwks_uri": served.jwks_uri or f"{served.url}/jwks"})
                elif self.path == "/jwks":
                    served.jwks_fetches += 1
                    if served.jwks_text is None:
                        send_json(self, 200, served.jwks())
                    else:
                        body = served.jwks_text.encode()
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                else:
                    send_json(self, 404, None)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._serve(server)
        self.url = f"http://127.0.0.1:{server.server_port}"

    def jwks(self) -> dict[str, object]:
        found: list[dict[str, object]] = []
        for kid, key in self.keys.items():
            public = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
            found.append({**public, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": found}

    def claims(self, **changes: object) -> dict[str, object]:
        """Valid claims for `alice` for ten minutes, with `changes` (None: leave the claim out)."""
        now = int(time.time())
        claims: dict[str, object] = {
            "iss": self.url, "aud": AUDIENCE, "sub": "alice", "iat": now, "nbf": now - 5, "exp": now + 600
        }
        claims.update(changes)
        return {name: value for name, value in claims.items() if value is not None}

    def sign(
        self, claims: Mapping[str, object], *, kid: str = "k1", key: RSAPrivateKey | None = None
    ) -> str:
        return jwt.encode(dict(claims), key or self.keys[kid], algorithm="RS256", headers={"kid": kid})
