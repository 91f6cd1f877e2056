"""A request's JSON body as one of `bodies`' models, or a 422 that names what is wrong."""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from orchestrator.errors import RequestRefusedError, validation_problems

MAX_BODY_BYTES = 1_000_000
Model = TypeVar("Model", bound=BaseModel)


async def body_of(request: Request, model: type[Model]) -> Model:
    """The body, validated; an empty body is an empty object (the SDK sends none for defaults)."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise RequestRefusedError(413, f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        value: object = json.loads(raw) if raw.strip() else {}
    except ValueError as problem:
        raise RequestRefusedError(422, f"the body is not JSON: {problem}") from problem
    try:
        return model.model_validate(value)
    except ValidationError as problem:
        raise RequestRefusedError(422, validation_problems(problem)) from problem
