"""Moved to `orchestrator.tools.sources.folders`; kept so that older imports still work."""

from orchestrator.tools.sources.folders import FolderSource, LoadedTool, visible_sources  # noqa: F401
