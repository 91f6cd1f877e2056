"""`chat --server URL` and `ask --server URL`: the terminal chat as a client of `orchestrator serve`.

connection: the server, through `langgraph-sdk`, and its errors as one line; turn: a run's
stream as the chat's events and `TurnResult`; run: the command's loop and a turn at the
terminal, shared by chat (the chat loop) and ask.
"""
