"""Arguments checked against a tool's JSON schema, without a pattern stalling the process.

A schema (an MCP server's, say) may hold a `pattern` that backtracks for ever on
some argument: Python's `re` would hold the event loop, and every other call and
the terminal with it. Patterns are matched with the `regex` engine instead, which
lets go of the interpreter while it matches and gives up at the call's deadline;
the whole check runs on a thread of its own, and the caller waits no longer than
that deadline for it. A schema with no pattern at all is checked on the loop:
without one, a check takes time in proportion to the schema and the arguments,
and handing it to a thread and back cost more than the check (a thread's
start and two wake-ups, on every call).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol, cast

import regex
from langchain_core.tools import BaseTool

from orchestrator.dispatch.json_shape import is_array, is_mapping, is_object, properties
from orchestrator.tools.threads import in_thread

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as JsonSchemaError

MAX_PROBLEMS = 5  # of a JSON-schema check, in one message
TOO_SLOW = (
    "the arguments could not be checked within {seconds:g}s: "
    "a pattern of the tool's schema takes too long on them"
)
BAD_PATTERN = "the tool's schema has a pattern that is no regular expression: {pattern!r}"
MIN_SECONDS = 0.001
# The keywords that match a regular expression (`regex` keeps them within the deadline).
PATTERN_KEYWORDS = frozenset({"pattern", "patternProperties"})


class Checker(Protocol):
    """What this module uses of a jsonschema validator.

    jsonschema's own `Validator` protocol leaves out `descend` and takes only
    JSON-shaped instances, where any object is checked (and found wrong).
    """

    def is_type(self, instance: object, type: str) -> bool: ...

    def iter_errors(self, instance: object) -> Iterator[JsonSchemaError]: ...

    def descend(
        self,
        instance: object,
        schema: object,
        path: str | int | None = None,
        schema_path: str | int | None = None,
    ) -> Iterator[JsonSchemaError]: ...


# A schema keyword's check: (validator, the keyword's value, instance, schema) -> errors;
# the value's type is the keyword's own (a pattern's a string, say).
Keyword = Callable[..., Iterator["JsonSchemaError"]]


class CheckerClass(Protocol):
    """A jsonschema validator class: its keywords' checks, and a checker per schema."""

    VALIDATORS: dict[str, Keyword]

    def __call__(self, schema: Mapping[str, object]) -> Checker: ...


# When the check of the current call must give up (time.monotonic()); None: never.
_deadline: ContextVar[float | None] = ContextVar("json_check_deadline", default=None)


async def json_problems_within(
    tool: BaseTool, arguments: Mapping[str, object], *, seconds: float
) -> str | None:
    """What is wrong with `arguments` (see `json_problems`), found within `seconds`.

    Off the loop when the tool's schema has a pattern; on it (at once) when it has none.
    """
    copied = dict(arguments)
    schema = json_schema(tool)
    if schema is not None and not _has_patterns(schema):
        return json_problems(tool, copied)

    def check() -> str | None:
        _deadline.set(time.monotonic() + seconds)
        try:
            return json_problems(tool, copied)
        except TimeoutError:  # a pattern ran into the deadline
            return TOO_SLOW.format(seconds=seconds)

    try:
        return await asyncio.wait_for(in_thread(check, name=f"{tool.name} arguments"), seconds)
    except TimeoutError:  # a check past its deadline anyway (a keyword outside `regex`)
        return TOO_SLOW.format(seconds=seconds)


def json_problems_before(
    tool: BaseTool, arguments: Mapping[str, object], *, seconds: float
) -> str | None:
    """`json_problems` on this thread, giving up on a pattern past `seconds` (for a quick check)."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        return json_problems(tool, arguments)
    except TimeoutError:
        return TOO_SLOW.format(seconds=seconds)
    finally:
        _deadline.reset(token)


def json_problems(tool: BaseTool, arguments: Mapping[str, object]) -> str | None:
    """What is wrong with `arguments` for a tool described by a JSON schema (None: nothing).

    The schema is the tool's whole one (`full_schema`, hidden parameters
    included), else its `args_schema`; a tool with neither checks its own input.
    Past the deadline of `json_problems_within`, a pattern raises TimeoutError.
    """
    schema = json_schema(tool)
    if schema is None:
        return None
    try:
        errors = sorted(_validator(schema).iter_errors(dict(arguments)), key=str)
    except regex.error as error:
        # The stubs leave out the pattern the error is about (always set on it).
        return BAD_PATTERN.format(pattern=getattr(error, "pattern", None))
    if not errors:
        return None
    return "; ".join(_json_problem(error) for error in errors[:MAX_PROBLEMS])


def json_schema(tool: BaseTool) -> dict[str, object] | None:
    """The tool's whole JSON schema (`full_schema`, hidden parameters included), if it has one."""
    schema: object = getattr(tool, "full_schema", None) or tool.args_schema
    return schema if is_object(schema) else None


# Per schema (by id, with the schema itself to tell a reused id): its validator, made once.
_VALIDATORS: dict[int, tuple[dict[str, object], Checker]] = {}
# Per schema (the same way): whether a pattern keyword occurs anywhere in it.
_PATTERNS: dict[int, tuple[dict[str, object], bool]] = {}


def _has_patterns(schema: dict[str, object]) -> bool:
    cached = _PATTERNS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _PATTERNS[id(schema)] = (schema, _mentions(schema, PATTERN_KEYWORDS))
    return cached[1]


def _mentions(value: object, keys: frozenset[str]) -> bool:
    """Whether any of `keys` is a key anywhere in `value` (a property so named counts too)."""
    pending: list[object] = [value]
    while pending:
        item = pending.pop()
        if is_mapping(item):
            if not keys.isdisjoint(item):
                return True
            pending.extend(item.values())
        elif is_array(item):
            pending.extend(item)
    return False


def _validator(schema: dict[str, object]) -> Checker:
    # Imported with the first JSON-schema tool's call: most runs have none.
    from jsonschema import validators

    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        # jsonschema's stubs type the class by its narrower `Validator` protocol (see `Checker`).
        checker = _with_safe_patterns(cast("CheckerClass", validators.validator_for(schema)))
        cached = _VALIDATORS[id(schema)] = (schema, checker(schema))
    return cached[1]


def _with_safe_patterns(base: CheckerClass) -> CheckerClass:
    """`base` with every keyword that matches a pattern matching it through `_search`."""
    from jsonschema import validators

    keywords: dict[str, Keyword] = {"pattern": _pattern, "patternProperties": _pattern_properties}
    if "additionalProperties" in base.VALIDATORS:
        keywords["additionalProperties"] = _additional_properties(
            base.VALIDATORS["additionalProperties"]
        )
    extended = validators.extend(base, keywords)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]  # jsonschema's stubs leave `extend` unannotated
    return cast("CheckerClass", extended)


def _search(pattern: str, text: str) -> bool:
    """Whether `pattern` occurs in `text`; TimeoutError at the deadline, `regex.error` if bad."""
    deadline = _deadline.get()
    timeout = None if deadline is None else max(deadline - time.monotonic(), MIN_SECONDS)
    return regex.search(pattern, text, timeout=timeout, concurrent=True) is not None


def _pattern(
    validator: Checker, pattern: str, instance: object, schema: Mapping[str, object]
) -> Iterator[JsonSchemaError]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, str(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Checker,
    patterns: Mapping[str, object],
    instance: object,
    schema: Mapping[str, object],
) -> Iterator[JsonSchemaError]:
    if not validator.is_type(instance, "object"):
        return
    assert is_mapping(instance)
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(original: Keyword) -> Keyword:
    """jsonschema's keyword, whose own pattern matching (with `re`) runs only without patterns."""

    def keyword(
        validator: Checker, allowed: object, instance: object, schema: Mapping[str, object]
    ) -> Iterator[JsonSchemaError]:
        from jsonschema.exceptions import ValidationError

        patterns = schema.get("patternProperties")
        if not is_mapping(patterns) or not validator.is_type(instance, "object"):
            yield from original(validator, allowed, instance, schema)
            return
        assert is_mapping(instance)
        named = properties(schema)
        extras = sorted(
            key
            for key in instance
            if key not in named and not any(_search(p, key) for p in patterns)
        )
        if validator.is_type(allowed, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], allowed, path=extra)
        elif not allowed and extras:
            joined = ", ".join(repr(extra) for extra in extras)
            yield ValidationError(f"{joined} match none of the patterns {sorted(patterns)!r}")

    return keyword


def _json_problem(error: JsonSchemaError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
