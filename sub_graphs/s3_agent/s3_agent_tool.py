"""Files in S3 or an S3-compatible store: list, read, write, copy, move, share, delete (boto3)."""

from __future__ import annotations

import base64
import binascii
import mimetypes
from datetime import UTC, datetime, timedelta

from botocore.client import BaseClient
from pydantic import PrivateAttr

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .s3_access import (
    S3Settings,
    already_there,
    client_for,
    exists,
    failures,
    local_path,
    location,
    settings_key,
)
from .s3_content import content_of
from .s3_params import Copy, Delete, Download, Head, ListFiles, Presign, Upload


class S3Agent(Tool):
    """Lists, uploads, downloads, copies, moves, shares and deletes files in an S3 store."""

    settings_model = S3Settings

    # A client per settings: building one loads botocore's service model (a large JSON file).
    _clients: dict[str, BaseClient] = PrivateAttr(default_factory=dict)

    @action(ListFiles)
    def list(self, params: ListFiles, request: ToolRequest) -> ToolResult:
        """List a bucket's files, a page at a time, optionally under a prefix or one level."""
        settings = self._settings()
        bucket, _ = location(params.bucket, "", default=settings.bucket)
        options: dict[str, str | int] = {
            "Bucket": bucket,
            "Prefix": params.prefix,
            "MaxKeys": params.max_keys,
        }
        if params.delimiter:
            options["Delimiter"] = params.delimiter
        if params.continuation_token:
            options["ContinuationToken"] = params.continuation_token
        with failures(bucket=bucket):
            page = self._client(settings).list_objects_v2(**options)
        files = [
            {
                "key": item["Key"],
                "size_bytes": item["Size"],
                "last_modified": item["LastModified"].isoformat(),
                "etag": item.get("ETag", "").strip('"'),
            }
            for item in page.get("Contents", [])
        ]
        folders = [str(item["Prefix"]) for item in page.get("CommonPrefixes", [])]
        next_token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        head = f"{len(files)} file{'s' if len(files) != 1 else ''} in s3://{bucket}/{params.prefix}"
        if params.delimiter:
            head += f" and {len(folders)} folder{'s' if len(folders) != 1 else ''}"
        lines = [
            *(f"{folder} (folder)" for folder in folders),
            *(f"{f['key']} ({_size(f['size_bytes'])})" for f in files),
        ]
        if next_token:
            head += "; more exist"
            lines.append(f"More: continue with continuation_token {next_token}")
        return request.result(
            "\n".join([head, *lines]),
            data={
                "bucket": bucket,
                "prefix": params.prefix,
                "files": files,
                "folders": folders,
                "count": len(files),
                "truncated": next_token is not None,
                "next_token": next_token,
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
            if target.exists() and not params.overwrite:
                raise already_there(f"The local file {target}")
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
            **content_of(body, head.get("ContentType")),
        }
        binary = ": bytes, in content_base64" if "content_base64" in data else ""
        return request.result(
            f"Downloaded s3://{bucket}/{key} ({_size(len(body))}, {head.get('ContentType')}){binary}.",
            data=data,
            metadata={"provider": "s3"},
        )

    @action(Head)
    def head(self, params: Head, request: ToolRequest) -> ToolResult:
        """A file's details without its content: size, type, date, ETag, user metadata."""
        settings = self._settings()
        bucket, key = location(params.bucket, params.key, default=settings.bucket)
        with failures(bucket=bucket, key=key):
            head = self._client(settings).head_object(Bucket=bucket, Key=key)
        data = {
            "bucket": bucket,
            "key": key,
            "size_bytes": head["ContentLength"],
            "content_type": head.get("ContentType"),
            "last_modified": head["LastModified"].isoformat(),
            "etag": head.get("ETag", "").strip('"'),
            "metadata": head.get("Metadata", {}),
            "storage_class": head.get("StorageClass", "STANDARD"),
            "version_id": head.get("VersionId"),
        }
        return request.result(
            f"s3://{bucket}/{key}: {_size(data['size_bytes'])}, {data['content_type']}, "
            f"modified {data['last_modified']}.",
            data=data,
            metadata={"provider": "s3"},
        )

    @action(Presign)
    def presign(self, params: Presign, request: ToolRequest) -> ToolResult:
        """A link anyone can download a file with, until it expires (no credentials needed)."""
        settings = self._settings()
        bucket, key = location(params.bucket, params.key, default=settings.bucket)
        client = self._client(settings)
        with failures(bucket=bucket, key=key):
            client.head_object(Bucket=bucket, Key=key)  # no link to nothing
            url = client.generate_presigned_url(
                "get_object",
                Params={"Bucket": bucket, "Key": key},
                ExpiresIn=params.expires_seconds,
            )
        until = datetime.now(UTC) + timedelta(seconds=params.expires_seconds)
        return request.result(
            f"A link to s3://{bucket}/{key}, valid until {until:%Y-%m-%d %H:%M} UTC: {url}",
            data={
                "bucket": bucket,
                "key": key,
                "url": url,
                "method": "GET",
                "expires_seconds": params.expires_seconds,
                "expires_at": until.isoformat(timespec="seconds"),
            },
            metadata={"provider": "s3"},
        )

    @action(Copy)
    def copy(  # pyright: ignore[reportIncompatibleMethodOverride]  # the action's name; BaseModel.copy is pydantic's deprecated v1 API
        self, params: Copy, request: ToolRequest
    ) -> ToolResult:
        """Copy a file to another key or bucket, its type and metadata with it."""
        return self._copied(params, request, move=False)

    @action(Copy)
    def move(self, params: Copy, request: ToolRequest) -> ToolResult:
        """Move (rename) a file: copied to the new key or bucket, then removed from the old."""
        return self._copied(params, request, move=True)

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

    def _copied(self, params: Copy, request: ToolRequest, *, move: bool) -> ToolResult:
        settings = self._settings()
        bucket, key = location(params.bucket, params.key, default=settings.bucket)
        to_bucket, to_key = location(params.to_bucket, params.to_key, default=bucket)
        if (bucket, key) == (to_bucket, to_key):
            raise InvalidToolArgumentsError(f"s3://{bucket}/{key} is both source and destination")
        client = self._client(settings)
        with failures(bucket=bucket, key=key):
            client.head_object(Bucket=bucket, Key=key)
        with failures(bucket=to_bucket, key=to_key):
            if not params.overwrite and exists(client, to_bucket, to_key):
                raise already_there(f"s3://{to_bucket}/{to_key}")
            # The managed copy: one CopyObject, or a multipart copy past 5 GB.
            client.copy({"Bucket": bucket, "Key": key}, to_bucket, to_key)
        if move:
            with failures(bucket=bucket, key=key):
                client.delete_object(Bucket=bucket, Key=key)
        verb = "Moved" if move else "Copied"
        return request.result(
            f"{verb} s3://{bucket}/{key} to s3://{to_bucket}/{to_key}.",
            data={"bucket": to_bucket, "key": to_key, "source": f"s3://{bucket}/{key}"},
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


def _size(count: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
