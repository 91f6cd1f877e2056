"""`tool_config.yaml`: what a drop-in folder declares about its tool."""

from __future__ import annotations

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

from orchestrator.errors import validation_problems
from orchestrator.tools.files import read_regular
from orchestrator.tools.safe_yaml import load_bounded

CONFIG_FILE = "tool_config.yaml"
# Tool names become part of function names the model calls (`<name>_<action>`, at most 64).
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
MAX_CONFIG_BYTES = 1024 * 1024
MAX_TIMEOUT_SECONDS = 24 * 3600.0  # a call that may take longer belongs in a job queue


class ToolConfigError(ValueError):
    """A `tool_config.yaml` that cannot be used; the message names the file and the field."""


class ModelOverride(BaseModel):
    """Which chat model an agent-type tool runs: its parent's, or one of its own."""

    model_config = ConfigDict(extra="forbid")

    inherit: Literal["parent", "local"] = "parent"
    model: str | None = Field(default=None, description="`provider:model`, as ORCHESTRATOR_MODEL.")
    base_url: str | None = None
    api_key_env: str | None = Field(
        default=None, description="Name of the environment variable holding the API key."
    )
    temperature: float | None = Field(default=None, ge=0, le=2)

    @model_validator(mode="after")
    def _local_names_a_model(self) -> ModelOverride:
        if self.inherit == "local" and not self.model:
            raise ValueError("`model` is required when inherit is local")
        return self


class DatabaseOverride(BaseModel):
    """Which database a tool uses: its parent's, or one named by an environment variable."""

    model_config = ConfigDict(extra="forbid")

    inherit: Literal["parent", "local"] = "parent"
    url_env: str | None = None


class FixedValue(BaseModel):
    """A parameter the configuration sets: the model neither sees nor sets it."""

    model_config = ConfigDict(extra="forbid")

    value: JsonValue


def _choice_kind(value: object) -> str | None:
    if value == "ai":
        return "ai"
    return "value" if isinstance(value, dict | FixedValue) else None


# Per parameter of the tool: `ai` (the model sets it) or `{value: ...}` (fixed); see `tools.scope`.
ParameterChoice = Annotated[
    Annotated[Literal["ai"], Tag("ai")] | Annotated[FixedValue, Tag("value")],
    Discriminator(
        _choice_kind,
        custom_error_type="parameter_choice",
        custom_error_message="must be `ai` or `{value: ...}`",
    ),
]


class ToolConfig(BaseModel):
    """The validated content of a `tool_config.yaml`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1)
    version: str = Field(min_length=1)
    entry_point: str | None = None
    class_name: str | None = None
    config: dict[str, JsonValue] = Field(default_factory=dict)
    capabilities: list[str] = Field(default_factory=list)
    llm: ModelOverride = Field(default_factory=ModelOverride)
    db: DatabaseOverride = Field(default_factory=DatabaseOverride)
    timeout_seconds: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT_SECONDS, allow_inf_nan=False)
    max_retries: int = Field(default=0, ge=0, le=10)
    requires_approval: bool = False
    background: bool = False
    idempotent: bool = Field(
        default=False, description="Safe to run again: re-queued after a crash, not failed."
    )
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    parameters: dict[str, ParameterChoice] = Field(
        default_factory=dict,
        description="Who sets each named parameter of the tool's actions: `ai` or `{value: ...}`.",
    )

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: object) -> object:
        # YAML reads `version: 1.0` as a float.
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("entry_point")
    @classmethod
    def _entry_point_inside_folder(cls, value: str | None) -> str | None:
        if value is None:
            return value
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or path.suffix != ".py":
            raise ValueError("must be a relative .py path inside the folder")
        return value

    @property
    def entry_file(self) -> str:
        """The module file that holds the tool class."""
        return self.entry_point or f"{self.name}_tool.py"


def load_tool_config(path: Path) -> ToolConfig:
    """Read and validate one `tool_config.yaml`."""
    try:
        raw = load_bounded(read_regular(path, limit=MAX_CONFIG_BYTES).decode("utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ToolConfigError(f"{path}: cannot read: {error}") from None
    except yaml.YAMLError as error:
        raise ToolConfigError(f"{path}: invalid YAML: {_one_line(str(error))}") from None
    if not isinstance(raw, dict):
        raise ToolConfigError(f"{path}: expected a mapping of fields, found {type(raw).__name__}")
    try:
        return ToolConfig.model_validate(raw)
    except ValidationError as error:
        raise ToolConfigError(f"{path}: {validation_problems(error)}") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())
