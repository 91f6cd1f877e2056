"""Folder trust: discovery, hashing, the importer, signed approvals, `tool_config.yaml`, scope and sensitivity rules.

Nothing here runs a folder's code before it is approved.
"""
