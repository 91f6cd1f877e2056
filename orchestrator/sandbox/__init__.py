"""The kernel sandbox: Landlock rules and resource limits for the processes tools run in.

Only the standard library is used here, so that `launcher.py` can run as a
script (by path, without site-packages) between the orchestrator and the
command it holds: it restricts itself, then executes the command.
"""
