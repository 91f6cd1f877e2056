"""Every approved action outside a model's tool call: from the command line (`orchestrator run`)
and as a node of your own LangGraph workflow (`as_node`), with structured input or free text.

Each run is a call through the same dispatch pipeline a model's call takes (the request
log, scope, approval, timeouts, usage), and its outcome is an `Envelope`.
"""
