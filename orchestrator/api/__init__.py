"""`orchestrator serve`: the orchestrator over HTTP, as the LangGraph Agent Server's API speaks.

Every request is authenticated (`identity`) and acts as its user under
row-level security: the same graph, pipeline, approvals, budgets and request
log as `chat`, reached by `langgraph-sdk` clients and `chat --server`.
"""
