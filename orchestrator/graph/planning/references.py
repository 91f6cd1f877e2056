"""References in a task's arguments to the results of the tasks it depends on.

`"{{t1.data.city}}"` is the `city` of task t1's result data; a path walks the
result envelope (`status`, `message`, `data`, ...) by keys, and lists by
position (`{{t1.data.items.0.name}}`). An argument that is one reference alone
takes the value as it is (a number stays a number, an object an object); one
with text around it takes the value written as text (JSON for anything but a
string). References are resolved before the call is validated, so the call is
checked as it will run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping

from orchestrator.dispatch.json_shape import is_array, is_mapping, is_object
from orchestrator.errors import UnresolvedReferenceError

REFERENCE = re.compile(r"\{\{\s*([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
NO_RESULT = "{task} has no result to take {reference} from"
NO_VALUE = "{reference}: {task}'s result has no {part!r} there{known}"


def referenced_tasks(value: object) -> Iterator[str]:
    """The ids of the tasks `value` (an argument, at any depth) refers to."""
    for text in _strings(value):
        for found in REFERENCE.finditer(text):
            yield found.group(1)


def has_reference(value: object) -> bool:
    """Whether `value` holds a reference anywhere."""
    return next(referenced_tasks(value), None) is not None


def resolve(value: object, results: Mapping[str, Mapping[str, object] | None]) -> object:
    """`value` with each reference replaced by what it names in `results` (by task id).

    Raises UnresolvedReferenceError, naming the reference, when a task has no
    result or its result no such value.
    """
    if isinstance(value, str):
        return _resolved_text(value, results)
    if is_array(value):
        return [resolve(item, results) for item in value]
    if is_object(value):
        return {key: resolve(item, results) for key, item in value.items()}
    return value


def resolve_arguments(
    arguments: Mapping[str, object], results: Mapping[str, Mapping[str, object] | None]
) -> dict[str, object]:
    """A task's `arguments` with their references resolved (see `resolve`)."""
    return {key: resolve(value, results) for key, value in arguments.items()}


def _resolved_text(text: str, results: Mapping[str, Mapping[str, object] | None]) -> object:
    whole = REFERENCE.fullmatch(text.strip())
    if whole is not None:
        return _value(whole, results)
    return REFERENCE.sub(lambda found: _as_text(_value(found, results)), text)


def _value(found: re.Match[str], results: Mapping[str, Mapping[str, object] | None]) -> object:
    task, path = found.group(1), found.group(2)
    reference = found.group(0)
    current: object = results.get(task)
    if current is None:
        raise UnresolvedReferenceError(NO_RESULT.format(task=task, reference=reference))
    for part in path.split(".")[1:]:
        current = _step(current, part, task=task, reference=reference)
    return current


def _step(current: object, part: str, *, task: str, reference: str) -> object:
    if is_mapping(current) and part in current:
        return current[part]
    if is_array(current) and part.isdigit() and int(part) < len(current):
        return current[int(part)]
    known = ""
    if is_mapping(current):
        known = f" (it has {', '.join(map(repr, list(current)[:10]))})" if current else " (it is empty)"
    elif is_array(current):
        known = f" (a list of {len(current)})"
    raise UnresolvedReferenceError(
        NO_VALUE.format(reference=reference, task=task, part=part, known=known)
    )


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif is_array(value):
        for item in value:
            yield from _strings(item)
    elif is_object(value):
        for item in value.values():
            yield from _strings(item)
