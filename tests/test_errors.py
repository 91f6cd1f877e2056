"""One exception hierarchy: every exception of the package in `orchestrator.errors`, by who acts."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import orchestrator
from orchestrator import errors
from orchestrator.dispatch.policy import ExecutionPolicy, run_with_policy
from orchestrator.errors import (
    DeveloperError,
    InvalidToolArgumentsError,
    OrchestratorError,
    ToolError,
    ToolFolderError,
    TransientToolError,
    UnknownToolError,
    UserError,
)
from orchestrator.tools.results import ToolResult


def _package_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined anywhere in the package, by `module.Name`."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(orchestrator.__path__, "orchestrator."):
        if module_info.name.endswith("__main__"):  # runs the CLI when imported
            continue
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("orchestrator")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


PACKAGE_EXCEPTIONS = _package_exceptions()


def test_the_walk_finds_the_exceptions_of_every_part_of_the_package() -> None:
    names = {cls.__name__ for cls in PACKAGE_EXCEPTIONS.values()}
    # One from the tools, the store, the testing helpers and the model: the walk reaches them all.
    assert {"ToolLoadError", "SessionOwnedError", "ScriptExhaustedError", "ConfigError"} <= names


@pytest.mark.parametrize("qualified", sorted(PACKAGE_EXCEPTIONS))
def test_every_exception_is_an_orchestrator_error_defined_and_exported_in_errors(
    qualified: str,
) -> None:
    cls = PACKAGE_EXCEPTIONS[qualified]
    assert issubclass(cls, OrchestratorError)
    assert cls.__module__ == "orchestrator.errors", f"{qualified} is defined outside errors.py"
    assert cls.__name__ in errors.__all__
    assert getattr(orchestrator, cls.__name__) is cls
    assert cls.__name__ in orchestrator.__all__


def test_all_of_errors_names_exceptions_only_and_each_once() -> None:
    assert len(set(errors.__all__)) == len(errors.__all__)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), OrchestratorError), name


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("orchestrator.folders.loader", "ToolLoadError"),
        ("orchestrator.folders.tool_config", "ToolConfigError"),
        ("orchestrator.folders.hashing", "FolderRefusedError"),
        ("orchestrator.folders.files", "RefusedFileError"),
        ("orchestrator.folders.files", "FileTooLargeError"),
        ("orchestrator.folders.safe_yaml", "YamlTooLargeError"),
        ("orchestrator.store", "DatabaseUnavailableError"),
        ("orchestrator.store", "SessionOwnedError"),
        ("orchestrator.store.engine", "DatabaseUnavailableError"),
        ("orchestrator.store.sessions", "SessionOwnedError"),
        ("orchestrator.testing", "ScriptExhaustedError"),
        ("orchestrator.testing", "RemoteConnectionBlocked"),
    ],
)
def test_old_import_paths_give_the_same_class(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("ToolError", ToolError),
        ("InvalidToolArgumentsError", ToolError),
        ("UnknownToolError", ToolError),
        ("TransientToolError", ToolError),
        ("ConfigError", UserError),
        ("ModelUnavailableError", UserError),
        ("IncompleteReplyError", UserError),
        ("ModelTimeoutError", UserError),
        ("DatabaseUnavailableError", UserError),
        ("SessionOwnedError", UserError),
        ("ToolContractError", DeveloperError),
        ("ToolLoadError", ToolFolderError),
        ("ToolConfigError", ToolFolderError),
        ("FolderRefusedError", ToolFolderError),
        ("RefusedFileError", ToolFolderError),
        ("YamlTooLargeError", ToolFolderError),
        ("ScriptExhaustedError", DeveloperError),
        ("RemoteConnectionBlocked", DeveloperError),
    ],
)
def test_each_error_belongs_to_who_must_act(name: str, family: type[OrchestratorError]) -> None:
    assert issubclass(getattr(errors, name), family)


def test_the_three_families_are_apart() -> None:
    families = (ToolError, UserError, DeveloperError)
    for one in families:
        for other in families:
            assert one is other or not issubclass(one, other)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        # Callers catch these by their built-in base: moving them must not change what is caught.
        ("ToolConfigError", ValueError),
        ("FolderRefusedError", ValueError),
        ("RefusedFileError", OSError),
        ("FileTooLargeError", OSError),
        ("ScriptExhaustedError", AssertionError),
        ("RemoteConnectionBlocked", ConnectionRefusedError),
        ("ToolContractError", TypeError),
    ],
)
def test_errors_keep_the_builtin_base_callers_catch(name: str, builtin: type[Exception]) -> None:
    assert issubclass(getattr(errors, name), builtin)


def test_a_yaml_bomb_is_still_a_yaml_error() -> None:
    import yaml

    assert issubclass(errors.YamlTooLargeError, yaml.YAMLError)


def test_codes_and_retry_defaults_are_kept() -> None:
    assert (ToolError("x").code, ToolError("x").recoverable) == ("tool_failed", True)
    assert (UnknownToolError("x").code, UnknownToolError("x").recoverable) == ("unknown_tool", True)
    invalid = InvalidToolArgumentsError("x")
    assert (invalid.code, invalid.recoverable) == ("invalid_arguments", True)
    overridden = ToolError("x", code="quota", recoverable=False)
    assert (overridden.code, overridden.recoverable) == ("quota", False)


def test_retry_it_and_fix_your_arguments_are_told_apart() -> None:
    transient = TransientToolError("the service is busy")
    assert (transient.code, transient.recoverable) == ("transient", True)
    assert transient.retry_strategy == "retry_with_backoff"
    assert InvalidToolArgumentsError("x").retry_strategy == "fix_arguments"
    assert ToolError("x", code="invalid_arguments").retry_strategy == "fix_arguments"
    assert ToolError("x", recoverable=False).retry_strategy is None


@pytest.mark.parametrize(
    "error",
    [
        TransientToolError("busy"),
        InvalidToolArgumentsError("a: required"),
        UnknownToolError("no such tool"),
        ToolError("gone", recoverable=False),
        ToolError("odd", code="invalid_arguments"),
    ],
)
def test_the_envelope_says_what_the_error_says(error: ToolError) -> None:
    result = ToolResult.from_error(error)
    assert (result.error_code, result.recoverable, result.retry_strategy) == (
        error.code,
        error.recoverable,
        error.retry_strategy,
    )


async def _no_sleep(seconds: float) -> None:
    return None


async def _tries(error: ToolError) -> int:
    """How many times the executor's retry policy runs a call that always raises `error`."""
    calls = 0

    async def attempt() -> ToolResult:
        nonlocal calls
        calls += 1
        raise error

    policy = ExecutionPolicy(timeout_seconds=5.0, max_retries=2)
    result = await run_with_policy(attempt, name="flaky", policy=policy, sleep=_no_sleep)
    assert result.error_code == error.code
    return calls


async def test_the_executor_retries_a_transient_failure() -> None:
    assert await _tries(TransientToolError("busy")) == 3


async def test_the_executor_leaves_bad_arguments_to_the_model() -> None:
    assert await _tries(InvalidToolArgumentsError("a: required")) == 1
