"""`tool_config.yaml`: what a drop-in folder declares about its tool."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from orchestrator.errors import ToolConfigError, validation_problems
from orchestrator.folders.cache_config import CacheConfig
from orchestrator.folders.files import read_regular
from orchestrator.folders.hashing import CONFIG_PATHS
from orchestrator.folders.mcp_config import McpServerConfig
from orchestrator.folders.remote_fetch import RemoteConfigRef
from orchestrator.folders.safe_yaml import load_bounded
from orchestrator.folders.sandbox_config import SandboxConfig
from orchestrator.level_overrides import (
    MAX_TIMEOUT_SECONDS,
    DatabaseOverride,
    LimitsOverride,
    ModelOverride,
)
from orchestrator.tools.agent_state import StateMode
from orchestrator.tools.risk import RiskLevel, Urgency

CONFIG_FILE = "tool_config.yaml"
# Tool names become part of function names the model calls (`<name>_<action>`, at most 64).
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
MAX_CONFIG_BYTES = 1024 * 1024

# What the dispatch pipeline reads of a folder's config at each call (each tool's metadata).
POLICY_FIELDS = {
    "timeout_seconds",
    "max_retries",
    "background",
    "idempotent",
    "requires_approval",
    "max_cost_usd",
    "cache",
}


class ActionRisk(BaseModel):
    """One action's risk level and urgency, over the folder's (see `tools.risk`)."""

    model_config = ConfigDict(extra="forbid")

    risk_level: RiskLevel | None = None
    urgency: Urgency | None = None


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class FixedValue(BaseModel):
    """A parameter the configuration sets: the model neither sees nor sets it."""

    model_config = ConfigDict(extra="forbid")

    value: JsonValue


def _choice_kind(value: object) -> str | None:
    if value == "ai":
        return "ai"
    return "value" if isinstance(value, dict | FixedValue) else None


# Per parameter of the tool: `ai` (the model sets it) or `{value: ...}` (fixed); see `folders.scope`.
ParameterChoice = Annotated[
    Annotated[Literal["ai"], Tag("ai")] | Annotated[FixedValue, Tag("value")],
    Discriminator(
        _choice_kind,
        custom_error_type="parameter_choice",
        custom_error_message="must be `ai` or `{value: ...}`",
    ),
]


class ClosureConfig(BaseModel):
    """`closure:` of an agent folder: a model judges its answer before the request closes."""

    model_config = ConfigDict(extra="forbid")

    judge: bool = False
    max_rounds: int = Field(default=1, ge=1, le=5, description="More rounds at most, if not fulfilled.")


class ToolConfig(BaseModel):
    """The validated content of a `tool_config.yaml`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1)
    version: str = Field(min_length=1)
    kind: Literal["tool", "agent"] = Field(
        default="tool",
        description="`agent`: an AgentTool over its src/sub_graphs/ (no entry point: no Python).",
    )
    instructions: str | None = Field(
        default=None,
        min_length=1,
        description="An agent's system prompt ({name} and {description} are filled in).",
    )
    planning: bool | None = Field(
        default=None,
        description="An agent's create_execution_plan: on unless false (see docs/planning.md).",
    )
    approve_plans: bool | None = Field(
        default=None,
        description="An agent's plans are approved before they run (default: as its parent's).",
    )
    include_tool_data: bool | None = Field(
        default=None,
        description="false: this level's model reads a tool result's message, not its data "
        "(default: as its parent's).",
    )
    closure: ClosureConfig | None = Field(
        default=None,
        description="An agent's judged closure: {judge: true, max_rounds: N} (docs/folders.md).",
    )
    state: StateMode = Field(
        default="local",
        description="An agent's conversation at each call: `local` (fresh), `parent` (its "
        "caller's recent conversation too) or `standalone` (its own, kept per user).",
    )
    entry_point: str | None = None
    class_name: str | None = None
    config: dict[str, JsonValue] = Field(default_factory=dict)
    remote_config: RemoteConfigRef | None = Field(
        default=None,
        description="This level's settings overlaid from a URL, with fallbacks (docs/folders.md).",
    )
    capabilities: list[str] = Field(default_factory=list)
    llm: ModelOverride = Field(default_factory=ModelOverride)
    db: DatabaseOverride = Field(default_factory=DatabaseOverride)
    limits: LimitsOverride = Field(default_factory=LimitsOverride)
    log_level: LogLevel | None = Field(
        default=None, description="Of the folder's package logger, and those below it."
    )
    timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        allow_inf_nan=False,
        description="Of each call; when not set, the level's `limits.timeout_seconds`.",
    )
    max_retries: int = Field(default=0, ge=0, le=10)
    requires_approval: bool = Field(
        default=False, description="Every call of every action needs the person's decision first."
    )
    sensitive_actions: list[str] = Field(
        default_factory=list,
        description="Actions (by name) whose every call needs the person's decision first.",
    )
    risk_level: RiskLevel | None = Field(
        default=None,
        description="Said at each question about a call of it: low, medium, high or critical.",
    )
    urgency: Urgency | None = Field(
        default=None, description="Said at each question about a call of it: low, normal or high."
    )
    action_risk: dict[str, ActionRisk] = Field(
        default_factory=dict,
        description="Per action (by name): `{risk_level, urgency}`, over the folder's.",
    )
    operator: bool = Field(
        default=False,
        description=(
            "An agent whose model may list and answer the user's pending authorization "
            "requests (see docs/human-in-the-loop.md); a tool folder runs no model: no effect."
        ),
    )
    background: bool = False
    max_cost_usd: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Most one call may cost, in dollars: a call that would pass a budget with it does "
            "not start, and a call billed more stops the turn."
        ),
    )
    idempotent: bool = Field(
        default=False, description="Safe to run again: re-queued after a crash, not failed."
    )
    cache: CacheConfig | None = Field(
        default=None,
        description="Reuse results of an idempotent folder's actions (see docs/tool-calls.md).",
    )
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    parameters: dict[str, ParameterChoice] = Field(
        default_factory=dict,
        description="Who sets each named parameter of the tool's actions: `ai` or `{value: ...}`.",
    )
    mcp: McpServerConfig | None = Field(
        default=None, description="The folder is an MCP server: how to launch or reach it."
    )
    sandbox: SandboxConfig = Field(
        default_factory=SandboxConfig,
        description="Where its code runs and what it may touch (see docs/sandbox.md).",
    )

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: object) -> object:
        # YAML reads `version: 1.0` as a float.
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("entry_point")
    @classmethod
    def _entry_point_inside_folder(cls, value: str | None) -> str | None:
        if value is None:
            return value
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or path.suffix != ".py":
            raise ValueError("must be a relative .py path inside the folder")
        return value

    @model_validator(mode="after")
    def _mcp_server_has_no_code(self) -> ToolConfig:
        if self.mcp is not None:
            code = ("entry_point", "class_name", "instructions")
            given = [name for name in code if getattr(self, name)]
            if self.state != "local":
                given.append("state")
            if self.kind != "tool" or given:
                what = f"`{given[0]}`" if given else "`kind: agent`"
                raise ValueError(
                    f"an MCP server folder (`mcp:`) has no {what}: its tools are the server's"
                )
        return self

    @model_validator(mode="after")
    def _process_isolation_for_tools(self) -> ToolConfig:
        if self.kind == "agent" and self.sandbox.isolation == "process":
            raise ValueError(
                "sandbox: `isolation: process` is for tool folders and MCP servers: "
                "an agent runs inline, and its tool folders each run in a process of their own"
            )
        return self

    @model_validator(mode="after")
    def _cache_only_what_changes_nothing(self) -> ToolConfig:
        cache = self.cache
        if cache is None:
            return self
        if not self.idempotent:
            raise ValueError(
                "cache: only an idempotent folder's results are reused: say `idempotent: true` "
                "(its calls change nothing, so running one again is safe) or remove `cache`"
            )
        if self.requires_approval:
            raise ValueError(
                "cache: a folder whose every call needs approval (`requires_approval`) changes "
                "things: its results are not reused"
            )
        if sensitive := [name for name in self.sensitive_actions if name in cache.actions]:
            raise ValueError(
                f"cache: {', '.join(sensitive)} is in `sensitive_actions` (it changes things): "
                "its results are not reused"
            )
        if cache.ttl_seconds is not None and self.sensitive_actions:
            raise ValueError(
                "cache: a folder with `sensitive_actions` caches only the actions it names "
                "(`cache.actions`), never its sensitive ones: no folder-wide `ttl_seconds`"
            )
        return self

    @property
    def entry_file(self) -> str:
        """The module file that holds the tool class."""
        return self.entry_point or f"{self.name}_tool.py"

    @property
    def entry_optional(self) -> bool:
        """True for a folder that may have no Python at all: an MCP server, or a
        `kind: agent` folder naming no entry point."""
        return self.mcp is not None or (self.kind == "agent" and self.entry_point is None)


def config_path(folder: Path) -> Path:
    """The folder's `tool_config.yaml`: at its top, else `src/config/` (the seed's place).

    The top one when there is neither (whose absence is then what is reported).
    """
    for relative in CONFIG_PATHS:
        if os.path.lexists(folder / relative):
            return folder / relative
    return folder / CONFIG_FILE


def load_tool_config(path: Path) -> ToolConfig:
    """Read and validate one `tool_config.yaml`."""
    try:
        data = read_regular(path, limit=MAX_CONFIG_BYTES)
    except OSError as error:
        raise ToolConfigError(f"{path}: cannot read: {error}") from None
    return parse_tool_config(data, source=str(path))


def parse_tool_config(data: bytes, *, source: str = CONFIG_FILE) -> ToolConfig:
    """Validate a `tool_config.yaml` from its bytes (those that were hashed and approved).

    Problems name `source` and, for YAML, the line and column (counted from 1).
    """
    return validate_tool_config(read_config_mapping(data, source=source), source=source)


def read_config_mapping(data: bytes, *, source: str = CONFIG_FILE) -> dict[str, object]:
    """The mapping of fields in a `tool_config.yaml` (or a remote document), not yet validated."""
    if len(data) > MAX_CONFIG_BYTES:
        raise ToolConfigError(f"{source}: larger than {MAX_CONFIG_BYTES:,} bytes")
    try:
        raw = load_bounded(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ToolConfigError(f"{source}: cannot read: {error}") from None
    except yaml.YAMLError as error:
        raise ToolConfigError(_yaml_problem(error, source=source)) from None
    if not isinstance(raw, dict):
        raise ToolConfigError(f"{source}: expected a mapping of fields, found {type(raw).__name__}")
    return {str(key): value for key, value in raw.items()}


def validate_tool_config(raw: dict[str, object], *, source: str = CONFIG_FILE) -> ToolConfig:
    """The fields of `raw` validated, problems naming `source`."""
    try:
        return ToolConfig.model_validate(raw)
    except ValidationError as error:
        raise ToolConfigError(f"{source}: {validation_problems(error)}") from None


def _yaml_problem(error: yaml.YAMLError, *, source: str) -> str:
    """`tool_config.yaml line 3, column 34: invalid YAML: <what>`, on one line."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is None or not problem:
        return f"{source}: invalid YAML: {_one_line(str(error))}"
    context = getattr(error, "context", None)
    what = f"{_one_line(problem)} ({_one_line(context)})" if context else _one_line(problem)
    return f"{source} line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {what}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
