"""The person at a terminal: line sources, questions and their answers, Ctrl-C, turn rendering.

Below the commands (`cli/`), which use them; above the session, whose events they render.
"""
