"""LangChain's OpenAI chat model, recognised without importing it when no such model was built."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_openai.chat_models.base import BaseChatOpenAI


def openai_client(model: object) -> BaseChatOpenAI | None:
    """`model` when it is LangChain's OpenAI chat model (None: another, or none built yet).

    `langchain_openai` is not imported unless such a model was built: the offline
    model needs none of it.
    """
    openai_models = sys.modules.get("langchain_openai.chat_models.base")
    if openai_models is None:
        return None
    client: type[BaseChatOpenAI] = openai_models.BaseChatOpenAI
    return model if isinstance(model, client) else None
