"""The parameters of s3_agent's actions, as the model and `orchestrator run` see them."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

BUCKET = "The bucket; the configured one when left out."
KEY = "The object's key (its path in the bucket), or a whole s3://bucket/key."
OVERWRITE = "Replace what is already there (refused otherwise)."
# SigV4's longest validity of a presigned URL.
MAX_EXPIRY_SECONDS = 7 * 24 * 3600


class ListFiles(BaseModel):
    bucket: str | None = Field(default=None, description=BUCKET)
    prefix: str = Field(default="", description="Only keys starting with this, e.g. reports/.")
    delimiter: str | None = Field(
        default=None,
        description='"/" lists one level: the files directly under prefix, and its folders.',
    )
    max_keys: int = Field(default=100, ge=1, le=1000, description="List at most this many.")
    continuation_token: str | None = Field(
        default=None, description="Continue a listing: the next_token the last page gave."
    )


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
    overwrite: bool = Field(default=False, description="With save_as: " + OVERWRITE)


class Head(BaseModel):
    key: str = Field(min_length=1, description=KEY)
    bucket: str | None = Field(default=None, description=BUCKET)


class Presign(BaseModel):
    key: str = Field(min_length=1, description=KEY)
    bucket: str | None = Field(default=None, description=BUCKET)
    expires_seconds: int = Field(
        default=3600,
        ge=1,
        le=MAX_EXPIRY_SECONDS,
        description="How long the link works, in seconds (at most 7 days).",
    )


class Copy(BaseModel):
    key: str = Field(min_length=1, description="The source: " + KEY)
    bucket: str | None = Field(default=None, description="The source's bucket. " + BUCKET)
    to_key: str = Field(min_length=1, description="The destination: a key or s3://bucket/key.")
    to_bucket: str | None = Field(
        default=None, description="The destination's bucket; the source's when left out."
    )
    overwrite: bool = Field(default=False, description=OVERWRITE)


class Delete(BaseModel):
    key: str = Field(min_length=1, description=KEY)
    bucket: str | None = Field(default=None, description=BUCKET)
