"""The model side of an agent: every model call runs through a chain of middleware.

The chain's shape is in `chain`, its defaults in `defaults`, one concern a module.
"""

from orchestrator.graph.model_pipeline.chain import (
    ModelAnswer,
    ModelCall,
    ModelHandler,
    ModelMiddleware,
)
from orchestrator.graph.model_pipeline.retrieval import Retriever

__all__ = ["ModelAnswer", "ModelCall", "ModelHandler", "ModelMiddleware", "Retriever"]
