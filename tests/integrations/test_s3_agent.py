"""s3_agent against moto's S3 server mode on 127.0.0.1 (the real boto3 client, real HTTP)."""

from __future__ import annotations

import base64
import functools
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import yaml
from moto import settings as moto_settings
from moto.backends import get_backend
from moto.core import DEFAULT_ACCOUNT_ID
from moto.server import ThreadedMotoServer

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest
from tests.integrations.folders import approved_copy, free_port
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "s3_agent"
READ_ONLY_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetObject"], "Resource": "*"}
    ],
}


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_url: str, monkeypatch: pytest.MonkeyPatch):
    """A fresh `reports` bucket holding one file; the agent pointed at the server."""
    for name, value in {
        "ENDPOINT_URL": moto_url,
        "ACCESS_KEY_ID": "test",
        "SECRET_ACCESS_KEY": "test",
        "MAX_ATTEMPTS": "1",
    }.items():
        monkeypatch.setenv(f"S3_AGENT_{name}", value)
    client = boto3.client(
        "s3",
        endpoint_url=moto_url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    for bucket in client.list_buckets()["Buckets"]:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            if keys := [{"Key": item["Key"]} for item in page.get("Contents", [])]:
                client.delete_objects(Bucket=bucket["Name"], Delete={"Objects": keys})
        client.delete_bucket(Bucket=bucket["Name"])
    client.create_bucket(Bucket="reports")
    client.put_object(
        Bucket="reports", Key="2026/q1.csv", Body=b"quarter,total\nq1,100\n", ContentType="text/csv"
    )
    return client


@functools.cache
def agent() -> Tool:
    """The folder loaded once: it reads its settings at each call, and keeps its clients."""
    return load_tool_folder(FOLDER)


async def call(action: str, **parameters: object):
    return await agent().execute(ToolRequest(request_id="r1", action=action, parameters=parameters))


async def test_upload_list_download_and_delete(s3, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("S3_AGENT_FILES_DIR", str(tmp_path / "files"))
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x01")

    text = await call("upload", key="s3://reports/2026/notes.md", content="# Notes\nAll good.")
    binary = await call(
        "upload",
        bucket="reports",
        key="2026/blob.bin",
        content_base64=base64.b64encode(b"\x00\xff").decode(),
        metadata={"author": "ada"},
    )
    local = await call("upload", bucket="reports", key="2026/chart.png", file="chart.png")
    listed = await call("list", bucket="reports", prefix="2026/")
    notes = await call("download", key="s3://reports/2026/notes.md")
    blob = await call("download", bucket="reports", key="2026/blob.bin")
    saved = await call("download", bucket="reports", key="2026/q1.csv", save_as="copies/q1.csv")
    stored = s3.head_object(Bucket="reports", Key="2026/blob.bin")["Metadata"]
    deleted = await call("delete", bucket="reports", key="2026/blob.bin")

    assert text.message == "Uploaded s3://reports/2026/notes.md (17 bytes)."
    assert text.data["content_type"] == "text/markdown" and text.metadata == {"provider": "s3"}
    assert binary.data["size_bytes"] == 2 and local.data["content_type"] == "image/png"
    assert [f["key"] for f in listed.data["files"]] == [
        "2026/blob.bin",
        "2026/chart.png",
        "2026/notes.md",
        "2026/q1.csv",
    ]
    assert listed.message.splitlines()[0] == "4 files in s3://reports/2026/"
    assert (
        notes.data["content"] == "# Notes\nAll good."
        and notes.data["content_type"] == "text/markdown"
    )
    assert blob.data["content_base64"] == base64.b64encode(b"\x00\xff").decode()
    assert stored == {"author": "ada"}
    assert Path(saved.data["saved_as"]).read_text() == "quarter,total\nq1,100\n"
    assert deleted.message == "Deleted s3://reports/2026/blob.bin."
    assert "Contents" not in s3.list_objects_v2(Bucket="reports", Prefix="2026/blob")


async def test_the_configured_bucket_serves_calls_that_name_none(s3, monkeypatch):
    monkeypatch.setenv("S3_AGENT_BUCKET", "reports")

    listed = await call("list")

    assert [f["key"] for f in listed.data["files"]] == ["2026/q1.csv"]
    monkeypatch.delenv("S3_AGENT_BUCKET")
    with pytest.raises(InvalidToolArgumentsError, match="Which bucket?"):
        await call("list")


async def test_each_failure_is_a_clear_error(s3, moto_url: str, tmp_path: Path, monkeypatch):
    with pytest.raises(ToolError, match=r"s3://reports/2026/none.csv does not exist") as no_key:
        await call("download", bucket="reports", key="2026/none.csv")
    with pytest.raises(ToolError, match="bucket archive does not exist") as no_bucket:
        await call("list", bucket="archive")
    with pytest.raises(ToolError, match="s3://reports/gone.txt does not exist") as delete_missing:
        await call("delete", bucket="reports", key="gone.txt")
    monkeypatch.setenv("S3_AGENT_MAX_DOWNLOAD_BYTES", "5")
    with pytest.raises(
        ToolError, match="is 21 bytes, over the limit of 5 bytes: save it"
    ) as too_large:
        await call("download", bucket="reports", key="2026/q1.csv")
    with pytest.raises(ToolError, match="s3_agent has no files_dir") as no_dir:
        await call("upload", bucket="reports", key="x", file="/etc/passwd")
    monkeypatch.setenv("S3_AGENT_FILES_DIR", str(tmp_path))
    with pytest.raises(
        InvalidToolArgumentsError, match="'../../etc/passwd' is not a file inside files_dir"
    ):
        await call("upload", bucket="reports", key="x", file="../../etc/passwd")
    monkeypatch.setenv("S3_AGENT_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ToolError, match="Could not reach the S3 server") as down:
        await call("list", bucket="reports")

    assert {no_key.value.code, no_bucket.value.code, delete_missing.value.code} == {"not_found"}
    assert too_large.value.code == "too_large" and no_dir.value.code == "not_configured"
    assert (down.value.code, down.value.recoverable) == ("server_unreachable", True)


@pytest.fixture
def authenticating(s3, moto_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """moto checking every request's signature against its IAM users: a reader who may only read."""
    iam = boto3.client(
        "iam",
        endpoint_url=moto_url,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    user = f"reader-{id(s3)}"
    iam.create_user(UserName=user)
    iam.put_user_policy(
        UserName=user, PolicyName="read", PolicyDocument=json.dumps(READ_ONLY_POLICY)
    )
    key = iam.create_access_key(UserName=user)["AccessKey"]
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    return {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}


async def test_bad_credentials_and_a_refused_call_are_clear_errors(
    authenticating: dict[str, str], monkeypatch
):
    monkeypatch.setenv("S3_AGENT_ACCESS_KEY_ID", authenticating["id"])
    monkeypatch.setenv("S3_AGENT_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(ToolError, match="S3 refused the credentials") as bad:
        await call("list", bucket="reports")
    monkeypatch.setenv("S3_AGENT_SECRET_ACCESS_KEY", authenticating["secret"])

    listed = await call("list", bucket="reports")
    with pytest.raises(ToolError, match="S3 refused access to s3://reports/2026/q1.csv") as refused:
        await call("delete", bucket="reports", key="2026/q1.csv")
    with pytest.raises(ToolError, match="S3 refused access to s3://reports/copy.csv") as no_copy:
        await call("copy", bucket="reports", key="2026/q1.csv", to_key="copy.csv")

    assert (bad.value.code, bad.value.recoverable) == ("bad_credentials", False)
    assert listed.data["count"] == 1
    assert (refused.value.code, refused.value.recoverable) == ("refused", False)
    assert (no_copy.value.code, no_copy.value.recoverable) == ("refused", False)


def test_orchestrator_run_takes_json_and_words_and_a_delete_asks(cli, s3, tmp_path: Path):
    approved_copy(cli, tmp_path, "s3_agent")

    structured = cli(
        "run",
        "s3_agent",
        "upload",
        "--json",
        json.dumps({"bucket": "reports", "key": "hello.txt", "content": "Hello, S3"}),
        cwd=tmp_path,
    )
    uri = cli("run", "s3_agent", "download", "s3://reports/hello.txt", cwd=tmp_path)
    pairs = cli("run", "s3_agent", "list", "bucket: reports, prefix: 2026/", cwd=tmp_path)
    rejected = cli(
        "run",
        "s3_agent",
        "delete",
        "key: s3://reports/hello.txt",
        cwd=tmp_path,
        stdin="n keep it\n",
    )
    kept = s3.get_object(Bucket="reports", Key="hello.txt")["Body"].read()
    deleted = cli(
        "run", "s3_agent", "delete", "key: s3://reports/hello.txt", cwd=tmp_path, stdin="y\n"
    )

    assert structured.returncode == 0, structured.stderr
    envelope = json.loads(structured.stdout)
    assert envelope["success"] and envelope["data"]["size_bytes"] == 9
    assert (
        envelope["metadata"]["operation"] == "s3_agent.upload"
        and envelope["metadata"]["provider"] == "s3"
    )
    assert uri.returncode == 0, uri.stderr
    assert (
        uri.stdout.startswith("Downloaded s3://reports/hello.txt (9 bytes")
        and "Hello, S3" in uri.stdout
    )
    assert pairs.returncode == 0 and "2026/q1.csv (21 bytes)" in pairs.stdout
    assert rejected.returncode == 1 and "The user rejected this call: keep it" in rejected.stdout
    assert "s3_agent_delete" in rejected.stderr, "the question was shown"
    assert kept == b"Hello, S3"
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith("Deleted s3://reports/hello.txt.")


def test_a_deployment_may_pin_the_bucket(cli, s3, tmp_path: Path):
    root = approved_copy(cli, tmp_path)
    config_file = root / "s3_agent" / "tool_config.yaml"
    config = yaml.safe_load(config_file.read_text())
    config_file.write_text(
        yaml.safe_dump(
            {
                **config,
                "parameters": {"bucket": {"value": "reports"}, "to_bucket": {"value": "reports"}},
                # Changed, the folder is the deployment's own, held by default: inline, it
                # keeps the environment's S3_AGENT_* settings and credentials.
                "sandbox": {**config["sandbox"], "isolation": "inline"},
            }
        )
    )
    assert cli("tools", "approve", "s3_agent", cwd=tmp_path).returncode == 0

    listed = cli("run", "s3_agent", "list", "--json", "{}", cwd=tmp_path)
    chosen = cli("run", "s3_agent", "list", "bucket: archive", cwd=tmp_path)
    elsewhere = cli(
        "run", "s3_agent", "copy", "key: 2026/q1.csv, to_key: q1.csv, to_bucket: archive",
        cwd=tmp_path,
    )

    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["data"]["bucket"] == "reports"
    assert chosen.returncode == 1
    assert "bucket of s3_agent.list is fixed by the folder's configuration" in chosen.stderr
    assert elsewhere.returncode == 1
    assert "to_bucket of s3_agent.copy is fixed by the folder's configuration" in elsewhere.stderr


async def test_list_gives_a_page_and_a_token_that_continues_it(s3):
    for name in ("a", "b", "c", "d", "e"):
        s3.put_object(Bucket="reports", Key=f"many/{name}.txt", Body=b"x")

    first = await call("list", bucket="reports", prefix="many/", max_keys=2)
    second = await call(
        "list", bucket="reports", prefix="many/", max_keys=2,
        continuation_token=first.data["next_token"],
    )
    last = await call(
        "list", bucket="reports", prefix="many/", max_keys=2,
        continuation_token=second.data["next_token"],
    )

    assert [f["key"] for f in first.data["files"]] == ["many/a.txt", "many/b.txt"]
    assert first.message.splitlines()[0] == "2 files in s3://reports/many/; more exist"
    assert first.message.splitlines()[-1] == (
        f"More: continue with continuation_token {first.data['next_token']}"
    )
    assert [f["key"] for f in second.data["files"]] == ["many/c.txt", "many/d.txt"]
    assert [f["key"] for f in last.data["files"]] == ["many/e.txt"]
    assert (first.data["truncated"], last.data["truncated"]) == (True, False)
    assert last.data["next_token"] is None and "more exist" not in last.message


async def test_list_continues_past_a_thousand_keys(s3):
    # Straight into the server's store: 1,001 PUTs over HTTP would take the most of a minute.
    store = get_backend("s3")[DEFAULT_ACCOUNT_ID]["global"]
    for number in range(1001):
        store.put_object("reports", f"big/{number:04}", b"")

    first = await call("list", bucket="reports", prefix="big/", max_keys=1000)
    rest = await call(
        "list", bucket="reports", prefix="big/", continuation_token=first.data["next_token"]
    )

    assert first.data["count"] == 1000 and first.data["truncated"]
    assert [f["key"] for f in rest.data["files"]] == ["big/1000"]


async def test_a_delimiter_lists_one_level_with_its_folders(s3):
    for key in ("2026/q2/a.csv", "2026/q2/b.csv", "2026/old/z.csv", "top.txt"):
        s3.put_object(Bucket="reports", Key=key, Body=b"x")

    root = await call("list", bucket="reports", delimiter="/")
    year = await call("list", bucket="reports", prefix="2026/", delimiter="/")

    assert (root.data["folders"], [f["key"] for f in root.data["files"]]) == (
        ["2026/"],
        ["top.txt"],
    )
    assert year.data["folders"] == ["2026/old/", "2026/q2/"]
    assert [f["key"] for f in year.data["files"]] == ["2026/q1.csv"]
    assert year.message.splitlines() == [
        "1 file in s3://reports/2026/ and 2 folders",
        "2026/old/ (folder)",
        "2026/q2/ (folder)",
        "2026/q1.csv (21 bytes)",
    ]


async def test_download_never_replaces_a_local_file_unless_told(s3, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("S3_AGENT_FILES_DIR", str(tmp_path))
    (tmp_path / "q1.csv").write_text("my own edits")

    with pytest.raises(ToolError, match=r"q1.csv already exists: .*overwrite: true") as kept:
        await call("download", bucket="reports", key="2026/q1.csv", save_as="q1.csv")
    unchanged = (tmp_path / "q1.csv").read_text()
    replaced = await call(
        "download", bucket="reports", key="2026/q1.csv", save_as="q1.csv", overwrite=True
    )

    assert (kept.value.code, kept.value.recoverable) == ("already_exists", False)
    assert unchanged == "my own edits"
    assert Path(replaced.data["saved_as"]).read_text() == "quarter,total\nq1,100\n"


async def test_the_content_type_decides_text_or_bytes(s3):
    s3.put_object(
        Bucket="reports", Key="blob", Body=b"plain ascii", ContentType="application/octet-stream"
    )
    s3.put_object(
        Bucket="reports", Key="latin.txt", Body=b"caf\xe9", ContentType="text/plain; charset=latin-1"
    )
    s3.put_object(Bucket="reports", Key="data.json", Body=b'{"a": 1}', ContentType="application/json")

    blob = await call("download", bucket="reports", key="blob")
    latin = await call("download", bucket="reports", key="latin.txt")
    document = await call("download", bucket="reports", key="data.json")

    assert blob.data["content_base64"] == base64.b64encode(b"plain ascii").decode()
    assert "content" not in blob.data
    assert blob.message.endswith("application/octet-stream): bytes, in content_base64.")
    assert latin.data["content"] == "café"
    assert document.data["content"] == '{"a": 1}'


@pytest.mark.parametrize("endpoint", ["127.0.0.1:9000", "ftp://127.0.0.1", "http://"])
async def test_a_bad_endpoint_is_a_configuration_error(s3, monkeypatch, endpoint: str):
    monkeypatch.setenv("S3_AGENT_ENDPOINT_URL", endpoint)

    with pytest.raises(ToolError, match="s3_agent is not configured: endpoint_url") as bad:
        await call("list", bucket="reports")

    assert (bad.value.code, bad.value.recoverable) == ("not_configured", False)
    assert "http(s) URL of an S3 server" in str(bad.value)


async def test_head_gives_a_files_details_without_its_content(s3):
    s3.put_object(
        Bucket="reports", Key="a.txt", Body=b"hello", ContentType="text/plain",
        Metadata={"owner": "ada"},
    )

    head = await call("head", key="s3://reports/a.txt")
    with pytest.raises(ToolError, match="s3://reports/none does not exist") as missing:
        await call("head", bucket="reports", key="none")

    assert head.data["size_bytes"] == 5 and head.data["content_type"] == "text/plain"
    assert head.data["metadata"] == {"owner": "ada"} and "content" not in head.data
    assert head.data["etag"] == s3.head_object(Bucket="reports", Key="a.txt")["ETag"].strip('"')
    assert head.message.startswith("s3://reports/a.txt: 5 bytes, text/plain, modified ")
    assert (missing.value.code, missing.value.recoverable) == ("not_found", False)


async def test_copy_and_move_never_replace_a_file_unless_told(s3):
    s3.create_bucket(Bucket="archive")
    s3.put_object(Bucket="reports", Key="b.txt", Body=b"bee", Metadata={"owner": "bo"})

    copied = await call("copy", bucket="reports", key="2026/q1.csv", to_key="copies/q1.csv")
    across = await call("copy", bucket="reports", key="2026/q1.csv", to_key="s3://archive/q1.csv")
    with pytest.raises(ToolError, match="s3://reports/copies/q1.csv already exists") as taken:
        await call("copy", bucket="reports", key="b.txt", to_key="copies/q1.csv")
    replaced = await call(
        "copy", bucket="reports", key="b.txt", to_key="copies/q1.csv", overwrite=True
    )
    moved = await call("move", bucket="reports", key="b.txt", to_key="moved/b.txt")
    with pytest.raises(ToolError, match="s3://reports/moved/b.txt already exists") as onto:
        await call("move", bucket="reports", key="2026/q1.csv", to_key="moved/b.txt")
    with pytest.raises(ToolError, match="s3://reports/b.txt does not exist") as gone:
        await call("move", bucket="reports", key="b.txt", to_key="again.txt")
    with pytest.raises(InvalidToolArgumentsError, match="both source and destination"):
        await call("copy", bucket="reports", key="2026/q1.csv", to_key="2026/q1.csv")

    def body(bucket: str, key: str) -> bytes:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    assert copied.message == "Copied s3://reports/2026/q1.csv to s3://reports/copies/q1.csv."
    assert s3.head_object(Bucket="archive", Key="q1.csv")["ContentType"] == "text/csv"
    assert across.data == {"bucket": "archive", "key": "q1.csv", "source": "s3://reports/2026/q1.csv"}
    assert body("archive", "q1.csv") == body("reports", "2026/q1.csv")
    assert (taken.value.code, taken.value.recoverable) == ("already_exists", False)
    assert replaced.data["key"] == "copies/q1.csv"
    assert moved.message == "Moved s3://reports/b.txt to s3://reports/moved/b.txt."
    assert body("reports", "moved/b.txt") == b"bee"
    assert s3.head_object(Bucket="reports", Key="moved/b.txt")["Metadata"] == {"owner": "bo"}
    assert onto.value.code == "already_exists" and body("reports", "2026/q1.csv")
    assert (gone.value.code, gone.value.recoverable) == ("not_found", False)


async def test_presign_gives_a_signed_get_link_that_expires(s3):
    # moto checks no signature of a presigned link (with IAM on it fails on them): the link is
    # fetched with no credentials of its own, its SigV4 signature and expiry read from the URL.
    link = await call("presign", bucket="reports", key="2026/q1.csv", expires_seconds=600)
    with pytest.raises(ToolError, match="s3://reports/none does not exist") as missing:
        await call("presign", bucket="reports", key="none")
    with pytest.raises(InvalidToolArgumentsError, match="expires_seconds"):
        await call("presign", bucket="reports", key="2026/q1.csv", expires_seconds=8 * 86400)

    with urllib.request.urlopen(link.data["url"]) as response:
        fetched = response.read()

    assert fetched == b"quarter,total\nq1,100\n"
    query = parse_qs(urlsplit(link.data["url"]).query)
    assert (query["X-Amz-Expires"], query["X-Amz-Algorithm"]) == (["600"], ["AWS4-HMAC-SHA256"])
    assert query["X-Amz-Signature"] and query["X-Amz-Credential"][0].startswith("test/")
    assert (link.data["method"], link.data["expires_seconds"]) == ("GET", 600)
    assert link.message.startswith("A link to s3://reports/2026/q1.csv, valid until ")
    assert missing.value.code == "not_found"
