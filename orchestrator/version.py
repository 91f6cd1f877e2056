"""The package's version, for those below the package's front (`orchestrator/__init__.py`)
that name it: importing the front would make them depend on everything it exports."""

__version__ = "0.1.0"  # as pyproject.toml's [project] version
