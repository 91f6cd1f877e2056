"""The S3 client the settings describe, where an object is, and S3's errors said for the model."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import boto3.session
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
)
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from orchestrator.errors import InvalidToolArgumentsError, ToolError, TransientToolError
from orchestrator.tools import ToolSettings

NOT_FOUND = frozenset({"NoSuchBucket", "NoSuchKey", "NotFound", "404"})
BAD_CREDENTIALS = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AuthFailure"}
)
REFUSED = frozenset({"AccessDenied", "AllAccessDisabled", "AccountProblem", "403"})
BUSY = frozenset(
    {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "503", "500"}
)


class S3Settings(ToolSettings):
    """The store: `config` of tool_config.yaml, overridden by S3_AGENT_* variables."""

    model_config = SettingsConfigDict(env_prefix="S3_AGENT_")

    endpoint_url: str | None = None
    region: str = "us-east-1"
    bucket: str | None = None
    addressing_style: Literal["auto", "path", "virtual"] = "auto"
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    max_download_bytes: int = Field(default=10_000_000, ge=1)
    files_dir: Path | None = None
    max_attempts: int = Field(default=3, ge=1, le=10)
    timeout_seconds: float = Field(default=30, gt=0)

    @field_validator("endpoint_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        # botocore would say only "ValueError: Invalid endpoint" at the first call.
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not an http(s) URL of an S3 server, e.g. http://127.0.0.1:9000"
            )
        return value.strip()


def client_for(settings: S3Settings) -> BaseClient:
    """A boto3 S3 client for the configured endpoint, with the configured credentials if any."""
    config = Config(
        region_name=settings.region,
        s3={"addressing_style": settings.addressing_style},
        # SigV4: presigned links valid up to 7 days, and what every region accepts.
        signature_version="s3v4",
        retries={"total_max_attempts": settings.max_attempts, "mode": "standard"},
        connect_timeout=settings.timeout_seconds,
        read_timeout=settings.timeout_seconds,
    )
    secret = settings.secret_access_key.get_secret_value() if settings.secret_access_key else None
    token = settings.session_token.get_secret_value() if settings.session_token else None
    return boto3.session.Session().client(
        "s3",
        endpoint_url=settings.endpoint_url,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=config,
    )


def exists(client: BaseClient, bucket: str, key: str) -> bool:
    """Whether s3://bucket/key is there (HEAD cannot tell a missing bucket: both are 404)."""
    try:
        client.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if str(error.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def already_there(what: str) -> ToolError:
    """The refusal to replace `what` without `overwrite: true`."""
    return ToolError(
        f"{what} already exists: it is not replaced unless you say so (overwrite: true)",
        code="already_exists",
        recoverable=False,
    )


def settings_key(settings: S3Settings) -> str:
    """A digest of everything a client is built from, secrets included (their values unseen)."""
    secrets = [
        s.get_secret_value() if s else ""
        for s in (settings.secret_access_key, settings.session_token)
    ]
    text = "\0".join([settings.model_dump_json(), *secrets])
    return hashlib.sha256(text.encode()).hexdigest()


def location(bucket: str | None, key: str, *, default: str | None) -> tuple[str, str]:
    """(bucket, key) from the parameters: `key` may be a whole `s3://bucket/key`."""
    if key.startswith("s3://"):
        named, _, key = key[len("s3://") :].partition("/")
        bucket = bucket or named
    chosen = bucket or default
    if not chosen:
        raise InvalidToolArgumentsError(
            "Which bucket? Name it (bucket, or s3://bucket/key); s3_agent has no default bucket "
            "(S3_AGENT_BUCKET)"
        )
    return chosen, key


def local_path(settings: S3Settings, name: str) -> Path:
    """`name` inside files_dir, the only local folder the agent reads or writes."""
    if settings.files_dir is None:
        raise ToolError(
            "s3_agent has no files_dir: it reads and writes no local files "
            f"({settings.how_to_set_these('files_dir')})",
            code="not_configured",
            recoverable=False,
        )
    root = settings.files_dir.expanduser().resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root) or path == root:
        raise InvalidToolArgumentsError(f"{name!r} is not a file inside files_dir ({root})")
    return path


@contextmanager
def failures(*, bucket: str | None = None, key: str | None = None) -> Iterator[None]:
    """S3's errors as ToolErrors: not found, bad credentials, refused, unreachable."""
    what = f"s3://{bucket}/{key}" if bucket and key else f"bucket {bucket}" if bucket else "S3"
    try:
        yield
    except ClientError as error:
        raise _client_error(error, what=what) from None
    except (NoCredentialsError, PartialCredentialsError) as error:
        raise ToolError(
            f"s3_agent has no credentials: {error} (set S3_AGENT_ACCESS_KEY_ID and "
            "S3_AGENT_SECRET_ACCESS_KEY)",
            code="not_configured",
            recoverable=False,
        ) from None
    except EndpointConnectionError as error:
        raise ToolError(
            f"Could not reach the S3 server: {error}", code="server_unreachable"
        ) from None
    except BotoCoreError as error:
        raise ToolError(f"S3 call failed: {error}", code="s3_error") from None


def _client_error(error: ClientError, *, what: str) -> ToolError:
    details = error.response.get("Error", {})
    code = str(details.get("Code", ""))
    message = details.get("Message") or code
    if code in NOT_FOUND:
        return ToolError(f"{what} does not exist ({message})", code="not_found", recoverable=False)
    if code in BAD_CREDENTIALS:
        return ToolError(
            f"S3 refused the credentials: {message}", code="bad_credentials", recoverable=False
        )
    if code in REFUSED:
        return ToolError(
            f"S3 refused access to {what}: {message}", code="refused", recoverable=False
        )
    if code in BUSY:
        return TransientToolError(f"S3 could not serve {what} now: {message}")
    return ToolError(f"S3 refused the call on {what}: {code}: {message}", code="s3_error")
