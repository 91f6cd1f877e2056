"""OpenAI's id of a streamed reply (`chatcmpl-...`), kept where a whole reply keeps it.

langchain-openai puts a whole reply's id in its `response_metadata["id"]`, but drops
the id each streamed chunk carries, so a streamed reply is known only by LangChain's
own run id. The model built for `openai:` is LangChain's own class with that one gap
filled: each chunk's `response_metadata` keeps the chunk's id (equal ids are merged
as one, not joined), which tracing records as `gen_ai.response.id`.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, cast

from orchestrator.llm.openai_client import openai_client

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.outputs import ChatGenerationChunk
    from langchain_openai.chat_models.base import BaseChatOpenAI


def with_response_ids(model: BaseChatModel) -> BaseChatModel:
    """`model` built again, from the fields it was given, as its class keeping streamed ids.

    Only LangChain's OpenAI chat models; any other model is returned as it is.
    """
    client = openai_client(model)
    if client is None:
        return model
    given = {name: getattr(client, name) for name in client.model_fields_set}
    return _keeping_ids(type(client))(**given)


@cache
def _keeping_ids(base: type[BaseChatOpenAI]) -> type[BaseChatOpenAI]:
    class KeepingIds(base):
        def _convert_chunk_to_generation_chunk(
            self, chunk: dict[str, object], default_chunk_class: type, base_generation_info: dict[str, object] | None
        ) -> ChatGenerationChunk | None:
            made = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
            given = chunk.get("id")
            if made is not None and isinstance(given, str) and given:
                made.message.response_metadata["id"] = given
            return made

    KeepingIds.__name__ = KeepingIds.__qualname__ = base.__name__
    return cast("type[BaseChatOpenAI]", KeepingIds)
