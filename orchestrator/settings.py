"""Settings read from the environment and `.env` (see `.env.example` for each one)."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.errors import ConfigError, ToolLoadError
from orchestrator.paths import HOME_VARIABLE, home
from orchestrator.usage.budget import Budgets
from orchestrator.usage.prices import ModelPrice, PriceTable

ENV_PREFIX = "ORCHESTRATOR_"
OFFLINE_MODEL = "offline"
NO_PATTERNS = "none"  # ORCHESTRATOR_SENSITIVE_PATTERNS=none: no call name needs a decision
DEFAULT_MODEL = "openai:gpt-4o-mini"
EMBEDDING_CHOICES = re.compile(r"auto|local|none|openai:\S+")
MAX_SECONDS = 24 * 3600.0  # one day: longer belongs in a job queue, and inf or nan is a typo
MAX_OUTPUT_TOKENS = 1_000_000  # past any model's output: a larger number is a typo
NEEDS_ENDPOINT = (
    "{setting}={model!r} needs OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible "
    "server); unset {setting} to use the built-in offline model"
)

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
# Settings that may hold a password: an error names them but never shows it.
URL_SETTINGS = ("database_url", "database_app_url", "openai_base_url")
HIDDEN = "***"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# `user:password@` after `//`, or at the start of what has no `://` (a missing
# scheme), up to the last `@`; and libpq's `password=...` in a query or keywords.
_URL_PASSWORD = re.compile(r"(?:(?<=//)|^(?!\S*://))([^\s:/@]*):\S*@")
_PASSWORD_PARAMETER = re.compile(r"(password\s*=\s*)[^&\s]*", re.IGNORECASE)


class Settings(BaseSettings):
    """Everything the orchestrator can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,
        extra="ignore",
    )

    model: str | None = Field(
        default=None,
        description=(
            "`provider:model` for init_chat_model, or `offline`. Unset: openai:gpt-4o-mini "
            "when an OpenAI key or base URL is set, else the offline model."
        ),
    )
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL")
    )
    model_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="Seconds one model reply may take whole, from the request to its last token.",
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_OUTPUT_TOKENS,
        description="The most tokens one model reply may have (unset: the model's own limit); "
        "a folder's `llm: {max_output_tokens: N}` sets its level's.",
    )
    model_max_retries: int = Field(default=2, ge=0, le=10)
    model_streaming: bool = Field(
        default=True,
        description="Stream model replies; off for servers that cannot stream tool calls.",
    )
    text_tool_calls: bool = Field(
        default=True,
        description="Run tool calls a model writes as text (JSON, fenced, <tool_call> tags).",
    )
    result_cache: bool = Field(
        default=True,
        description=(
            "Reuse results of folders that declare `cache:` (false: every call runs; "
            "`--no-cache` for one command)."
        ),
    )
    data_dir: Path = Field(default_factory=lambda: home() / "data")
    sub_graphs_dir: Path = Field(default_factory=lambda: home() / "sub_graphs")
    max_tool_iterations: int = Field(default=5, ge=1, le=100)
    max_tool_result_chars: int = Field(default=4000, ge=200)
    include_tool_data: bool = Field(
        default=True,
        description="A tool result's data goes to the model with its message; false: the message alone.",
    )
    large_result_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=1024,
        description="The most of one tool result kept by handle past `max_tool_result_chars` "
        "(UTF-8 bytes); the rest is dropped, with a note saying so.",
    )
    large_result_days: float = Field(
        default=7.0,
        gt=0,
        description="How long a result kept by handle can be read; expired ones are purged.",
    )
    context_tokens: int = Field(
        default=32000,
        ge=1000,
        description="A model's input limit when its LangChain profile gives none.",
    )
    summary_model: str | None = Field(
        default=None,
        description="`provider:model` that writes the summaries of long conversations "
        "(default: each level's own model); same server and key as ORCHESTRATOR_MODEL.",
    )
    closure_judge: bool = Field(
        default=False,
        description="Before the orchestrator's answer ends a turn, a model judges whether it "
        "fulfilled the request; if not, more rounds (see closure_max_rounds).",
    )
    closure_max_rounds: int = Field(default=1, ge=1, le=5)
    system_prompt: str | None = Field(
        default=None,
        description="The orchestrator's own system prompt (its text), instead of the built-in one.",
    )
    system_prompt_file: Path | None = Field(
        default=None,
        description="A UTF-8 file holding the orchestrator's system prompt (read at each start).",
    )
    remote_config_url: str | None = Field(
        default=None,
        description="The orchestrator's own level's settings from a URL, over these "
        "(https://; docs/settings: remote configuration).",
    )
    remote_config_refresh_seconds: int = Field(
        default=300,
        ge=0,
        le=7 * 24 * 3600,
        description="A copy of ORCHESTRATOR_REMOTE_CONFIG_URL's younger than this is used unfetched.",
    )
    tool_result_model: str | None = Field(
        default=None,
        description="`provider:model` that answers the rounds after tool results (a cheaper "
        "one; default: the model itself); same server and key as ORCHESTRATOR_MODEL.",
    )
    tool_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="For tools whose tool_config.yaml sets none (built-ins).",
    )
    inline_budget_seconds: float = Field(
        default=20.0,
        ge=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="An inline call running longer moves to the background.",
    )
    log_level: LogLevel = "WARNING"
    trace_content: bool = Field(
        default=False,
        description="Exported spans hold messages and tool arguments (redacted); see docs/tracing.md.",
    )
    trace_exit_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="How long a command's exit waits for the OTLP collector to take its spans.",
    )
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL"),
        description="External PostgreSQL with pgvector; unset runs the embedded server.",
    )
    database_app_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_APP_URL"),
        description="The application role's own login on the external server (recommended).",
    )
    db_idle_minutes: float = Field(
        default=10.0,
        ge=0,
        le=MAX_SECONDS / 60,
        allow_inf_nan=False,
        description="How long the embedded PostgreSQL stays up for the next command once none "
        "uses it (fractions allowed); 0 stops it when the last command exits.",
    )
    warm_minutes: float = Field(
        default=10.0,
        ge=0,
        le=MAX_SECONDS / 60,
        allow_inf_nan=False,
        description="How long the warm process (the product loaded once, `ask`, `run` "
        "and `mcp serve` forked from it) waits for the next command; 0: none, each command loads everything.",
    )
    embeddings: str = Field(
        default="auto",
        description="`auto` (local if installed), `local`, `none`, or `openai:<model>`.",
    )
    rag_match_count: int = Field(default=5, ge=0, le=50)
    rag_threshold: float = Field(default=0.5, ge=-1, le=1)
    rag_max_chars: int = Field(default=2000, ge=0)
    sensitive_patterns: str = Field(
        default="delete,remove,destroy,drop,purge",
        description=(
            "Comma-separated words: a tool call whose name has one as a whole segment "
            "(files_delete, drop_table) needs the user's decision first; `none` for no pattern."
        ),
    )
    require_sandbox: bool = Field(
        default=False,
        description="Refuse to start a sandboxed folder (an MCP stdio server, a Python folder "
        "with isolation: process) whose rules this "
        "machine cannot all enforce, rather than run it unconfined (see docs/sandbox.md).",
    )
    planning: bool = Field(
        default=True,
        description="Offer the model create_execution_plan (a plan of tasks run for it); "
        "a folder's `planning: false` turns it off for its agent.",
    )
    max_plan_tasks: int = Field(default=20, ge=1, le=100, description="Tasks a plan may have.")
    max_replans: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Times a turn's model may revise a plan after a task failed.",
    )
    approve_plans: bool = Field(
        default=False,
        description="Show each plan for approval (approve, edit, reject) before it runs.",
    )
    operator: bool = Field(
        default=False,
        description=(
            "The orchestrator's own level lists and answers the user's pending authorization "
            "requests (get_authorization_requests, approve_authorization)."
        ),
    )
    max_follow_ups: int = Field(
        default=3,
        ge=0,
        le=100,
        description="Follow-up turns background tasks may start in a row after one user message.",
    )

    embedded_worker: bool = Field(
        default=True,
        description="`chat` and `ask` run background jobs in their own process too (0: only "
        "`orchestrator worker` processes run them).",
    )
    worker_concurrency: int = Field(
        default=4, ge=1, le=256, description="Jobs a worker runs at once (`worker --concurrency`)."
    )
    worker_heartbeat_seconds: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="How often a worker says it is alive, and looks for jobs whose worker is not.",
    )
    worker_stalled_seconds: float = Field(
        default=30.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="A worker silent this long has stopped: its jobs run again (idempotent) or fail.",
    )
    worker_idle_seconds: float = Field(
        default=60.0,
        gt=0,
        le=MAX_SECONDS,
        allow_inf_nan=False,
        description="`worker --until-idle` (started when a command leaves queued jobs) stops "
        "after this long with nothing to do.",
    )

    server_requests_per_minute: int = Field(
        default=600,
        ge=0,
        description="Requests one API key (or one JWT's user) may send `orchestrator serve` a "
        "minute: a burst of that many, then one each 60/N seconds; 0: no limit.",
    )
    oidc_issuer: str | None = Field(
        default=None,
        description="`orchestrator serve` also takes JWTs from this OpenID Connect issuer "
        "(its `iss`); its /.well-known/openid-configuration names the keys (jwks_uri).",
    )
    oidc_audience: str | None = Field(
        default=None, description="The `aud` a JWT must name: this server's client id or API name."
    )
    oidc_jwks_url: str | None = Field(
        default=None, description="The issuer's JWKS, if not the one its openid-configuration names."
    )
    oidc_user_claim: str = Field(
        default="sub", description="The claim of a JWT that names its user (`sub`, `email`...)."
    )

    max_turn_cost_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="A turn stops before a model or tool call would spend past this (dollars).",
    )
    max_session_cost_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="A session's turns stop before a call would spend past this (dollars).",
    )
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description=(
            'Your prices, dollars per million tokens, as JSON: {"my-model": {"input": 0.2, '
            '"output": 0.6, "cached_input": 0.05}}. They come before the bundled price table.'
        ),
    )
    price_provider: str | None = Field(
        default=None,
        description=(
            "The genai-prices provider (openai, anthropic, ...) whose prices apply to every "
            "model, local servers' too (a local proxy in front of a hosted API, say)."
        ),
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("embeddings")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        if not EMBEDDING_CHOICES.fullmatch(value.strip()):
            raise ValueError("use auto, local, none, or openai:<model>")
        return value.strip()

    @field_validator("database_url", "database_app_url")
    @classmethod
    def _a_postgresql_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"postgres(ql)?(\+\w+)?://", value.strip()):
            raise ValueError("use a postgresql:// URL: postgresql://user:password@host:5432/database")
        return value.strip() if value is not None else None

    @field_validator("openai_base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if problem := http_url_problem(value):
            raise ValueError(problem)
        return value.strip()

    @field_validator("oidc_issuer", "oidc_jwks_url")
    @classmethod
    def _an_oidc_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if problem := oidc_url_problem(value):
            raise ValueError(problem)
        return value.strip()  # as it is: a JWT's `iss` must be the issuer exactly

    @model_validator(mode="after")
    def _oidc_whole(self) -> Settings:
        if self.oidc_issuer is not None and not self.oidc_audience:
            raise ValueError(f"{env_name('oidc_issuer')} needs {env_name('oidc_audience')} too")
        if self.oidc_issuer is None and (self.oidc_audience or self.oidc_jwks_url):
            set_ = env_name("oidc_audience") if self.oidc_audience else env_name("oidc_jwks_url")
            raise ValueError(f"{set_} needs {env_name('oidc_issuer')} too")
        return self

    @field_validator("data_dir")
    @classmethod
    def _a_directory(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError("not a directory")
        return value

    @model_validator(mode="after")
    def _model_has_an_endpoint(self) -> Settings:
        explicit = self.model not in (None, OFFLINE_MODEL)
        if explicit and self.provider == "openai" and not self.has_openai_endpoint:
            raise ValueError(NEEDS_ENDPOINT.format(setting=env_name("model"), model=self.model))
        return self

    @field_validator("system_prompt_file")
    @classmethod
    def _a_prompt_file(cls, value: Path | None) -> Path | None:
        # Said before the database starts, not at the first turn.
        if value is not None and not value.expanduser().is_file():
            raise ValueError(f"{value} is not a file")
        return value

    @model_validator(mode="after")
    def _one_system_prompt(self) -> Settings:
        if self.system_prompt is not None and self.system_prompt_file is not None:
            raise ValueError(
                f"set {env_name('system_prompt')} or {env_name('system_prompt_file')}, not both"
            )
        return self

    @property
    def sensitive_words(self) -> tuple[str, ...]:
        """The sensitive patterns of tool call names, one a word (none for `none`)."""
        words = tuple(word.strip() for word in self.sensitive_patterns.split(",") if word.strip())
        return () if tuple(word.lower() for word in words) == (NO_PATTERNS,) else words

    @property
    def has_openai_endpoint(self) -> bool:
        """True when an OpenAI key or an OpenAI-compatible base URL is configured."""
        return self.openai_api_key is not None or self.openai_base_url is not None

    @property
    def model_name(self) -> str:
        """The model to run: the one set, else the default when an endpoint is configured."""
        if self.model is not None:
            return self.model
        return DEFAULT_MODEL if self.has_openai_endpoint else OFFLINE_MODEL

    @property
    def provider(self) -> str:
        """The provider part of the model (`openai` when the model names none)."""
        provider, sep, _ = self.model_name.partition(":")
        return provider if sep else "openai"

    @property
    def uses_offline_model(self) -> bool:
        """True when no real model is configured, so the built-in offline model runs."""
        return self.model_name == OFFLINE_MODEL

    @property
    def price_table(self) -> PriceTable:
        """The model prices these settings give (a usage meter is built from it)."""
        return PriceTable(self.model_prices, provider=self.price_provider)

    @property
    def budgets(self) -> Budgets:
        """The turn and session budgets these settings give."""
        return Budgets(self.max_turn_cost_usd, self.max_session_cost_usd)


def http_url_problem(url: str) -> str | None:
    """Why `url` cannot be a model server's address (None: it can); says what is expected."""
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    example = "http://127.0.0.1:8080/v1"
    if "://" not in text and text:  # `localhost:8080/v1`: the scheme left out
        example = f"http://{text}"
        return f"the URL has no scheme: write it as {example} (or https://...)"
    return f"use an http:// or https:// URL of the server, such as {example}"


def oidc_url_problem(url: str) -> str | None:
    """Why `url` cannot be an OpenID Connect issuer's or its keys' (None: it can): https, or
    http on this machine."""
    if problem := http_url_problem(url):
        return problem
    parts = urlsplit(url.strip())
    if parts.scheme != "https" and parts.hostname not in LOOPBACK:
        return "use https:// (http:// only for 127.0.0.1 or localhost)"
    return None


def env_name(field: str) -> str:
    """The environment variable that sets `field`."""
    info = Settings.model_fields[field]
    if isinstance(info.validation_alias, AliasChoices):
        return str(info.validation_alias.choices[0])
    return f"{ENV_PREFIX}{field.upper()}"


def env_file() -> Path:
    """The `.env` file read after the environment: the one in the orchestrator home."""
    return home() / ".env"


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning a bad value into one `ConfigError` line that names it."""
    try:
        # pydantic's synthesised __init__ (dataclass_transform) knows the fields only, not
        # BaseSettings' own `_env_file`; the overrides are fields' values, validated as they are.
        return Settings(_env_file=env_file(), **overrides)  # pyright: ignore[reportCallIssue]  # see above
    except ValidationError as exc:
        error = exc.errors()[0]
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # a rule across settings: its message names them
            raise ConfigError(message) from None
        field = str(error["loc"][0])
        name = env_name(field) if field in Settings.model_fields else field
        shown = error.get("input")
        if name in {env_name(f) for f in URL_SETTINGS} and isinstance(shown, str):
            shown = hide_passwords(shown)
        source = value_source(name)
        where = f" ({source})" if source else ""
        raise ConfigError(f"Invalid setting {name}={shown!r}: {message}{where}") from None


def value_source(name: str) -> str | None:
    """Where the variable `name` is set: `set in the environment` (it wins), `set in <.env>`, or None."""
    wanted = name.upper()  # the settings read variables case-insensitively
    if any(key.upper() == wanted for key in os.environ):
        return "set in the environment"
    if any(key.upper() == wanted for key in _dotenv_keys(env_file())):
        return f"set in {env_file()}"
    return None


def misspelled_settings(path: Path | None = None) -> list[str]:
    """One line per variable of `.env` that no setting reads but looks like one that does.

    Every unknown `ORCHESTRATOR_` variable is named; another variable only when
    it is spelled almost like a setting (`OPENAI_BASEURL`): `.env` holds tools'
    variables too (`EMAIL_AGENT_SMTP_HOST`), which are no typos.
    """
    path = path or env_file()
    known = [env_name(field) for field in Settings.model_fields] + [HOME_VARIABLE]
    lines = []
    for key in _dotenv_keys(path):
        upper = key.upper()
        if upper in known:
            continue
        prefixed = upper.startswith(ENV_PREFIX)
        if prefixed:  # the prefix alone would make every name look alike: compare the rest
            rest = [k.removeprefix(ENV_PREFIX) for k in known if k.startswith(ENV_PREFIX)]
            close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), rest, n=1, cutoff=0.6)
            match = [ENV_PREFIX + name for name in close]
        else:
            plain = [k for k in known if not k.startswith(ENV_PREFIX)]
            match = difflib.get_close_matches(upper, plain, n=1, cutoff=0.85)
            if match and match[0] in upper:
                continue  # OPENAI_API_KEY_2: a name of its own built on a setting's, not a typo
        if match:
            lines.append(f"{path} sets {key}, which no setting reads: did you mean {match[0]}?")
        elif prefixed:
            lines.append(f"{path} sets {key}, which no setting reads (.env.example lists them)")
    return lines


def _dotenv_keys(path: Path) -> list[str]:
    """The variables a `.env` file sets (none when there is no such file)."""
    if not path.is_file():
        return []
    from dotenv import dotenv_values

    try:
        return list(dotenv_values(path))
    except (OSError, UnicodeDecodeError):  # an unreadable file: the settings say so themselves
        return []


def hide_passwords(text: str, *urls: object) -> str:
    """`text` without the passwords of database URLs: in any URL, and those of `urls` anywhere.

    `urls` are SQLAlchemy URLs (or strings) whose password may turn up in an
    error on its own (libpq quotes what it could not parse).
    """
    from sqlalchemy.engine import make_url

    for url in urls:
        try:
            password = make_url(url).password if isinstance(url, str) else getattr(url, "password", None)
        except Exception:  # not a URL: the patterns below still apply
            password = None
        if password:
            text = text.replace(str(password), HIDDEN)
    text = _URL_PASSWORD.sub(rf"\1:{HIDDEN}@", text)
    return _PASSWORD_PARAMETER.sub(rf"\1{HIDDEN}", text)


def required_env(name: str, *, setting: str) -> str:
    """The value of the variable `name` (see `env_value`); ToolLoadError when it is not set."""
    value = env_value(name)
    if not value:
        raise ToolLoadError(f"{setting} names {name}, which is not set")
    return value


def env_value(name: str) -> str | None:
    """A variable from the environment, else from the home's `.env` (as the settings read them)."""
    value = os.environ.get(name)
    if value:
        return value
    from dotenv import dotenv_values

    path = env_file()
    return dotenv_values(path).get(name) if path.is_file() else None


def password_of(url: str | None) -> str | None:
    """The password in a database URL, if any (to keep it out of messages)."""
    if not url:
        return None
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password
    except Exception:  # not a URL: then it has no password to hide either
        return None
