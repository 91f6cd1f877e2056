"""A warm process for short commands: the product loaded once, each `ask`, `run` and
`mcp serve` a fork of it.

The embedded database stays up between commands (`store.warm_server`); what is
left of a short command's time is importing LangChain, LangGraph, SQLAlchemy and
the rest, every time. A warm process imports them once and waits on a Unix socket;
a command hands it its arguments, environment, working directory and standard
streams, and a fork of the warm process runs the command with them, as the
Gradle daemon runs builds. Nothing here imports the product above it: the entry
point (`launch`) hands the server the command to run.
"""
