"""Who a request to `orchestrator serve` is: an API key, or a JWT of an OpenID Connect issuer.

The credential comes as `x-api-key` (what langgraph-sdk sends for `api_key`)
or as `Authorization: Bearer ...`; `x-api-key` wins when both are sent (a proxy
in front may use `Authorization` for itself). A credential shaped like a JWT
(three base64url parts) is checked as one when `ORCHESTRATOR_OIDC_ISSUER` is
set; anything else is an API key, looked up on every request (one indexed
query: a key revoked by `orchestrator users revoke`, in another process, fails
the next request). Each identity then takes a token from its rate-limit bucket.

Every refusal is an `AuthenticationError` (401) whose one line says what was
wrong and never quotes the credential.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import cast

import httpx
import jwt
from jwt import PyJWK, PyJWKClient

from orchestrator.api.identity import Identity
from orchestrator.api.rate_limit import RateLimit
from orchestrator.errors import AuthenticationError
from orchestrator.settings import Settings, oidc_url_problem
from orchestrator.store.api_keys import ApiKeys, looks_like_a_key, user_id_problem
from orchestrator.store.engine import Database

log = logging.getLogger(__name__)

API_KEY_HEADER = "x-api-key"
NO_CREDENTIALS = "no credentials: send an API key as `x-api-key` or `Authorization: Bearer <key>`"
NOT_BEARER = "the Authorization header must be `Bearer <key or token>`"
MALFORMED_KEY = "malformed API key: `orchestrator users key NAME` issues one"
UNKNOWN_KEY = "unknown or revoked API key"
JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")

# Signatures by the issuer's public keys only: never `none`, never a shared secret (HS*),
# which a JWKS's public key must not be taken for.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
JWKS_LIFESPAN_SECONDS = 300.0  # the issuer's keys are fetched again after this
# An unknown `kid` fetches the keys again (the issuer rotated them), at most this often:
# tokens with made-up kids must not make the server hammer the issuer.
JWKS_COOLDOWN_SECONDS = 30.0
FETCH_TIMEOUT_SECONDS = 10.0
DISCOVERY_PATH = "/.well-known/openid-configuration"
KEYS_UNAVAILABLE = "the issuer's keys cannot be fetched now"

# What each of PyJWT's refusals means, first match wins (subclasses before their bases).
_JWT_REFUSALS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "the JWT has expired (exp)"),
    (jwt.ImmatureSignatureError, "the JWT is not valid yet (nbf)"),
    (jwt.InvalidAudienceError, "the JWT is not for this server (aud)"),
    (jwt.InvalidIssuerError, "the JWT is from another issuer (iss)"),
    (jwt.InvalidSignatureError, "the JWT's signature does not verify"),
    (jwt.InvalidAlgorithmError, "the JWT's algorithm is not its key's"),
    (jwt.DecodeError, "malformed JWT"),
    (jwt.PyJWKClientError, "the JWT's key (kid) is not one of the issuer's"),
)


class ServerAuthenticator:
    """The `Authenticator` of `orchestrator serve`: API keys, JWTs if configured, a rate limit."""

    def __init__(self, keys: ApiKeys, *, oidc: OidcVerifier | None = None, rate_limit: RateLimit | None = None) -> None:
        self.keys = keys
        self.oidc = oidc
        self.rate_limit = rate_limit

    @classmethod
    def from_settings(
        cls, settings: Settings, database: Database, *, clock: Callable[[], float] = time.monotonic
    ) -> ServerAuthenticator:
        """As `settings` say: OIDC if an issuer is set, the rate limit unless it is 0."""
        oidc = None
        if settings.oidc_issuer is not None and settings.oidc_audience is not None:
            oidc = OidcVerifier(
                settings.oidc_issuer,
                settings.oidc_audience,
                jwks_url=settings.oidc_jwks_url,
                user_claim=settings.oidc_user_claim,
            )
        per_minute = settings.server_requests_per_minute
        rate_limit = RateLimit(per_minute, clock=clock) if per_minute else None
        return cls(ApiKeys(database), oidc=oidc, rate_limit=rate_limit)

    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        """The request's identity, counted against its rate; else `AuthenticationError` or
        `RateLimitedError`."""
        identity = await self._identity(credential(headers))
        if self.rate_limit is not None:
            self.rate_limit.take(identity.key_id)
        return identity

    async def _identity(self, presented: str) -> Identity:
        if self.oidc is not None and JWT_SHAPE.fullmatch(presented):
            return await self.oidc.identity(presented)
        if not looks_like_a_key(presented):
            raise AuthenticationError(MALFORMED_KEY)
        owner = await self.keys.owner(presented)
        if owner is None:
            raise AuthenticationError(UNKNOWN_KEY)
        return Identity(user_id=owner.user_id, key_id=owner.key_id, via="api_key")


def credential(headers: Mapping[str, str]) -> str:
    """The credential a request presents: `x-api-key`, else the bearer token."""
    key = headers.get(API_KEY_HEADER, "").strip()
    if key:
        return key
    authorization = headers.get("authorization", "").strip()
    if not authorization:
        raise AuthenticationError(NO_CREDENTIALS)
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationError(NOT_BEARER)
    return token.strip()


class OidcVerifier:
    """Checks JWTs of one OpenID Connect issuer: signature by a key of its JWKS, `exp`, `nbf`,
    `iss` and `aud`; the user is the `user_claim` claim.

    The JWKS's address is `jwks_url`, else the `jwks_uri` of the issuer's
    openid-configuration, read at the first JWT. PyJWT's `PyJWKClient` keeps
    the keys `JWKS_LIFESPAN_SECONDS` and fetches them again for a `kid` it does
    not know, at most once every `cooldown_seconds`.
    """

    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        jwks_url: str | None = None,
        user_claim: str = "sub",
        cooldown_seconds: float = JWKS_COOLDOWN_SECONDS,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.user_claim = user_claim
        self._jwks_url = jwks_url
        self._cooldown = cooldown_seconds
        self._client: PyJWKClient | None = None
        self._opening = asyncio.Lock()

    async def identity(self, token: str) -> Identity:
        """The identity `token` proves, or `AuthenticationError` saying why not."""
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
        except jwt.DecodeError:
            raise AuthenticationError("malformed JWT") from None
        if algorithm not in ALGORITHMS:  # before any fetch: `none`, HS256 and the like
            raise AuthenticationError(f"JWT algorithm {str(algorithm)[:20]!r} is not accepted")
        key = await self._signing_key(token)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=list(ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.MissingRequiredClaimError as error:
            raise AuthenticationError(f"the JWT has no `{error.claim}` claim") from None
        except jwt.PyJWTError as error:
            raise AuthenticationError(_refusal(error)) from None
        return Identity(user_id=self._user(claims), key_id=_key_id(self.issuer, claims), via="jwt")

    async def _signing_key(self, token: str) -> PyJWK:
        """The issuer's key that `token`'s `kid` names (PyJWKClient fetches over urllib: a thread)."""
        client = await self._keys()
        try:
            return await asyncio.to_thread(client.get_signing_key_from_jwt, token)
        except (jwt.PyJWKClientConnectionError, jwt.PyJWKSetError, ValueError) as error:  # ValueError: not JSON
            log.warning("cannot use the keys of issuer %s: %s", self.issuer, error)
            raise AuthenticationError(KEYS_UNAVAILABLE) from None
        except jwt.PyJWTError as error:
            raise AuthenticationError(_refusal(error)) from None

    def _user(self, claims: Mapping[str, object]) -> str:
        user = claims.get(self.user_claim)
        if not isinstance(user, str):
            raise AuthenticationError(f"the JWT has no `{self.user_claim}` claim naming its user")
        if problem := user_id_problem(user):
            raise AuthenticationError(f"the JWT's `{self.user_claim}` cannot be a user: {problem}")
        return user

    async def _keys(self) -> PyJWKClient:
        async with self._opening:
            if self._client is None:
                url = self._jwks_url or await self._discovered_jwks_url()
                self._client = PyJWKClient(
                    url,
                    cache_jwk_set=True,
                    lifespan=JWKS_LIFESPAN_SECONDS,
                    timeout=FETCH_TIMEOUT_SECONDS,
                    cooldown_duration=self._cooldown,
                )
            return self._client

    async def _discovered_jwks_url(self) -> str:
        """The `jwks_uri` of the issuer's openid-configuration, which must name this issuer."""
        where = self.issuer.rstrip("/") + DISCOVERY_PATH
        try:
            async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS) as client:
                response = await client.get(where)
                response.raise_for_status()
                document = cast(object, response.json())
        except (httpx.HTTPError, ValueError) as error:
            log.warning("cannot read %s: %s", where, error)
            raise AuthenticationError("the issuer's openid-configuration cannot be read now") from None
        found = cast(dict[str, object], document) if isinstance(document, dict) else {}
        jwks_uri = found.get("jwks_uri")
        if found.get("issuer") != self.issuer or not isinstance(jwks_uri, str) or oidc_url_problem(jwks_uri):
            log.warning("%s does not name issuer %s and an https jwks_uri", where, self.issuer)
            raise AuthenticationError("the issuer's openid-configuration does not name it and its keys")
        return jwks_uri


def _refusal(error: Exception) -> str:
    for kind, said in _JWT_REFUSALS:
        if isinstance(error, kind):
            return said
    return f"invalid JWT ({type(error).__name__})"


def _key_id(issuer: str, claims: Mapping[str, object]) -> str:
    """What the rate limit and the access log name a JWT's caller by: issuer and subject."""
    return f"jwt:{issuer}:{claims.get('sub', '')}"
