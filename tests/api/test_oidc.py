"""JWTs of an OpenID Connect issuer: a local one on 127.0.0.1 signs them and serves its keys."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace

import jwt
import jwt.api_jwk
import jwt.jwk_set_cache
import jwt.jwks_client
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from orchestrator.api.auth import OidcVerifier, ServerAuthenticator
from orchestrator.api.identity import Identity
from orchestrator.errors import AuthenticationError, ConfigError
from orchestrator.settings import load_settings
from orchestrator.store.api_keys import ApiKeys
from orchestrator.store.engine import Database
from tests.api.issuer import AUDIENCE, Issuer, rsa_key
from tests.remote_config_server import free_port

# No database is reached: a JWT never goes to the key lookup (this address refuses at once).
NO_DATABASE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with Issuer() as served:
        yield served


@pytest.fixture
async def keys_unused() -> AsyncIterator[ApiKeys]:
    database = Database(NO_DATABASE)
    yield ApiKeys(database)
    await database.close()


def authenticator(issuer: Issuer, keys: ApiKeys, **settings: object) -> ServerAuthenticator:
    values = {"oidc_issuer": issuer.url, "oidc_audience": AUDIENCE, **settings}
    return ServerAuthenticator.from_settings(load_settings(**values), keys.database)


async def refusal(server: ServerAuthenticator, token: str) -> str:
    with pytest.raises(AuthenticationError) as refused:
        await server.authenticate({"authorization": f"Bearer {token}"})
    message = str(refused.value)
    assert not [part for part in token.split(".") if part and part in message]
    return message


async def test_a_valid_token_is_its_subject_as_bearer_and_as_x_api_key(issuer: Issuer, keys_unused: ApiKeys):
    server = authenticator(issuer, keys_unused)
    token = issuer.sign(issuer.claims())

    as_bearer = await server.authenticate({"authorization": f"Bearer {token}"})
    as_sdk = await server.authenticate({"x-api-key": token})

    assert as_bearer == as_sdk == Identity(user_id="alice", key_id=f"jwt:{issuer.url}:alice", via="jwt")
    assert issuer.jwks_fetches == 1  # the keys are kept, not fetched per request


async def test_the_user_claim_setting_names_the_user(issuer: Issuer, keys_unused: ApiKeys):
    server = authenticator(issuer, keys_unused, oidc_user_claim="email")
    identity = await server.authenticate(
        {"authorization": f"Bearer {issuer.sign(issuer.claims(email='alice@example.org'))}"}
    )
    assert identity.user_id == "alice@example.org"
    assert "no `email` claim" in await refusal(server, issuer.sign(issuer.claims()))
    assert "cannot be a user" in await refusal(server, issuer.sign(issuer.claims(email=" \t")))


def b64(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode()


def unsigned(claims: dict[str, object]) -> str:
    header = {"alg": "none", "typ": "JWT", "kid": "k1"}
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}."


def hs256_with_the_public_key(issuer: Issuer, claims: dict[str, object]) -> str:
    """The old confusion attack: HMAC keyed with the public key a verifier holds (PyJWT will not
    make such a token, so it is made by hand)."""
    header = {"alg": "HS256", "typ": "JWT", "kid": "k1"}
    signed = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    public = issuer.keys["k1"].public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    return f"{signed}.{b64(hmac.new(public, signed.encode(), hashlib.sha256).digest())}"


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("forged", "signature does not verify"),
        ("expired", "has expired"),
        ("not-yet", "not valid yet"),
        ("audience", "not for this server"),
        ("issuer", "from another issuer"),
        ("no-exp", "no `exp` claim"),
        ("no-aud", "no `aud` claim"),
        ("no-iss", "no `iss` claim"),
        ("alg-none", "'none' is not accepted"),
        ("hs256-with-the-public-key", "'HS256' is not accepted"),
        ("unknown-kid", "not one of the issuer's"),
        ("garbage", "malformed JWT"),
    ],
)
async def test_a_token_failing_a_check_is_refused(issuer: Issuer, keys_unused: ApiKeys, case: str, said: str):
    claims = issuer.claims()
    tokens = {
        "forged": lambda: issuer.sign(claims, key=rsa_key()),  # the kid of the issuer's, another key
        "expired": lambda: issuer.sign(issuer.claims(exp=int(time.time()) - 3600)),
        "not-yet": lambda: issuer.sign(issuer.claims(nbf=int(time.time()) + 600)),
        "audience": lambda: issuer.sign(issuer.claims(aud="another-api")),
        "issuer": lambda: issuer.sign(issuer.claims(iss="https://elsewhere.example")),
        "no-exp": lambda: issuer.sign(issuer.claims(exp=None)),
        "no-aud": lambda: issuer.sign(issuer.claims(aud=None)),
        "no-iss": lambda: issuer.sign(issuer.claims(iss=None)),
        "alg-none": lambda: unsigned(claims),
        "hs256-with-the-public-key": lambda: hs256_with_the_public_key(issuer, claims),
        "unknown-kid": lambda: issuer.sign(claims, kid="k9", key=rsa_key()),
        "garbage": lambda: "eyJub3QiOiJqc29u.eyJ9.c2ln",
    }
    assert said in await refusal(authenticator(issuer, keys_unused), tokens[case]())


async def test_a_key_of_another_type_under_a_known_kid_is_refused(issuer: Issuer, keys_unused: ApiKeys):
    token = jwt.encode(issuer.claims(), ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": "k1"})
    assert "algorithm is not its key's" in await refusal(authenticator(issuer, keys_unused), token)


async def test_a_new_key_of_the_issuer_is_fetched_on_its_first_token(issuer: Issuer, keys_unused: ApiKeys):
    verifier = OidcVerifier(issuer.url, AUDIENCE, cooldown_seconds=0)
    server = ServerAuthenticator(keys_unused, oidc=verifier)
    await server.authenticate({"x-api-key": issuer.sign(issuer.claims())})
    issuer.keys["k2"] = rsa_key()  # the issuer rotates its keys

    identity = await server.authenticate({"x-api-key": issuer.sign(issuer.claims(sub="bob"), kid="k2")})

    assert identity.user_id == "bob" and issuer.jwks_fetches == 2


async def test_the_keys_are_kept_five_minutes(issuer: Issuer, keys_unused: ApiKeys, monkeypatch: pytest.MonkeyPatch):
    clock = [1000.0]
    pyjwt_time = SimpleNamespace(monotonic=lambda: clock[0], time=time.time)
    for module in (jwt.api_jwk, jwt.jwk_set_cache, jwt.jwks_client):  # the JWKS cache's clock alone
        monkeypatch.setattr(module, "time", pyjwt_time)
    server = authenticator(issuer, keys_unused)
    token = {"x-api-key": issuer.sign(issuer.claims())}

    await server.authenticate(token)
    clock[0] += 299
    await server.authenticate(token)
    assert issuer.jwks_fetches == 1
    clock[0] += 2
    await server.authenticate(token)
    assert issuer.jwks_fetches == 2


async def test_unknown_kids_fetch_the_keys_at_most_once_per_cooldown(issuer: Issuer, keys_unused: ApiKeys):
    server = authenticator(issuer, keys_unused)  # the default cooldown: 30 seconds
    await server.authenticate({"x-api-key": issuer.sign(issuer.claims())})
    for n in range(5):
        await refusal(server, issuer.sign(issuer.claims(), kid=f"made-up-{n}", key=rsa_key()))
    assert issuer.jwks_fetches == 1


async def test_the_jwks_url_setting_is_used_instead_of_discovery(issuer: Issuer, keys_unused: ApiKeys):
    with Issuer() as other:  # its keys, under the issuer's name
        server = authenticator(issuer, keys_unused, oidc_jwks_url=f"{other.url}/jwks")
        accepted = await server.authenticate({"x-api-key": other.sign(issuer.claims())})
        assert accepted.user_id == "alice"
        assert "signature does not verify" in await refusal(server, issuer.sign(issuer.claims()))
        assert (other.jwks_fetches, issuer.jwks_fetches) == (1, 0)


async def test_a_discovery_document_of_another_issuer_is_refused(issuer: Issuer, keys_unused: ApiKeys):
    server = ServerAuthenticator(keys_unused, oidc=OidcVerifier(f"{issuer.url}/", AUDIENCE))
    assert "does not name it" in await refusal(server, issuer.sign(issuer.claims(iss=f"{issuer.url}/")))


async def test_an_issuer_out_of_reach_fails_its_tokens_and_api_keys_still_decide(
    issuer: Issuer, keys_unused: ApiKeys
):
    token = issuer.sign(issuer.claims())
    closed = f"http://127.0.0.1:{free_port()}"
    no_keys = authenticator(issuer, keys_unused, oidc_jwks_url=f"{closed}/jwks")
    no_discovery = ServerAuthenticator(keys_unused, oidc=OidcVerifier(closed, AUDIENCE))

    assert "the issuer's keys cannot be fetched now" in await refusal(no_keys, token)
    assert "openid-configuration cannot be read now" in await refusal(no_discovery, token)


@pytest.mark.parametrize("served", ["<html>busy</html>", '{"keys": []}', '{"keys": [{"kty": "RSA"}]}'])
async def test_a_jwks_that_is_not_one_fails_its_tokens_in_one_line(issuer: Issuer, keys_unused: ApiKeys, served: str):
    issuer.jwks_text = served
    assert "the issuer's keys cannot be fetched now" in await refusal(
        authenticator(issuer, keys_unused), issuer.sign(issuer.claims())
    )


async def test_api_keys_still_decide_while_the_issuer_is_out_of_reach(database: Database):
    keys = ApiKeys(database)
    await keys.add_user("frank")
    key = (await keys.issue("frank")).key
    closed = f"http://127.0.0.1:{free_port()}"
    server = ServerAuthenticator.from_settings(
        load_settings(oidc_issuer=closed, oidc_audience=AUDIENCE), database
    )
    assert (await server.authenticate({"x-api-key": key})).user_id == "frank"


async def test_a_discovered_jwks_uri_that_is_not_https_is_refused(issuer: Issuer, keys_unused: ApiKeys):
    issuer.jwks_uri = "file:///etc/passwd"
    assert "does not name it and its keys" in await refusal(authenticator(issuer, keys_unused), issuer.sign(issuer.claims()))
    issuer.jwks_uri = "http://login.example.org/jwks"
    assert "does not name it and its keys" in await refusal(authenticator(issuer, keys_unused), issuer.sign(issuer.claims()))


def test_oidc_settings_are_whole_and_https():
    with pytest.raises(ConfigError, match="ORCHESTRATOR_OIDC_ISSUER needs ORCHESTRATOR_OIDC_AUDIENCE"):
        load_settings(oidc_issuer="https://login.example.org")
    with pytest.raises(ConfigError, match="ORCHESTRATOR_OIDC_AUDIENCE needs ORCHESTRATOR_OIDC_ISSUER"):
        load_settings(oidc_audience="api")
    with pytest.raises(ConfigError, match="use https://"):
        load_settings(oidc_issuer="http://login.example.org", oidc_audience="api")
    settings = load_settings(oidc_issuer="https://login.example.org/", oidc_audience="api")
    assert settings.oidc_issuer == "https://login.example.org/"  # as it is: `iss` must match it exactly
