"""Files in S3 or an S3-compatible store: list, upload, download, delete (boto3)."""

from __future__ import annotations

import base64
import binascii
import mimetypes

from botocore.client import BaseClient
from pydantic import BaseModel, Field, PrivateAttr, model_validator

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .s3_access import S3Settings, client_for, failures, local_path, location, settings_key

BUCKET = "The bucket; the configured one when left out."
KEY = "The object's key (its path in the bucket), or a whole s3://bucket/key."


class ListFiles(BaseModel):
    bucket: str | None = Field(default=None, description=BUCKET)
    prefix: str = Field(default="", description="Only keys starting with this, e.g. reports/.")
    max_keys: int = Field(default=100, ge=1, le=1000, description="List at most this many.")


class Upload(BaseModel):
    key: str = Field(min_length=1, description=KEY)
    bucket: str | None = Field(default=None, description=BUCKET)
    content: str | None = Field(default=None, description="The file's text.")
    content_base64: str | None = Field(default=None, description="The file's bytes, base64.")
    file: str | None = Field(default=None, description="A local file, relative to files_dir.")
    content_type: str | None = Field(
        default=None, description="e.g. text/csv; guessed if left out."
    )
    metadata: dict[str, str] = Field(default_factory=dict, description="User metadata to store.")

    @model_validator(mode="after")
    def _one_source(self) -> Upload:
        given = [self.content is not None, self.content_base64 is not None, self.file is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of content, content_base64 and file")
        return self


class Download(BaseModel):
    key: str = Field(min_length=1, description=KEY)
    bucket: str | None = Field(default=None, description=BUCKET)
    save_as: str | None = Field(
        default=None, description="Save it as this local file (relative to files_dir) instead."
    )


class Delete(BaseModel):
    key: str = Field(min_length=1, description=KEY)
    bucket: str | None = Field(default=None, description=BUCKET)


class S3Agent(Tool):
    """Lists, uploads, downloads and deletes files in the configured S3 store."""

    settings_model = S3Settings

    # A client per settings: building one loads botocore's service model (a large JSON file).
    _clients: dict[str, BaseClient] = PrivateAttr(default_factory=dict)

    @action(ListFiles)
    def list(self, params: ListFiles, request: ToolRequest) -> ToolResult:
        """List the files of a bucket, optionally under a prefix."""
        settings = self._settings()
        bucket, _ = location(params.bucket, "", default=settings.bucket)
        with failures(bucket=bucket):
            page = self._client(settings).list_objects_v2(
                Bucket=bucket, Prefix=params.prefix, MaxKeys=params.max_keys
            )
        files = [
            {
                "key": item["Key"],
                "size_bytes": item["Size"],
                "last_modified": item["LastModified"].isoformat(),
                "etag": item.get("ETag", "").strip('"'),
            }
            for item in page.get("Contents", [])
        ]
        truncated = bool(page.get("IsTruncated"))
        lines = [f"{f['key']} ({_size(f['size_bytes'])})" for f in files]
        head = f"{len(files)} file{'s' if len(files) != 1 else ''} in s3://{bucket}/{params.prefix}"
        more = "; more exist: narrow the prefix" if truncated else ""
        return request.result(
            "\n".join([head + more, *lines]),
            data={
                "bucket": bucket,
                "prefix": params.prefix,
                "files": files,
                "count": len(files),
                "truncated": truncated,
            },
            metadata={"provider": "s3"},
        )

    @action(Upload)
    def upload(self, params: Upload, request: ToolRequest) -> ToolResult:
        """Upload a file: its text, its bytes in base64, or a local file from files_dir."""
        settings = self._settings()
        bucket, key = location(params.bucket, params.key, default=settings.bucket)
        body = _body(params, settings)
        content_type = (
            params.content_type
            or mimetypes.guess_type(key)[0]
            or (
                "text/plain; charset=utf-8"
                if params.content is not None
                else "application/octet-stream"
            )
        )
        client = self._client(settings)
        with failures(bucket=bucket, key=key):
            put = client.put_object(
                Bucket=bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                Metadata=params.metadata,
            )
        url = f"{client.meta.endpoint_url.rstrip('/')}/{bucket}/{key}"
        return request.result(
            f"Uploaded s3://{bucket}/{key} ({_size(len(body))}).",
            data={
                "bucket": bucket,
                "key": key,
                "url": url,
                "size_bytes": len(body),
                "etag": put.get("ETag", "").strip('"'),
                "content_type": content_type,
            },
            metadata={"provider": "s3"},
        )

    @action(Download)
    def download(self, params: Download, request: ToolRequest) -> ToolResult:
        """Download a file: its text (or base64 bytes), or saved as a local file in files_dir."""
        settings = self._settings()
        bucket, key = location(params.bucket, params.key, default=settings.bucket)
        client = self._client(settings)
        if params.save_as is not None:
            target = local_path(settings, params.save_as)
            target.parent.mkdir(parents=True, exist_ok=True)
            with failures(bucket=bucket, key=key):
                client.download_file(bucket, key, str(target))
            size = target.stat().st_size
            return request.result(
                f"Saved s3://{bucket}/{key} as {target} ({_size(size)}).",
                data={"bucket": bucket, "key": key, "saved_as": str(target), "size_bytes": size},
                metadata={"provider": "s3"},
            )
        with failures(bucket=bucket, key=key):
            head = client.head_object(Bucket=bucket, Key=key)
            if head["ContentLength"] > settings.max_download_bytes:
                raise ToolError(
                    f"s3://{bucket}/{key} is {_size(head['ContentLength'])}, over the limit of "
                    f"{_size(settings.max_download_bytes)}: save it to a local file (save_as)",
                    code="too_large",
                    recoverable=False,
                )
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        data = {
            "bucket": bucket,
            "key": key,
            "size_bytes": len(body),
            "content_type": head.get("ContentType"),
            "last_modified": head["LastModified"].isoformat(),
            **_content(body),
        }
        return request.result(
            f"Downloaded s3://{bucket}/{key} ({_size(len(body))}, {head.get('ContentType')}).",
            data=data,
            metadata={"provider": "s3"},
        )

    @action(Delete, sensitive=True)
    def delete(self, params: Delete, request: ToolRequest) -> ToolResult:
        """Delete a file from a bucket."""
        settings = self._settings()
        bucket, key = location(params.bucket, params.key, default=settings.bucket)
        client = self._client(settings)
        with failures(bucket=bucket, key=key):
            client.head_object(Bucket=bucket, Key=key)  # S3 deletes a missing key "successfully"
            client.delete_object(Bucket=bucket, Key=key)
        return request.result(
            f"Deleted s3://{bucket}/{key}.",
            data={"bucket": bucket, "key": key, "deleted": True},
            metadata={"provider": "s3"},
        )

    def _settings(self) -> S3Settings:
        return self.settings(S3Settings)

    def _client(self, settings: S3Settings) -> BaseClient:
        key = settings_key(settings)
        if key not in self._clients:
            self._clients[key] = client_for(settings)
        return self._clients[key]


def _body(params: Upload, settings: S3Settings) -> bytes:
    if params.content is not None:
        return params.content.encode()
    if params.content_base64 is not None:
        try:
            return base64.b64decode(params.content_base64, validate=True)
        except binascii.Error:
            raise InvalidToolArgumentsError("content_base64 is not valid base64") from None
    path = local_path(settings, params.file or "")
    if not path.is_file():
        raise ToolError(
            f"There is no file {params.file!r} in files_dir", code="not_found", recoverable=False
        )
    return path.read_bytes()


def _content(body: bytes) -> dict[str, str]:
    try:
        return {"content": body.decode()}
    except UnicodeDecodeError:
        return {"content_base64": base64.b64encode(body).decode("ascii")}


def _size(count: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
