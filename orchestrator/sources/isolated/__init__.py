"""Python tool folders with `sandbox: {isolation: process}`: their actions run in a child process.

One warm child per folder (`process.FolderProcess`), held by the folder's
sandbox (Landlock and resource limits, see `sandbox`), speaking JSON lines
over its standard input and output (`protocol`); `child` is the child's side.
"""
