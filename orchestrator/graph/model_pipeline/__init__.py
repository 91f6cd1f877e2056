"""The model side of an agent: every model call runs through a chain of middleware.

The chain's shape is in `model_call` (composed by `orchestrator.chain`), its defaults in
`defaults`, one concern a module.
"""

from orchestrator.graph.model_pipeline.model_call import (
    ModelAnswer,
    ModelCall,
    ModelHandler,
    ModelMiddleware,
)
from orchestrator.graph.model_pipeline.retrieval import ContextLookup

__all__ = ["ContextLookup", "ModelAnswer", "ModelCall", "ModelHandler", "ModelMiddleware"]
